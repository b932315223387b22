// Where a policy came from, for messages and status. At the bottom of the core: every kind names its origin.

/** Where a policy came from: a file (and document in it), or a custom resource. */
export interface PolicyOrigin {
  /** A file path relative to the policy root, or e.g. "k8s:ImagePolicy/name". */
  origin: string;
  /** 1-based YAML document within a file. */
  document?: number;
}
