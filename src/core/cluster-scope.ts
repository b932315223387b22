// Several clusters may share one server: each authenticated caller (a kube-apiserver) carries a cluster name,
// and ImagePolicies and PodRestrictions may be scoped with `spec.clusters`, as they are to namespaces with
// `namespaces`. Scoping picks which policies a cluster sees before evaluation, so the kinds' evaluation does
// not change. TrustRoots are shared: they say whom to trust, not what to require. Reads of a cluster's API
// (namespace labels, pull secrets, k8s:// keys) go to the caller's own cluster (src/engine/cluster-reads.ts).
import type { PolicySet } from "./policy-kinds.ts";

/** Whether a policy covers a request from `cluster` (undefined: a caller with no cluster). Absent `clusters`: every cluster. */
export function coversCluster(policy: { readonly clusters?: readonly string[] }, cluster: string | undefined): boolean {
  return policy.clusters === undefined || (cluster !== undefined && policy.clusters.includes(cluster));
}

/** Whether any policy of the set is scoped to clusters (when none is, every cluster sees the whole set). */
export function isClusterScoped(set: PolicySet): boolean {
  return set.ImagePolicy.some((p) => p.clusters !== undefined) || set.PodRestriction.some((p) => p.clusters !== undefined);
}

/**
 * The policies a request from `cluster` is judged by: those scoped to no cluster, and those naming it. A namespaced
 * policy (one with a namespace) belongs to the server's own cluster, whose namespaces' owners write it: it judges
 * that cluster's requests only (`home`), whatever its spec.clusters names, so a tenant of one cluster never
 * decides for a namespace of the same name in another.
 */
export function policiesForCluster(set: PolicySet, cluster: string | undefined, home = true): PolicySet {
  const covers = (p: { readonly clusters?: readonly string[]; readonly namespace?: string | undefined }) =>
    coversCluster(p, cluster) && (home || p.namespace === undefined);
  return { ...set, ImagePolicy: set.ImagePolicy.filter(covers), PodRestriction: set.PodRestriction.filter(covers) };
}

/** Whether any policy is namespaced (a namespace owner's: the server's own cluster's only). */
export function hasNamespacedPolicies(set: PolicySet): boolean {
  return set.ImagePolicy.some((p) => p.namespace !== undefined) || set.PodRestriction.some((p) => p.namespace !== undefined);
}

/**
 * The code of a review refused because it needs a read of the caller's cluster and the server has no kubeconfig
 * for it: denied whatever the failure policy, as nothing of another cluster may stand in for the read.
 */
export const CLUSTER_UNREADABLE = "cluster-unreadable";

/** Why a review of `cluster`'s that needs a read of its API is refused. */
export function unreadableClusterReason(cluster: string): string {
  return (
    `cluster ${JSON.stringify(cluster)} has no kubeconfig on this server, so its namespace labels, pull secrets and k8s:// keys ` +
    `cannot be read (and are never read from another cluster): give serve --cluster-kubeconfig ${cluster}=FILE, ` +
    `or --cluster-name ${cluster} if it is the cluster of serve's own kubeconfig`
  );
}
