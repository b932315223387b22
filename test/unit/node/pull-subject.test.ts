// What the node judges for a pull, and how the pull is sent on: the Pod manifest built from the sandbox, the image
// at its digest, the AuthConfig offered to the image's own registry only, and the request rewritten to the digest
// with every other field kept as received.
import assert from "node:assert/strict";
import { test } from "node:test";
import protobuf from "protobufjs";
import { parseImageReference, type ImageReference } from "../../../src/core/image-reference.ts";
import { imageAtDigest, podLabelsOfSandbox, podOfPull, pullByDigest } from "../../../src/core/pull-verification/pull-subject.ts";
import { decodePullImageRequest, encodePullImageRequest, pullImageRequestFor } from "../../../src/cri/cri-messages.ts";
import { presentedCredentials } from "../../../src/node/presented-credentials.ts";

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

const AUTH = {
  username: "",
  password: "",
  auth: Buffer.from("robot:s3cret:with-colon").toString("base64"),
  serverAddress: "",
  identityToken: "",
  registryToken: "",
};

test("the pull's AuthConfig is offered to the image's own registry only, decoded as docker config's auth", () => {
  const lookup = presentedCredentials(AUTH, "Registry.Example.com:5000");
  assert.deepEqual(lookup("registry.example.com:5000", "app"), [{ source: "the pull's credentials", username: "robot", password: "s3cret:with-colon" }]);
  assert.deepEqual(lookup("signatures.example.com", "app"), []);
  assert.deepEqual(lookup("registry.example.com", "app"), []);
  const tokens = presentedCredentials({ ...AUTH, auth: "", identityToken: "refresh", registryToken: "bearer" }, "r.example");
  assert.deepEqual(tokens("r.example", "x"), [{ source: "the pull's credentials", identityToken: "refresh", registryToken: "bearer" }]);
  assert.deepEqual(presentedCredentials(undefined, "r.example")("r.example", "x"), []);
  assert.deepEqual(presentedCredentials({ ...AUTH, auth: "" }, "r.example")("r.example", "x"), []);
});

// The kubelet's PullImageRequest carries fields this project does not declare (from the CRI runtime.v1 api.proto):
// ImageSpec.user_specified_image (18) and runtime_handler (19), PodSandboxConfig.hostname (2), log_directory (3).
const fuller = protobuf
  .parse(
    `
syntax = "proto3";
message ImageSpec { string image = 1; map<string, string> annotations = 2; string user_specified_image = 18; string runtime_handler = 19; }
message AuthConfig { string username = 1; string password = 2; }
message PodSandboxMetadata { string name = 1; string uid = 2; string namespace = 3; uint32 attempt = 4; }
message PodSandboxConfig { PodSandboxMetadata metadata = 1; string hostname = 2; string log_directory = 3; map<string, string> labels = 6; map<string, string> annotations = 7; }
message PullImageRequest { ImageSpec image = 1; AuthConfig auth = 2; PodSandboxConfig sandbox_config = 3; }
`,
  )
  .root.lookupType("PullImageRequest");

test("a pull rewritten to the digest keeps every other field as received, declared here or not", () => {
  const original = {
    image: { image: "r.example/app:1.0", annotations: { a: "1" }, userSpecifiedImage: "r.example/app:1.0", runtimeHandler: "runc" },
    auth: { username: "u", password: "p" },
    sandboxConfig: {
      metadata: { name: "web", uid: "uid", namespace: "ns", attempt: 2 },
      hostname: "web",
      logDirectory: "/var/log/pods/x",
      labels: { app: "web" },
      annotations: { "kubernetes.io/config.source": "api" },
    },
  };
  const bytes = fuller.encode(fuller.fromObject(original)).finish();
  const rewritten = pullImageRequestFor(bytes, `r.example/app@${DIGEST}`);
  const decoded = fuller.toObject(fuller.decode(rewritten), { defaults: false });
  assert.deepEqual(decoded, { ...original, image: { ...original.image, image: `r.example/app@${DIGEST}` } });
  const ours = decodePullImageRequest(rewritten);
  assert.equal(ours.image.image, `r.example/app@${DIGEST}`);
  assert.deepEqual(ours.sandbox?.labels, { app: "web" });
  // A request with no ImageSpec at all gets one naming the image.
  assert.equal(decodePullImageRequest(pullImageRequestFor(encodePullImageRequest({ image: "" }).subarray(0, 0), "x")).image.image, "x");
  assert.throws(() => pullImageRequestFor(Buffer.from([0x0a, 0x05, 0x01]), "x"), /malformed PullImageRequest/);
});
