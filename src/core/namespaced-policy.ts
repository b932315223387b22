// Namespaced policies (NamespacedImagePolicy, NamespacedPodRestriction): what their namespace owners write,
// compiled into the cluster kind's list with the scope fixed to their own namespace. A namespace owner may only
// add restrictions there: whatever would reach beyond the namespace (other namespaces, cluster-wide settings,
// another namespace's Secrets) is refused at load, saying why. Pure.
import { isObject } from "./primitives/json-shapes.ts";
import type { FieldIssue } from "./policy-kind.ts";

/** A namespace name: a DNS label (RFC 1123), as the API requires. */
const NAMESPACE = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

export interface NamespacedDocument {
  namespace: string;
  /** The document as its cluster kind's compiler reads it: the cluster kind, metadata without the namespace. */
  clusterDocument: Record<string, unknown>;
}

/**
 * Reads metadata.namespace and refuses the fields a namespaced kind cannot have (`refused`: path → why). The
 * issues are the document's; the cluster document is returned only when there are none.
 */
export function readNamespacedDocument(
  document: Record<string, unknown>,
  kinds: { namespaced: string; cluster: string },
  refused: ReadonlyArray<{ path: readonly string[]; why: string }>,
): { namespaced?: NamespacedDocument; issues: FieldIssue[] } {
  const issues: FieldIssue[] = [];
  const metadata = isObject(document.metadata) ? document.metadata : {};
  const namespace = metadata.namespace;
  if (namespace === undefined)
    issues.push({ path: ["metadata", "namespace"], message: `missing required field "namespace": a ${kinds.namespaced} applies in the namespace it is in` });
  else if (typeof namespace !== "string" || namespace.length > 63 || !NAMESPACE.test(namespace))
    issues.push({ path: ["metadata", "namespace"], message: `must be a namespace name (a lowercase DNS label), got ${JSON.stringify(namespace)}` });
  for (const { path, why } of refused) {
    if (valueAt(document, path) !== undefined)
      issues.push({
        path: [...path],
        message: `a ${kinds.namespaced} cannot set ${path.at(-1)}: ${why} (${/^[AEIOU]/.test(kinds.cluster) ? "an" : "a"} ${kinds.cluster} can)`,
      });
  }
  if (issues.length > 0) return { issues };
  const { namespace: _namespace, ...clusterMetadata } = metadata;
  return {
    namespaced: { namespace: namespace as string, clusterDocument: { ...document, kind: kinds.cluster, metadata: clusterMetadata } },
    issues,
  };
}

/** How a namespaced policy is named in the compiled set and in messages: "shop/name" (a cluster policy's name has no "/"). */
export function namespacedPolicyName(namespace: string, name: string): string {
  return `${namespace}/${name}`;
}

/** The object's own name (metadata.name) back from a namespaced policy's name. */
export function namespacedObjectName(namespace: string, policyName: string): string {
  return policyName.startsWith(`${namespace}/`) ? policyName.slice(namespace.length + 1) : policyName;
}

/** The fields that fix a namespaced policy's scope to its namespace, with the reason given when one is set. */
export const SCOPE_IS_THE_NAMESPACE = "it applies only in its own namespace";

function valueAt(document: unknown, path: readonly string[]): unknown {
  let at = document;
  for (const key of path) {
    if (!isObject(at)) return undefined;
    at = at[key];
  }
  return at;
}

/**
 * A cluster kind's document with metadata.namespace: refused, since it would apply everywhere while it reads as a
 * policy of that namespace. Undefined when there is none.
 */
export function clusterKindNamespaceIssue(document: Record<string, unknown>, kinds: { namespaced: string; cluster: string }): FieldIssue | undefined {
  if (!isObject(document.metadata) || document.metadata.namespace === undefined) return undefined;
  return {
    path: ["metadata", "namespace"],
    message: `${/^[AEIOU]/.test(kinds.cluster) ? "an" : "a"} ${kinds.cluster} is cluster-wide and has no namespace; for a policy of one namespace write kind ${kinds.namespaced}`,
  };
}
