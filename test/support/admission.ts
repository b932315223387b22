// Builders for AdmissionReview and ImageReview requests as kube-apiserver sends them.
import { randomUUID } from "node:crypto";

export function podReview(opts: {
  images: string[];
  namespace?: string;
  annotations?: Record<string, string>;
  initImages?: string[];
  operation?: string;
  uid?: string;
  dryRun?: boolean;
  /** Who sends it; default alice, an authenticated user. */
  userInfo?: { username: string; groups?: string[] };
}) {
  const namespace = opts.namespace ?? "default";
  return {
    apiVersion: "admission.k8s.io/v1",
    kind: "AdmissionReview",
    request: {
      uid: opts.uid ?? randomUUID(),
      kind: { group: "", version: "v1", kind: "Pod" },
      resource: { group: "", version: "v1", resource: "pods" },
      requestKind: { group: "", version: "v1", kind: "Pod" },
      name: "p",
      namespace,
      operation: opts.operation ?? "CREATE",
      userInfo: opts.userInfo ?? { username: "alice", groups: ["system:authenticated"] },
      dryRun: opts.dryRun ?? false,
      object: {
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name: "p", namespace, annotations: opts.annotations ?? {} },
        spec: {
          containers: opts.images.map((image, i) => ({ name: `c${i}`, image })),
          ...(opts.initImages ? { initContainers: opts.initImages.map((image, i) => ({ name: `i${i}`, image })) } : {}),
        },
      },
    },
  };
}

export function imageReview(images: string[], namespace = "default", annotations: Record<string, string> = {}) {
  return {
    apiVersion: "imagepolicy.k8s.io/v1alpha1",
    kind: "ImageReview",
    spec: { containers: images.map((image) => ({ image })), annotations, namespace },
  };
}
