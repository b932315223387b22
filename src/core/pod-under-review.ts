// A Pod, or one pod template of a workload, located in the admitted object. The subject finds them, workload
// templates name them, the restrictions read them: the type sits below all three.
import type { Located } from "./pod-restriction/restrictions/restriction-support.ts";

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
