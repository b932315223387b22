// What the node judges when the kubelet pulls an image: the pod that asks, as far as the pull tells it (the
// sandbox's namespace, name, uid and labels), and the image at the digest the node resolved it to. Built as a Pod
// manifest with one container, so the one pipeline that judges every other manifest judges it too, with the same
// patterns, attestors and conditions. Pure.
//
// What the pull does not carry is left out and cannot be judged at the node: the rest of the pod spec (Pod Security,
// PodRestrictions), and the requesting user. The pod's annotations are left out on purpose: at the node they would
// be the pod's own word (a break-glass request, a record of verification), and a pod's word proves nothing.
import { effectiveTag, fullName, type ImageReference } from "../image-reference.ts";

/** Labels the kubelet adds to a sandbox's (kubelet newPodLabels): not the pod's own, so not judged as its labels. */
export const KUBELET_SANDBOX_LABELS: readonly string[] = ["io.kubernetes.pod.name", "io.kubernetes.pod.namespace", "io.kubernetes.pod.uid"];

/** The container name of the manifest judged at the node: a pull names no container. */
export const PULL_CONTAINER_NAME = "pull";

export interface PullingPod {
  namespace: string;
  name: string;
  uid: string;
  /** The sandbox's labels, as the kubelet sends them (the pod's, plus its own). */
  labels: Readonly<Record<string, string>>;
}

/** The pod's own labels: the sandbox's without those the kubelet adds. */
export function podLabelsOfSandbox(labels: Readonly<Record<string, string>>): Record<string, string> {
  const own: Record<string, string> = {};
  for (const [key, value] of Object.entries(labels)) if (!KUBELET_SANDBOX_LABELS.includes(key)) own[key] = value;
  return own;
}

/**
 * The image as judged: the name as the pod wrote it (so patterns written for tags still match), with the digest the
 * node verifies and pulls (a name without tag or digest keeps its implicit "latest"). A reference that already names
 * a digest is judged at that digest.
 */
export function imageAtDigest(ref: ImageReference, digest: string): string {
  const tag = effectiveTag(ref);
  return fullName({ registry: ref.registry, repository: ref.repository, ...(tag ? { tag } : {}), digest });
}

/** The reference the runtime is asked to pull: the repository at the verified digest, never the tag again. */
export function pullByDigest(ref: ImageReference, digest: string): string {
  return fullName({ registry: ref.registry, repository: ref.repository, digest });
}

/** The Pod manifest the pipeline judges for one pull. */
export function podOfPull(pod: PullingPod, image: string): Record<string, unknown> {
  const labels = podLabelsOfSandbox(pod.labels);
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      namespace: pod.namespace,
      ...(pod.name ? { name: pod.name } : {}),
      ...(pod.uid ? { uid: pod.uid } : {}),
      ...(Object.keys(labels).length > 0 ? { labels } : {}),
    },
    spec: { containers: [{ name: PULL_CONTAINER_NAME, image }] },
  };
}
