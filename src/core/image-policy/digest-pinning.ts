// Tag→digest pinning (seed 003, requirement 1; closes the tag→ID race of seed 000): which images a request
// asks to pin, and — once the edge has resolved their tags — the decision: JSON patches that rewrite
// `repo:tag` to `repo:tag@sha256:…`, a record of what was pinned (pod annotation, audit annotations), and
// the failure policy for tags that could not be resolved. Pure: resolution happens at the edge.
import { CLUSTER_UNREADABLE } from "../cluster-scope.ts";
import { allow, deny, type Decision, type JsonPatchOperation, type Violation } from "../decision.ts";
import { fieldPathToPointer } from "../primitives/field-path.ts";
import { matchingRule, policyApplies, type EvaluationContext, type ImagePolicy } from "./image-policy.ts";
import { parseImageReferenceCached, type ImageReference } from "../image-reference.ts";
import { isObject } from "../primitives/json-shapes.ts";
import { setAnnotationPatch, type ImageAt, type PodMetadataAt } from "../pod-locations.ts";

/** The pod annotation that records original → pinned references. Informational only: never trusted as proof. */
export const PINNED_IMAGES_ANNOTATION = "imprimatur.dev/pinned-images";

/** Mutate rewrites the object; Record resolves and records only (no drift between Git and the cluster). */
export type PinningMode = "mutate" | "record";

export interface PinTarget extends ImageAt {
  ref: ImageReference;
  /** The policy and rule that asked for the pin, for messages: "rules[0]". */
  policy: string;
  rule: string;
  /** The namespace of the NamespacedImagePolicy that asked; absent for a cluster policy. */
  policyNamespace?: string;
}

/**
 * A failed resolution carries the registry's error code when there is one: "unreachable", "timeout" and
 * "unavailable" mean the registry could not answer, and the failure policy decides; any other code ("not-found",
 * "unauthorized", "digest-mismatch", …) is the registry's answer, and a denial whatever the failure policy, as is
 * "address-refused" (the server did not connect: a local address the registries file does not allow).
 */
export type Resolution = { ok: true; digest: string; credentialSource: string } | { ok: false; error: string; code?: string };

/** The code of a registry the server refused to connect to (a local address the registries file does not allow). */
const ADDRESS_REFUSED = "address-refused";

/** Codes under which the registry gave no answer; without a code the failure is treated the same way. */
const NO_ANSWER_CODES: ReadonlySet<string> = new Set(["unreachable", "timeout", "unavailable"]);

/** Whether a registry failure is the registry's answer (a denial) rather than no answer (the failure policy's). */
export function registryAnswered(code: string | undefined): boolean {
  return code !== undefined && !NO_ANSWER_CODES.has(code);
}

export interface PinnedImage {
  image: string;
  pinned: string;
  field: string;
  digest: string;
  credentialSource: string;
}

export interface PinningOutcome {
  decision: Decision;
  pinned: PinnedImage[];
  failed: Array<{ target: PinTarget; error: string; code?: string }>;
}

/**
 * Images without a digest whose deciding rule, in some policy that applies to the namespace, allows them with
 * `digestMutate: true`. Images that are invalid, denied or of unknown applicability are left to validation.
 */
export function imagesToPin(policies: readonly ImagePolicy[], namespace: string, images: readonly ImageAt[], ctx: EvaluationContext): PinTarget[] {
  const applicable = policies.filter((p) => {
    const a = policyApplies(p, namespace, ctx);
    return "applies" in a && a.applies;
  });
  if (applicable.length === 0) return [];
  const targets: PinTarget[] = [];
  for (const at of images) {
    const parsed = parseImageReferenceCached(at.image);
    if (!parsed.ok || parsed.ref.digest) continue;
    for (const policy of applicable) {
      const match = matchingRule(policy, parsed.ref);
      if (match?.rule.action === "allow" && match.rule.digestMutate) {
        targets.push({
          ...at,
          ref: parsed.ref,
          policy: policy.name,
          rule: `rules[${match.rule.index}]`,
          ...(policy.namespace === undefined ? {} : { policyNamespace: policy.namespace }),
        });
        break;
      }
    }
  }
  return targets;
}

/** `nginx:1.25` + digest → `nginx:1.25@sha256:…`: the tag stays for readability; the runtime pulls by digest. */
export function pinnedReference(image: string, digest: string): string {
  return `${image}@${digest}`;
}

/**
 * The decision for resolved targets (`resolutions[i]` belongs to `targets[i]`). In mutate mode the patches pin
 * every resolved image and add the pinned-images annotation to the pod or template it belongs to.
 * Unresolved tags follow the failure policy: fail closed denies, fail open admits the tag with a warning and a
 * fail-open record.
 */
export function pinningDecision(
  targets: readonly PinTarget[],
  resolutions: readonly Resolution[],
  pods: ReadonlyArray<PodMetadataAt | undefined>,
  opts: { mode: PinningMode; failOpen: boolean },
): PinningOutcome {
  const pinned: PinnedImage[] = [];
  const failed: PinningOutcome["failed"] = [];
  targets.forEach((target, i) => {
    const r = resolutions[i];
    if (!r || !r.ok) failed.push({ target, error: r?.ok === false ? r.error : "not resolved", ...(r?.ok === false && r.code ? { code: r.code } : {}) });
    else
      pinned.push({
        image: target.image,
        pinned: pinnedReference(target.image, r.digest),
        field: target.field,
        digest: r.digest,
        credentialSource: r.credentialSource,
      });
  });

  const auditAnnotations: Record<string, string> = {};
  if (pinned.length > 0) {
    auditAnnotations[opts.mode === "mutate" ? "pinned-images" : "resolved-images"] = JSON.stringify(recordOf(pinned));
    auditAnnotations["pull-credentials"] = JSON.stringify(Object.fromEntries(pinned.map((p) => [p.image, p.credentialSource])));
  }

  const violations: Violation[] = [];
  const warnings: string[] = [];
  const failOpen: Array<{ backend: string; error: string }> = [];
  const unresolved = (target: PinTarget, message: string): Violation => ({
    policy: target.policy,
    rule: `${target.rule}.digestMutate`,
    image: target.image,
    field: target.field,
    message,
  });
  for (const { target, error, code } of failed) {
    if (code === ADDRESS_REFUSED || code === CLUSTER_UNREADABLE) {
      // Not asked at all: the reason says which address, or which cluster's kubeconfig is missing, and what to add.
      violations.push(unresolved(target, `the tag could not be resolved to a digest (${code}: ${error}); denied whatever the failure policy`));
    } else if (registryAnswered(code)) {
      violations.push(
        unresolved(
          target,
          `the tag could not be resolved to a digest (${code}: ${error}); that is the registry's answer, not an outage, so it is ` +
            `denied whatever the failure policy. Give the pod a pull secret for this registry, or fix the image reference`,
        ),
      );
    } else if (opts.failOpen) {
      warnings.push(
        `image ${JSON.stringify(target.image)} (${target.field}) was admitted without a digest: its tag could not be resolved (${error}); the server fails open`,
      );
      failOpen.push({ backend: `registry/${target.ref.registry}`, error: `${target.image}: ${error}` });
    } else {
      violations.push(
        unresolved(
          target,
          `the tag could not be resolved to a digest (${error}); denied because the server fails closed. ` +
            `Give the pod a pull secret for this registry, fix the registry settings, or pin the image yourself`,
        ),
      );
    }
  }

  if (violations.length > 0) return { decision: deny(violations, { warnings, auditAnnotations }), pinned, failed };
  const decision = allow({ warnings, auditAnnotations });
  if (failOpen.length > 0) {
    decision.failOpen = failOpen;
    decision.auditAnnotations["fail-open"] = "true";
  }
  if (opts.mode === "mutate" && pinned.length > 0) decision.patches = patchesFor(targets, pinned, pods);
  return { decision, pinned, failed };
}

function recordOf(pinned: readonly PinnedImage[]): Record<string, string> {
  return Object.fromEntries(pinned.map((p) => [p.image, p.pinned]));
}

function patchesFor(targets: readonly PinTarget[], pinned: readonly PinnedImage[], pods: ReadonlyArray<PodMetadataAt | undefined>): JsonPatchOperation[] {
  const byField = new Map(pinned.map((p) => [p.field, p]));
  const patches: JsonPatchOperation[] = [];
  // Keyed by the metadata's field: bare pod specs of one custom resource share the object's metadata.
  const perMetadata = new Map<string, { pod: PodMetadataAt; list: PinnedImage[] }>();
  for (const t of targets) {
    const p = byField.get(t.field);
    if (!p) continue;
    patches.push({ op: "replace", path: fieldPathToPointer(p.field), value: p.pinned });
    const pod = pods[t.pod];
    if (!pod) continue;
    const entry = perMetadata.get(pod.field) ?? { pod, list: [] };
    entry.list.push(p);
    perMetadata.set(pod.field, entry);
  }
  for (const { pod, list } of perMetadata.values()) patches.push(annotationPatch(pod, list));
  return patches;
}

/** Adds (or extends) the pinned-images annotation, creating metadata or annotations when they are absent. */
function annotationPatch(pod: PodMetadataAt, list: readonly PinnedImage[]): JsonPatchOperation {
  const metadata = isObject(pod.value) ? pod.value : undefined;
  const annotations = metadata && isObject(metadata.annotations) ? metadata.annotations : undefined;
  const value = JSON.stringify({ ...earlierRecord(annotations?.[PINNED_IMAGES_ANNOTATION]), ...recordOf(list) });
  return setAnnotationPatch(pod, PINNED_IMAGES_ANNOTATION, value, false);
}

/** Entries of an earlier pin of this object (e.g. another container on update); anything unparsable is dropped. */
function earlierRecord(raw: unknown): Record<string, string> {
  if (typeof raw !== "string") return {};
  try {
    const parsed: unknown = JSON.parse(raw);
    if (!isObject(parsed)) return {};
    return Object.fromEntries(Object.entries(parsed).filter((e): e is [string, string] => typeof e[1] === "string"));
  } catch {
    return {};
  }
}
