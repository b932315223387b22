// Which cluster a review reads. Several clusters may share one server; what a review reads of a cluster's API
// (namespace labels, pods' pull secrets, `k8s://` keys, pods, Events) comes from the caller's own cluster:
//   - the server's own cluster (serve's --kubeconfig or in-cluster config, and --namespaces): for callers of the
//     cluster named by --cluster-name, callers with no cluster (unauthenticated), and in-process callers;
//   - another cluster's kubeconfig (--cluster-kubeconfig NAME=FILE): for that cluster's callers;
//   - none: a caller whose cluster has neither. What needs a read is then refused with the reason, never answered
//     from another cluster.
import type { KubeClient } from "../kube/kube-client.ts";
import { clusterOf, type Caller } from "../audit/caller.ts";
import { CLUSTER_UNREADABLE, unreadableClusterReason } from "../core/cluster-scope.ts";
import type { NamespaceLabelSource } from "../core/namespace-labels.ts";
import { ImprimaturError } from "../errors/imprimatur-error.ts";

/** A read of a cluster the server has no kubeconfig for (a pod's pull secrets, a k8s:// key). */
export class ClusterUnreadableError extends ImprimaturError<typeof CLUSTER_UNREADABLE> {}

/** What the server reads of one cluster: its API (absent: no API access) and its namespaces' labels. */
export interface ClusterConnection {
  kube?: KubeClient;
  namespaces: NamespaceLabelSource;
}

/** The clusters other than the server's own, and the name of its own. */
export interface ClusterConnections {
  /** The server's own cluster's name (serve --cluster-name); undefined: only callers with no cluster are its. */
  home?: string;
  /** Other clusters by name (serve --cluster-kubeconfig). */
  others: ReadonlyMap<string, ClusterConnection>;
}

export const NO_OTHER_CLUSTERS: ClusterConnections = { others: new Map() };

export type ClusterToRead =
  | { kind: "home" }
  | { kind: "other"; cluster: string; connection: ClusterConnection }
  /** The caller's cluster has no kubeconfig here: `reason` refuses what needs a read. */
  | { kind: "unreadable"; cluster: string; reason: string };

/** The cluster whose API a review for `caller` reads. */
export function clusterToRead(caller: Caller | undefined, connections: ClusterConnections): ClusterToRead {
  const cluster = clusterOf(caller);
  if (cluster === undefined || cluster === connections.home) return { kind: "home" };
  const connection = connections.others.get(cluster);
  if (connection) return { kind: "other", cluster, connection };
  return { kind: "unreadable", cluster, reason: unreadableClusterReason(cluster) };
}

/** Whether a request from `caller` comes from the server's own cluster (whose namespaced policies apply to it). */
export function fromHomeCluster(caller: Caller | undefined, connections: ClusterConnections): boolean {
  const cluster = clusterOf(caller);
  return cluster === undefined || cluster === connections.home;
}
