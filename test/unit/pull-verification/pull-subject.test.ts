// What the node judges for a pull (src/core/pull-verification/pull-subject.ts): the Pod manifest built from the
// sandbox, and the image at its digest, judged and pulled.
import assert from "node:assert/strict";
import { test } from "node:test";
import { parseImageReference, type ImageReference } from "../../../src/core/image-reference.ts";
import { imageAtDigest, podLabelsOfSandbox, podOfPull, pullByDigest } from "../../../src/core/pull-verification/pull-subject.ts";

const DIGEST = `sha256:${"ab".repeat(32)}`;
const ref = (image: string): ImageReference => {
  const parsed = parseImageReference(image);
  assert.ok(parsed.ok);
  return parsed.ref;
};

test("the image is judged under the name the pod wrote, at the digest; the runtime is asked for the repository at that digest", () => {
  assert.equal(imageAtDigest(ref("registry.example.com/app:1.0"), DIGEST), `registry.example.com/app:1.0@${DIGEST}`);
  assert.equal(imageAtDigest(ref("nginx"), DIGEST), `docker.io/library/nginx:latest@${DIGEST}`);
  assert.equal(imageAtDigest(ref(`registry.example.com/app@${DIGEST}`), DIGEST), `registry.example.com/app@${DIGEST}`);
  assert.equal(pullByDigest(ref("registry.example.com/app:1.0"), DIGEST), `registry.example.com/app@${DIGEST}`);
  assert.equal(pullByDigest(ref("nginx:1"), DIGEST), `docker.io/library/nginx@${DIGEST}`);
});

test("the pod's labels are the sandbox's without the three the kubelet adds", () => {
  assert.deepEqual(
    podLabelsOfSandbox({
      app: "web",
      "io.kubernetes.pod.name": "p",
      "io.kubernetes.pod.namespace": "n",
      "io.kubernetes.pod.uid": "u",
      "io.kubernetes.other": "x",
    }),
    { app: "web", "io.kubernetes.other": "x" },
  );
});

test("the manifest judged names the namespace, name, uid and labels, one container, and none of the pod's annotations", () => {
  const pod = podOfPull({ namespace: "team-a", name: "web-1", uid: "u-1", labels: { app: "web", "io.kubernetes.pod.uid": "u-1" } }, "r.example/a@" + DIGEST);
  assert.deepEqual(pod, {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { namespace: "team-a", name: "web-1", uid: "u-1", labels: { app: "web" } },
    spec: { containers: [{ name: "pull", image: "r.example/a@" + DIGEST }] },
  });
  assert.deepEqual(podOfPull({ namespace: "n", name: "", uid: "", labels: {} }, "x").metadata, { namespace: "n" });
});
