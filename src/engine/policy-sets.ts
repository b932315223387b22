// The policy sets the engine judges by: the loaded set, swapped as a whole on reload so that an admission sees one
// set from start to end, and the set each cluster sees when some policy is scoped to clusters (spec.clusters) or
// the cluster has policy resources of its own (src/core/policy-set/cluster-policies.ts). Per-cluster sets are made on first
// use and dropped on every change.
import { clusterOf, type Caller } from "../audit/caller.ts";
import { hasNamespacedPolicies, isClusterScoped, policiesForCluster, withClusterOwnPolicies } from "../core/policy-set/cluster-policies.ts";
import { preparePolicies, type PolicySet, type PreparedPolicies } from "../core/policy-set/policy-kinds.ts";
import { fromHomeCluster, type ClusterConnections } from "./cluster-reads.ts";

export class PolicySets {
  private loaded: PreparedPolicies;
  private byCluster = new Map<string | undefined, PreparedPolicies>();
  /** Other clusters' own policy resources, by cluster. */
  private readonly ownPolicies = new Map<string, PolicySet>();
  private readonly clusters: ClusterConnections;

  constructor(set: PolicySet, clusters: ClusterConnections) {
    this.loaded = preparePolicies(set);
    this.clusters = clusters;
  }

  /** Every loaded policy, as in-process callers (`check`, `imprimatur test`) are judged. */
  get all(): PreparedPolicies {
    return this.loaded;
  }

  replace(set: PolicySet): void {
    this.loaded = preparePolicies(set);
    this.byCluster = new Map();
  }

  /** Another cluster's own policy resources (serve --policy-crds with --cluster-kubeconfig); not the server's own cluster. */
  replaceClusterOwn(cluster: string, set: PolicySet): void {
    this.ownPolicies.set(cluster, set);
    this.byCluster = new Map();
  }

  /**
   * The policies a request is judged by: those scoped to no cluster and those naming the caller's cluster, and
   * namespaced policies for the server's own cluster's requests only; every policy for an in-process caller (no
   * `caller`). `ownCluster`: a request of the server's own cluster with no caller (the background scan), judged
   * by the policies of the cluster --cluster-name names.
   */
  forCaller(caller: Caller | undefined, ownCluster = false): PreparedPolicies {
    if (!caller && !ownCluster) return this.loaded;
    const cluster = ownCluster ? this.clusters.home : clusterOf(caller);
    return this.forCluster(cluster, ownCluster || fromHomeCluster(caller, this.clusters));
  }

  /** The policies a request of `cluster` is judged by; `home`: the server's own cluster (its namespaced policies apply). */
  forCluster(cluster: string | undefined, home: boolean): PreparedPolicies {
    const loaded = this.loaded;
    const own = home || cluster === undefined ? undefined : this.ownPolicies.get(cluster);
    if (!own && !isClusterScoped(loaded.set) && (home || !hasNamespacedPolicies(loaded.set))) return loaded;
    // Bounded: cluster names come from the configured tokens and from certificates the client CA issued. The
    // cluster decides whether it is the server's own, so it is the whole key.
    let prepared = this.byCluster.get(cluster);
    if (!prepared) {
      const set = own && cluster !== undefined ? withClusterOwnPolicies(loaded.set, own, cluster) : policiesForCluster(loaded.set, cluster, home);
      this.byCluster.set(cluster, (prepared = preparePolicies(set)));
    }
    return prepared;
  }
}
