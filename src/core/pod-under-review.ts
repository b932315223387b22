// A Pod, or one pod template of a workload, located in the admitted object. The subject finds them, workload
// templates name them, the restrictions read them: the type sits below all three.

/** A value of the object under review and its field path. */
export interface Located {
  value: unknown;
  field: string;
  /** Set when the value is an effective one taken from elsewhere, e.g. "set at pod level for spec.containers[0]". */
  note?: string;
  /** With childOf overrides: whether the struct holding this value is present (zero values apply). */
  parentPresent?: boolean;
  /** Overrides how children are found (effective security contexts merge the pod's settings in). */
  childOf?: (key: string) => Located;
}

/** A Pod, or the pod template of a workload, as the restrictions see it. */
export interface PodUnderReview {
  /** ObjectMeta and its field path ("metadata" or e.g. "spec.template.metadata"). */
  metadata: Located;
  /** PodSpec and its field path ("spec" or e.g. "spec.template.spec"). */
  spec: Located;
  isTemplate: boolean;
  /** Only the containers are known (an ephemeral-containers update from Kubernetes < 1.22). */
  onlyContainers?: boolean;
}
