// The seam between image policies and signature verification. The core says which images an allow rule with
// attestors admits only once verified (verificationsNeeded); the edge verifies them (src/verification/) and
// hands the results back by key; evaluation then turns each into a pass, a denial that names the missing
// signer, or — when the registry could not answer and the server fails open — an audited fail-open admission.
import { setAnnotationPatch, type ImageAt, type PodMetadataAt } from "../digest-pinning.ts";
import { MAX_LISTED_VIOLATIONS, type JsonPatchOperation } from "../decision.ts";
import { parseImageReferenceCached, type ImageReference } from "../image-reference.ts";
import type { SignerEvidence } from "./attestors.ts";
import { matchingRule, policyApplies, type EvaluationContext, type ImagePolicy, type ImageRule } from "./image-policy.ts";

/** Per attestation check of a rule: the statements that verified for its attestors, or why none did. */
export interface VerifiedAttestation {
  index: number;
  predicateType: string;
  /** Statements signed by at least one of the check's attestor entries; `signers`: every entry it satisfies, and by whom. */
  statements: Array<{ statement: Record<string, unknown>; signers: SignerEvidence[] }>;
  /** Why other statements of this type did not count (shortened). */
  failures: string[];
}

export type ImageVerification =
  | { status: "verified"; digest: string; evidence: SignerEvidence[]; attestations?: VerifiedAttestation[] }
  /** The signatures, or their absence, say no (or the digest could not be known: the registry's answer). */
  | { status: "denied"; digest?: string; reason: string }
  /** The registry did not answer: the failure policy decides. */
  | { status: "unavailable"; digest?: string; reason: string; registry: string };

/** Verification results of one admission, by verificationKey. */
export type VerificationResults = ReadonlyMap<string, ImageVerification>;

export interface VerificationNeed extends ImageAt {
  ref: ImageReference;
  policy: ImagePolicy;
  rule: ImageRule;
}

/** Whether a rule admits only what the edge verified: signatures, attestations, or a check of verified data. */
export function verifies(rule: ImageRule): boolean {
  return rule.attestors !== undefined || rule.attestations !== undefined || rule.validate !== undefined;
}

export function verificationKey(policy: string, rule: number, image: string): string {
  return `${policy}\u0000${rule}\u0000${image}`;
}

/** Every (image, policy, rule) whose deciding rule allows the image only with attestors. */
export function verificationsNeeded(
  policies: readonly ImagePolicy[],
  namespace: string,
  images: readonly ImageAt[],
  ctx: EvaluationContext,
): VerificationNeed[] {
  const needs: VerificationNeed[] = [];
  const applicable: ImagePolicy[] = [];
  for (const p of verifyingPolicies(policies)) {
    const applies = policyApplies(p, namespace, ctx);
    if ("applies" in applies && applies.applies) applicable.push(p);
  }
  if (applicable.length === 0) return needs;
  const needsOfImage = new Map<string, VerificationNeed[]>();
  for (const at of images) {
    const parsed = parseImageReferenceCached(at.image);
    if (!parsed.ok) continue;
    for (const policy of applicable) {
      const match = matchingRule(policy, parsed.ref);
      if (match?.rule.action !== "allow" || !verifies(match.rule)) continue;
      // The same image in two containers of a pod is verified once (the verifier's cache joins pods too).
      const rule = match.rule;
      let same = needsOfImage.get(at.image);
      if (same?.some((n) => n.pod === at.pod && n.rule.index === rule.index && n.policy.name === policy.name)) continue;
      if (!same) needsOfImage.set(at.image, (same = []));
      const need = { ...at, ref: parsed.ref, policy, rule };
      same.push(need);
      needs.push(need);
    }
  }
  return needs;
}

// Which policies of a loaded set have a verifying rule, worked out once per set (the set is replaced, not changed, on reload).
const verifyingByPolicySet = new WeakMap<readonly ImagePolicy[], readonly ImagePolicy[]>();

function verifyingPolicies(policies: readonly ImagePolicy[]): readonly ImagePolicy[] {
  let verifying = verifyingByPolicySet.get(policies);
  if (!verifying) verifyingByPolicySet.set(policies, (verifying = policies.filter((p) => p.rules.some(verifies))));
  return verifying;
}

/**
 * The audit annotation and object annotation value: image → digest and who signed it. Informational only.
 * At most MAX_LISTED_VIOLATIONS images are listed, then "…": "N more", so a huge pod cannot make a huge record.
 */
export function verifiedImagesRecord(results: VerificationResults): Record<string, VerifiedImageRecord | string> {
  const record: Record<string, VerifiedImageRecord> = {};
  let listed = 0;
  let more = 0;
  for (const [key, result] of results) {
    if (result.status !== "verified") continue;
    const image = key.split("\u0000")[2]!;
    const before = record[image];
    if (!before && listed >= MAX_LISTED_VIOLATIONS) {
      more++;
      continue;
    }
    if (!before) listed++;
    const entry: VerifiedImageRecord = before ?? { digest: result.digest, signers: [] };
    entry.signers = [...new Set([...entry.signers, ...signerNames(result.evidence)])];
    for (const a of result.attestations ?? []) {
      const signers = a.statements.flatMap((s) => s.signers.map(describeSigner));
      if (signers.length === 0) continue;
      entry.attestations = { ...entry.attestations, [a.predicateType]: [...new Set([...(entry.attestations?.[a.predicateType] ?? []), ...signers])] };
    }
    record[image] = entry;
  }
  return more > 0 ? { ...record, "…": `${more} more` } : record;
}

/** Per verified image: its digest, who signed it, and who signed the attestations its rule asked for, by predicate type. */
export interface VerifiedImageRecord {
  digest: string;
  signers: string[];
  attestations?: Record<string, string[]>;
}

// A cache hit hands out the same evidence array on every admission of an image: its names are worked out once.
const signerNamesOf = new WeakMap<readonly SignerEvidence[], string[]>();

function signerNames(evidence: readonly SignerEvidence[]): string[] {
  let names = signerNamesOf.get(evidence);
  if (!names) signerNamesOf.set(evidence, (names = evidence.map(describeSigner)));
  return names;
}

function describeSigner(e: SignerEvidence): string {
  return `${e.signer}${e.tlogIndex !== undefined ? ` (log index ${e.tlogIndex})` : e.signedAt ? ` (signed ${e.signedAt})` : ""}`;
}

/** The object annotation naming verified images, their digests and signers. Informational: never read back as proof. */
export const VERIFIED_IMAGES_ANNOTATION = "imprimatur.dev/verified-images";

/**
 * Patches that record, on each pod or template, the images verified for it. Pods sharing one metadata (bare pod
 * specs of a custom resource) share one record. `pinnedAt`: metadata fields whose annotations an earlier patch
 * of the same answer (pinning) already created.
 */
export function verifiedImagesPatches(
  needs: readonly VerificationNeed[],
  results: VerificationResults,
  pods: ReadonlyArray<PodMetadataAt | undefined>,
  pinnedAt: ReadonlySet<string>,
): JsonPatchOperation[] {
  const perMetadata = new Map<string, { at: PodMetadataAt; results: Map<string, ImageVerification> }>();
  for (const need of needs) {
    const key = verificationKey(need.policy.name, need.rule.index, need.image);
    const result = results.get(key);
    const at = pods[need.pod];
    if (result?.status !== "verified" || !at) continue;
    const group = perMetadata.get(at.field) ?? { at, results: new Map() };
    group.results.set(key, result);
    perMetadata.set(at.field, group);
  }
  return [...perMetadata.values()].map(({ at, results: verified }) =>
    setAnnotationPatch(at, VERIFIED_IMAGES_ANNOTATION, JSON.stringify(verifiedImagesRecord(verified)), pinnedAt.has(at.field)),
  );
}
