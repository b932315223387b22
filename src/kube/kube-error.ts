// What keeps the Kubernetes API from being used, before any request is answered: no usable kubeconfig or service
// account, Lease timings that cannot work, a Secret without the key asked for. A request the API did not answer
// usably is a KubeApiError (api-requests.ts).
import { ImprimaturError } from "../errors/imprimatur-error.ts";

export type KubeErrorCode =
  /** The kubeconfig file cannot be read or parsed. */
  | "unreadable-kubeconfig"
  /** The kubeconfig sets no current-context. */
  | "no-current-context"
  /** The current context names a cluster the kubeconfig does not define. */
  | "undefined-cluster"
  /** In a pod (KUBERNETES_SERVICE_HOST), but the service account's token or CA is not mounted. */
  | "missing-service-account"
  /** Neither a kubeconfig nor a pod's service account. */
  | "no-kubernetes-api"
  /** Leader election timings that are not lease duration > renew deadline > retry period > 0. */
  | "invalid-lease-timing"
  /** The Secret was read, but holds no data under the key asked for. */
  | "missing-secret-key"
  /** A cache or watch closed while it was starting. */
  | "closed";

export class KubeError extends ImprimaturError<KubeErrorCode> {}
