// The registry of policy kinds: loading, evaluation and the PolicySet all dispatch through it. Adding a kind is
// one folder (its compile, schema and evaluation) and one line here.
import type { PolicyKind } from "./policy-kind.ts";
import { imagePolicyKind } from "./image-policy/image-policy-kind.ts";
import { podRestrictionKind } from "./pod-restriction/pod-restriction-kind.ts";

export const POLICY_KINDS = {
  ImagePolicy: imagePolicyKind,
  PodRestriction: podRestrictionKind,
} as const;

export type KindName = keyof typeof POLICY_KINDS;
type CompiledOf<K extends KindName> = (typeof POLICY_KINDS)[K] extends PolicyKind<infer C, unknown> ? C : never;
type PreparedOf<K extends KindName> = (typeof POLICY_KINDS)[K] extends PolicyKind<never, infer P> ? P : never;

/** Compiled policies keyed by kind. */
export type PolicySet = { readonly [K in KindName]: readonly CompiledOf<K>[] };
/** Each kind's prepared form (indexes), built once per load. */
export type PreparedPolicies = { readonly [K in KindName]: PreparedOf<K> };

export const KIND_NAMES = Object.keys(POLICY_KINDS) as KindName[];

export function emptyPolicySet(): PolicySet {
  return Object.fromEntries(KIND_NAMES.map((k) => [k, []])) as unknown as PolicySet;
}

/** The kind a document declares, when its apiVersion is one the kind accepts. */
export function kindOf(apiVersion: unknown, kind: unknown): KindName | undefined {
  const name = KIND_NAMES.find((k) => k === kind);
  return name && (POLICY_KINDS[name].apiVersions as readonly unknown[]).includes(apiVersion) ? name : undefined;
}

export function preparePolicies(set: PolicySet): PreparedPolicies {
  const out: Record<string, unknown> = {};
  for (const k of KIND_NAMES) out[k] = (POLICY_KINDS[k] as PolicyKind<never, unknown>).prepare(set[k] as never[]);
  return out as PreparedPolicies;
}

export function policyCount(set: PolicySet): number {
  return KIND_NAMES.reduce((n, k) => n + set[k].length, 0);
}
