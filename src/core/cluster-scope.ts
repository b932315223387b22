// Several clusters may share one server: each authenticated caller (a kube-apiserver) carries a cluster name,
// and ImagePolicies and PodRestrictions may be scoped with `spec.clusters`, as they are to namespaces with
// `namespaces`. Scoping picks which policies a cluster sees before evaluation, so the kinds' evaluation does
// not change. TrustRoots are shared: they say whom to trust, not what to require.
import type { PolicySet } from "./policy-kinds.ts";

/** Whether a policy covers a request from `cluster` (undefined: a caller with no cluster). Absent `clusters`: every cluster. */
export function coversCluster(policy: { readonly clusters?: readonly string[] }, cluster: string | undefined): boolean {
  return policy.clusters === undefined || (cluster !== undefined && policy.clusters.includes(cluster));
}

/** Whether any policy of the set is scoped to clusters (when none is, every cluster sees the whole set). */
export function isClusterScoped(set: PolicySet): boolean {
  return set.ImagePolicy.some((p) => p.clusters !== undefined) || set.PodRestriction.some((p) => p.clusters !== undefined);
}

/** The policies a request from `cluster` is judged by: those scoped to no cluster, and those naming it. */
export function policiesForCluster(set: PolicySet, cluster: string | undefined): PolicySet {
  return {
    ...set,
    ImagePolicy: set.ImagePolicy.filter((p) => coversCluster(p, cluster)),
    PodRestriction: set.PodRestriction.filter((p) => coversCluster(p, cluster)),
  };
}
