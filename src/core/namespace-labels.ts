// Where namespace labels come from is an edge concern (a file, or a watch on the Kubernetes API);
// the core only needs this lookup.

export interface NamespaceLabelSource {
  /** The labels of `namespace`, or undefined when they are not known. */
  labels(namespace: string): Record<string, string> | undefined;
  /**
   * Optional: try to make labels(namespace) answer before a decision, e.g. by reading the namespace
   * from the API on a cache miss. Resolves (never rejects) by `deadline` (epoch ms).
   */
  prepare?(namespace: string, deadline: number): Promise<void>;
}

export const NO_NAMESPACE_LABELS: NamespaceLabelSource = { labels: () => undefined };

/**
 * Where the labels a selector needs come from, said when they are unknown: the same core decides for serve and
 * for the offline commands, so the hint names both.
 */
export const UNKNOWN_NAMESPACE_LABELS_HINT =
  "give the labels: serve reads them through the Kubernetes API (--kubeconfig, or in a pod) or --namespaces FILE; " +
  "check and test take --namespaces FILE or --namespace-labels NAMESPACE:KEY=VALUE, verify --namespace-labels";
