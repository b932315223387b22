// The CRI image-service requests a kubelet sends for a pod, for tests that play the kubelet in front of the node
// proxy (in process, or over its socket): ImageStatus with the pod's annotations, and PullImage with those, the
// pod's pull secret's credential and its sandbox, and the calls made with them. Every pod here is in namespace
// "team" with uid `uid-<name>`.
import type { PodRef } from "../../src/core/pull-verification/pull-records.ts";
import assert from "node:assert/strict";
import type * as grpc from "@grpc/grpc-js";
import {
  decodeImageStatusResponse,
  decodePullImageResponse,
  encodeImageStatusRequestFor,
  encodePullImageRequest,
  type CriImage,
} from "../../src/cri/cri-messages.ts";
import type { CriPackage, RuntimeImageClient } from "../../src/cri/image-service-proxy.ts";

/** A registry credential as a pull secret gives it to the kubelet (CRI AuthConfig). */
export interface KubeletAuth {
  username?: string;
  password?: string;
  auth?: string;
}

export const kubeletPod = (pod: string): PodRef => ({ namespace: "team", name: pod, uid: `uid-${pod}` });

/** A pod's annotations as the kubelet passes them: its own (app) plus config.source and config.seen. */
export const kubeletAnnotations = (pod: string) => ({
  "kubernetes.io/config.source": "api",
  "kubernetes.io/config.seen": `2026-11-25T10:00:00.${pod}Z`,
  app: pod,
});

/** The PullImage sandbox of a pod: who it is, and its annotations. */
export const kubeletSandbox = (pod: string) => ({ ...kubeletPod(pod), annotations: kubeletAnnotations(pod) });

/** ImageStatus as the kubelet asks it before starting `pod`'s container; without a pod, as any other caller (crictl). */
export function imageStatusRequest(image: string, pod?: string): Buffer {
  return encodeImageStatusRequestFor(image, pod ? kubeletAnnotations(pod) : {});
}

/** PullImage as the kubelet sends it for `pod`, with the credential of its pull secret when it has one. */
export function pullImageRequest(image: string, pod: string, auth?: KubeletAuth): Buffer {
  return encodePullImageRequest({ image, annotations: kubeletAnnotations(pod), ...(auth ? { auth } : {}), sandbox: kubeletSandbox(pod) });
}

/** The runtime's (or the proxy's) answer to `pod`'s pull decision for `image`; without a pod, as crictl asks. */
export async function criStatus(client: RuntimeImageClient, image: string, pod?: string, pkg: CriPackage = "runtime.v1"): Promise<CriImage | undefined> {
  return decodeImageStatusResponse(await client.call(pkg, "ImageStatus", imageStatusRequest(image, pod)));
}

/** `pod`'s pull of `image`, as the kubelet sends it: the image_ref answered. */
export async function criPull(client: RuntimeImageClient, image: string, pod: string, auth?: KubeletAuth, pkg: CriPackage = "runtime.v1"): Promise<string> {
  return decodePullImageResponse(await client.call(pkg, "PullImage", pullImageRequest(image, pod, auth), { deadline: Date.now() + 60_000 })).imageRef;
}

/** The error of a pull that must fail; the test fails if it succeeds. */
export async function criPullError(client: RuntimeImageClient, image: string, pod: string, auth?: KubeletAuth): Promise<grpc.ServiceError> {
  try {
    await criPull(client, image, pod, auth);
  } catch (e) {
    return e as grpc.ServiceError;
  }
  assert.fail(`the pull of ${image} by ${pod} succeeded`);
}
