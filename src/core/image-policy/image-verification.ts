// The seam between image policies and signature verification. The core says which images an allow rule with
// attestors admits only once verified (verificationsNeeded); the edge verifies them (src/verification/) and
// hands the results back by key (verification-results.ts); evaluation then turns each into a pass, a denial that
// names the missing signer, or — when the registry could not answer and the server fails open — an audited
// fail-open admission; and the verified images are recorded on the pods (verifiedImagesPatches).
import type { JsonPatchOperation } from "../decision.ts";
import { parseImageReferenceCached, type ImageReference } from "../image-reference.ts";
import { setAnnotationPatch, type ImageAt, type PodMetadataAt } from "../pod-locations.ts";
import { matchingRule, policyApplies, verifies, type EvaluationContext, type ImagePolicy, type ImageRule } from "./image-policy.ts";
import { verificationKey, verifiedImagesText, type ImageVerification, type VerificationResults } from "../verification-results.ts";

export interface VerificationNeed extends ImageAt {
  ref: ImageReference;
  policy: ImagePolicy;
  rule: ImageRule;
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
      // A rule that cannot verify (a missing trust root) denies without a lookup.
      if (match?.rule.action !== "allow" || !verifies(match.rule) || match.rule.unverifiable !== undefined) continue;
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
    // Each group holds at least one verified result, so there is a text.
    setAnnotationPatch(at, VERIFIED_IMAGES_ANNOTATION, verifiedImagesText(verified) ?? "{}", pinnedAt.has(at.field)),
  );
}
