// The registry of policy kinds: loading, evaluation and the PolicySet all dispatch through it. Adding a kind is
// one folder (its compile, schema and evaluation) and one line here.
import type { AdmissionSubject } from "./admission-subject.ts";
import type { Decision } from "./decision.ts";
import type { ImagePath } from "./image-paths.ts";
import type { CompiledPolicy, KindEvaluationContext, PolicyKind } from "./policy-kind.ts";
import { matchUsesNamespaceLabels } from "./request-match/request-match.ts";
import { imagePolicyKind } from "./image-policy/image-policy-kind.ts";
import { podRestrictionKind } from "./pod-restriction/pod-restriction-kind.ts";
import { trustRootKind } from "./trust-root/trust-root-kind.ts";

export const POLICY_KINDS = {
  ImagePolicy: imagePolicyKind,
  PodRestriction: podRestrictionKind,
  TrustRoot: trustRootKind,
} as const;

export type KindName = keyof typeof POLICY_KINDS;
type CompiledOf<K extends KindName> = (typeof POLICY_KINDS)[K] extends PolicyKind<infer C, unknown> ? C : never;
type PreparedOf<K extends KindName> = (typeof POLICY_KINDS)[K] extends PolicyKind<never, infer P> ? P : never;

/** Compiled policies keyed by kind. */
export type PolicySet = { readonly [K in KindName]: readonly CompiledOf<K>[] };
/** A loaded set ready for admissions, built once per load and swapped as a whole on reload. */
export interface PreparedPolicies {
  readonly set: PolicySet;
  /** Each kind's prepared form (indexes). */
  readonly byKind: { readonly [K in KindName]: PreparedOf<K> };
  /** Whether some kind needs the namespace's labels (fetched only then). */
  readonly usesNamespaceLabels: boolean;
  /** Image locations in custom resources that image policies declare; they extend the one extraction. */
  readonly imagePaths: readonly ImagePath[];
}

export const KIND_NAMES = Object.keys(POLICY_KINDS) as KindName[];

export function emptyPolicySet(): PolicySet {
  return Object.fromEntries(KIND_NAMES.map((k) => [k, []])) as unknown as PolicySet;
}

/** The kind a document declares, when its apiVersion is one the kind accepts. */
export function kindOf(apiVersion: unknown, kind: unknown): KindName | undefined {
  const name = KIND_NAMES.find((k) => k === kind);
  return name && (POLICY_KINDS[name].apiVersions as readonly unknown[]).includes(apiVersion) ? name : undefined;
}

/** The registry seen without each kind's own types, for loops over all kinds. */
function kindNamed(name: KindName): PolicyKind<CompiledPolicy, unknown> {
  return POLICY_KINDS[name] as PolicyKind<CompiledPolicy, unknown>;
}

export function preparePolicies(set: PolicySet): PreparedPolicies {
  const byKind: Record<string, unknown> = {};
  for (const k of KIND_NAMES) byKind[k] = kindNamed(k).prepare(set[k]);
  return {
    set,
    byKind: byKind as PreparedPolicies["byKind"],
    usesNamespaceLabels:
      KIND_NAMES.some((k) => kindNamed(k).usesNamespaceLabels(byKind[k])) ||
      [...set.ImagePolicy, ...set.PodRestriction].some((p) => matchUsesNamespaceLabels(p.match)),
    imagePaths: set.ImagePolicy.flatMap((p) => p.imagePaths ?? []),
  };
}

/** Every kind's verdict on the subject, in registration order; kinds with nothing to say are left out. */
export function evaluateKinds(prepared: PreparedPolicies, subject: AdmissionSubject, cx: KindEvaluationContext): Decision[] {
  const decisions: Decision[] = [];
  for (const k of KIND_NAMES) {
    const d = kindNamed(k).evaluate?.(prepared.byKind[k], subject, cx);
    if (d) decisions.push(d);
  }
  return decisions;
}

export function policyCount(set: PolicySet): number {
  return KIND_NAMES.reduce((n, k) => n + set[k].length, 0);
}
