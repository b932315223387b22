// The PolicyException kind: named policies, or named rules and checks of them, set aside for the workloads its
// match selects, as Kyverno's PolicyException is used. It judges nothing by itself; the engine applies the
// exceptions in force to a decision (apply-exceptions.ts). Namespaced: where it lives decides whether it is honoured
// at all (serve --exceptions-namespace), so who may write exceptions is an RBAC question on those namespaces. Pure.
import { compileGlob, type GlobMatcher } from "../primitives/glob.ts";
import { schemaCheck } from "../schema-issues.ts";
import { isObject } from "../primitives/json-shapes.ts";
import { compileLabelSelector, type LabelSelector } from "../label-selector.ts";
import { namespacedPolicyName } from "../namespaced-policy.ts";
import { POLICY_API_VERSION, type FieldIssue, type PolicyKind } from "../policy-kind.ts";
import type { PolicyOrigin } from "../policy-origin.ts";
import policyExceptionSchema from "./policy-exception.schema.json" with { type: "json" };

/** The kinds of policy an exception can name (a decision's violation names its policy's kind). */
export type ExceptedKind = "ImagePolicy" | "PodRestriction" | "NamespacedImagePolicy" | "NamespacedPodRestriction";

export interface ExceptedPolicy {
  policyName: string;
  kind?: ExceptedKind;
  /** Undefined: every rule and check of the policy. */
  ruleNames?: ReadonlySet<string>;
}

export interface ResourceFilter {
  kinds?: ReadonlySet<string>;
  namespaces?: readonly GlobMatcher[];
  names?: readonly GlobMatcher[];
  selector?: LabelSelector;
}

export interface PolicyException {
  /** "namespace/name", as namespaced policies are named in a compiled set. */
  name: string;
  namespace: string;
  source?: PolicyOrigin;
  exceptions: readonly ExceptedPolicy[];
  match: { any?: readonly ResourceFilter[]; all?: readonly ResourceFilter[] };
}

/** Violations of this "policy" are the request's own problems (an invalid reference, no policy in force): never set aside. */
export const REQUEST_LEVEL_POLICY = "imprimatur";
const NAMESPACE = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

const schemaIssues = schemaCheck(policyExceptionSchema);

export const policyExceptionKind: PolicyKind<PolicyException, readonly PolicyException[]> = {
  kind: "PolicyException",
  apiVersions: [POLICY_API_VERSION],
  compile(document, cx) {
    const shape = schemaIssues(document);
    if (shape.length > 0) return { issues: shape };
    const issues: FieldIssue[] = [];
    const metadata = document.metadata as { name: string; namespace?: unknown };
    const namespace = metadata.namespace;
    if (namespace === undefined) {
      issues.push({
        path: ["metadata", "namespace"],
        message: 'missing required field "namespace": a PolicyException is honoured only in the namespaces serve --exceptions-namespace names',
      });
    } else if (typeof namespace !== "string" || namespace.length > 63 || !NAMESPACE.test(namespace)) {
      issues.push({ path: ["metadata", "namespace"], message: `must be a namespace name (a lowercase DNS label), got ${JSON.stringify(namespace)}` });
    }
    const spec = document.spec as {
      exceptions: Array<{ policyName: string; kind?: ExceptedKind; ruleNames?: string[] }>;
      match: { any?: unknown[]; all?: unknown[] };
    };
    const exceptions = spec.exceptions.map((e, i): ExceptedPolicy => {
      if (e.policyName === REQUEST_LEVEL_POLICY) {
        issues.push({
          path: ["spec", "exceptions", i, "policyName"],
          message: `"${REQUEST_LEVEL_POLICY}" names the request's own problems (an invalid image reference, no policy in force, an unwritable audit log), which no exception sets aside`,
        });
      }
      return { policyName: e.policyName, ...(e.kind ? { kind: e.kind } : {}), ...(e.ruleNames ? { ruleNames: new Set(e.ruleNames) } : {}) };
    });
    const filters = (key: "any" | "all") => spec.match[key]?.map((raw, i) => readFilter(raw, ["spec", "match", key, i], issues));
    const any = filters("any");
    const all = filters("all");
    if (issues.length > 0) return { issues };
    return {
      policy: {
        name: namespacedPolicyName(namespace as string, metadata.name),
        namespace: namespace as string,
        source: cx.source,
        exceptions,
        match: { ...(any ? { any } : {}), ...(all ? { all } : {}) },
      },
      issues,
    };
  },
  prepare: (exceptions) => exceptions,
  usesNamespaceLabels: () => false,
};

function readFilter(raw: unknown, path: Array<string | number>, issues: FieldIssue[]): ResourceFilter {
  const resources = (raw as { resources: Record<string, unknown> }).resources;
  const at = [...path, "resources"];
  const globs = (values: unknown) => (values as string[]).map((v) => compileGlob(v, { anyChar: true }));
  const filter: ResourceFilter = {
    ...(resources.kinds ? { kinds: new Set(resources.kinds as string[]) } : {}),
    ...(resources.namespaces ? { namespaces: globs(resources.namespaces) } : {}),
    ...(resources.names ? { names: globs(resources.names) } : {}),
  };
  const selector = compileLabelSelector(resources.selector, [...at, "selector"]);
  issues.push(...selector.issues);
  if (selector.selector) filter.selector = selector.selector;
  return filter;
}

/** An object's labels, for selectors: those of its metadata, when they are strings. */
export function labelsOf(object: unknown): Record<string, string> {
  const metadata = isObject(object) ? object.metadata : undefined;
  const labels = isObject(metadata) ? metadata.labels : undefined;
  if (!isObject(labels)) return {};
  return Object.fromEntries(Object.entries(labels).filter((e): e is [string, string] => typeof e[1] === "string"));
}
