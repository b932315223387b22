// Several clusters may share one server: each authenticated caller (a kube-apiserver) carries a cluster name,
// and ImagePolicies and PodRestrictions may be scoped with `spec.clusters`, as they are to namespaces with
// `namespaces`. Scoping picks which policies a cluster sees before evaluation, so the kinds' evaluation does
// not change (src/core/policy-set/cluster-policies.ts picks a cluster's set). TrustRoots are shared: they say whom
// to trust, not what to require. Reads of a cluster's API (namespace labels, pull secrets, k8s:// keys) go to the
// caller's own cluster (src/engine/cluster-reads.ts).

/** Whether a policy covers a request from `cluster` (undefined: a caller with no cluster). Absent `clusters`: every cluster. */
export function coversCluster(policy: { readonly clusters?: readonly string[] }, cluster: string | undefined): boolean {
  return policy.clusters === undefined || (cluster !== undefined && policy.clusters.includes(cluster));
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
