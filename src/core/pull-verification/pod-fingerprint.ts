// Which pod a CRI image call is for. The kubelet's pull decision calls ImageStatus with the pod's annotations, and
// PullImage with the pod sandbox's, which are the same map; it adds kubernetes.io/config.source and
// kubernetes.io/config.seen (a nanosecond timestamp) to every pod it runs. Other callers (its image-user lookup,
// crictl, image GC) send none. A hash of the whole map therefore tells one pod's calls apart from another's,
// without the pod's name, which ImageStatus does not carry.
import { createHash } from "node:crypto";

const KUBELET_SOURCE = "kubernetes.io/config.source";

/** The pod's fingerprint, or undefined when the call is not the kubelet's pull decision for a pod. */
export function podFingerprint(annotations: Readonly<Record<string, string>> | undefined): string | undefined {
  if (!annotations || annotations[KUBELET_SOURCE] === undefined) return undefined;
  const entries = Object.entries(annotations).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return createHash("sha256").update(JSON.stringify(entries)).digest("hex");
}
