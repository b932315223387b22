// A namespaced policy (namespaced-policy.ts) is its namespace's: it decides for requests of that namespace and
// nothing else. Like cluster scoping (cluster-scope.ts), the engine picks the policies a request's namespace sees
// before anything of theirs runs: a policy of another namespace is not matched, its conditions and selectors are
// not evaluated (an error in them cannot deny elsewhere), and it neither denies, warns, verifies nor pins there.
// Cluster-scoped requests see no namespaced policy. Pure; the prepared sets are remembered per loaded set.
import type { AdmissionRequest } from "../admission-review.ts";
import { preparePolicies, type PolicySet, type PreparedPolicies } from "./policy-kinds.ts";

/**
 * The namespace whose policies judge a request: the request's own, "" for a cluster-scoped one. A Namespace is
 * cluster-scoped although the apiserver names it in `request.namespace` on updates. The object's
 * metadata.namespace does not count: a mutating webhook sees a cluster-scoped object before the apiserver clears it.
 */
export function namespaceOfRequest(request: AdmissionRequest): string {
  if ((request.resource?.group ?? "") === "" && request.resource?.resource === "namespaces") return "";
  return request.namespace ?? "";
}

type Owned = { readonly namespace?: string };
const inNamespace =
  (namespace: string) =>
  (p: Owned): boolean =>
    p.namespace === undefined || p.namespace === namespace;

/** The policies a request in `namespace` ("" for cluster-scoped) is judged by: the cluster's and that namespace's own. */
export function policiesForNamespace(set: PolicySet, namespace: string): PolicySet {
  return { ...set, ImagePolicy: set.ImagePolicy.filter(inNamespace(namespace)), PodRestriction: set.PodRestriction.filter(inNamespace(namespace)) };
}

// Per loaded set (replaced, not changed, on reload): the namespaces that have policies, and the set prepared for
// each namespace asked about. Namespaces without policies of their own share one set (key ""), so there are at
// most as many entries as namespaces with policies, plus one.
const namespacesWithPolicies = new WeakMap<PreparedPolicies, ReadonlySet<string>>();
const preparedByNamespace = new WeakMap<PreparedPolicies, Map<string, PreparedPolicies>>();

/** `prepared` narrowed to the policies a request in `namespace` is judged by; `prepared` itself when nothing is left out. */
export function preparedForNamespace(prepared: PreparedPolicies, namespace: string): PreparedPolicies {
  let owners = namespacesWithPolicies.get(prepared);
  if (!owners) {
    const { ImagePolicy, PodRestriction } = prepared.set;
    owners = new Set([...ImagePolicy, ...PodRestriction].flatMap((p) => (p.namespace === undefined ? [] : [p.namespace])));
    namespacesWithPolicies.set(prepared, owners);
  }
  if (owners.size === 0 || (owners.size === 1 && owners.has(namespace))) return prepared;
  const key = owners.has(namespace) ? namespace : "";
  let byNamespace = preparedByNamespace.get(prepared);
  if (!byNamespace) preparedByNamespace.set(prepared, (byNamespace = new Map()));
  let narrowed = byNamespace.get(key);
  if (!narrowed) byNamespace.set(key, (narrowed = preparePolicies(policiesForNamespace(prepared.set, key))));
  return narrowed;
}
