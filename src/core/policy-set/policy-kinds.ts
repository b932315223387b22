// The registry of policy kinds: loading, evaluation and the PolicySet all dispatch through it. Adding a kind is
// one folder (its compile, schema and evaluation) and one line here.
import type { AdmissionSubject } from "../admission-subject.ts";
import type { Decision } from "../decision.ts";
import type { ImagePath } from "../image-paths.ts";
import { POLICY_API_VERSION, type CompileContext, type CompiledPolicy, type FieldIssue, type KindEvaluationContext, type PolicyKind } from "../policy-kind.ts";
import { matchUsesNamespaceLabels } from "../request-match/request-match.ts";
import { imagePolicyKind } from "../image-policy/image-policy-kind.ts";
import { podRestrictionKind } from "../pod-restriction/pod-restriction-kind.ts";
import { trustRootKind } from "../trust-root/trust-root-kind.ts";
import { policyExceptionKind } from "../policy-exception/policy-exception-kind.ts";
import { compileNamespacedImagePolicy } from "../image-policy/namespaced-image-policy.ts";
import { compileNamespacedPodRestriction } from "../pod-restriction/namespaced-pod-restriction.ts";

export const POLICY_KINDS = {
  ImagePolicy: imagePolicyKind,
  PodRestriction: podRestrictionKind,
  TrustRoot: trustRootKind,
  PolicyException: policyExceptionKind,
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

/**
 * The namespaced kinds (see namespaced-policy.ts): documents of their own kind that compile into their cluster
 * kind's list, scoped to their namespace, so every entry point gets them through the one loader.
 */
export const NAMESPACED_KINDS = {
  NamespacedImagePolicy: { of: "ImagePolicy", compile: compileNamespacedImagePolicy },
  NamespacedPodRestriction: { of: "PodRestriction", compile: compileNamespacedPodRestriction },
} as const satisfies Record<string, { of: KindName; compile: unknown }>;

export type NamespacedKindName = keyof typeof NAMESPACED_KINDS;
export const NAMESPACED_KIND_NAMES = Object.keys(NAMESPACED_KINDS) as NamespacedKindName[];
/** Every kind a document may declare. */
export const DOCUMENT_KIND_NAMES: readonly string[] = [...KIND_NAMES, ...NAMESPACED_KIND_NAMES];

/** The apiVersions a document kind accepts (namespaced kinds: the project's only). */
export function apiVersionsOf(kind: string): readonly string[] | undefined {
  if (KIND_NAMES.includes(kind as KindName)) return POLICY_KINDS[kind as KindName].apiVersions;
  return NAMESPACED_KIND_NAMES.includes(kind as NamespacedKindName) ? [POLICY_API_VERSION] : undefined;
}

/** How a document is compiled: the list it goes to (its kind's, or a namespaced kind's cluster kind's) and the compiler. */
export interface DocumentCompiler {
  list: KindName;
  compile(document: Record<string, unknown>, cx: CompileContext): { policy?: CompiledPolicy; issues: FieldIssue[] };
}

/** The compiler of a document's kind, when its apiVersion is one the kind accepts. */
export function compilerOf(apiVersion: unknown, kind: unknown): DocumentCompiler | undefined {
  const cluster = kindOf(apiVersion, kind);
  if (cluster) return { list: cluster, compile: (document, cx) => kindNamed(cluster).compile(document, cx) };
  const namespaced = NAMESPACED_KIND_NAMES.find((k) => k === kind);
  if (!namespaced || apiVersion !== POLICY_API_VERSION) return undefined;
  const { of, compile } = NAMESPACED_KINDS[namespaced];
  return { list: of, compile };
}

/** The kind a compiled policy's document declared: its list's, or the namespaced variant's when it has a namespace. */
export function documentKindOf(list: KindName, policy: CompiledPolicy): string {
  if ((policy as { namespace?: string }).namespace === undefined) return list;
  return NAMESPACED_KIND_NAMES.find((k) => NAMESPACED_KINDS[k].of === list) ?? list;
}

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

/** How many policies the set holds. Exceptions are not counted: they only set decisions aside, so alone they put nothing in force. */
export function policyCount(set: PolicySet): number {
  return KIND_NAMES.reduce((n, k) => (k === "PolicyException" ? n : n + set[k].length), 0);
}
