// A pull sent on for its verified digest (src/cri/cri-messages.ts, pullImageRequestFor): only ImageSpec.image is
// replaced, every other field kept as received.
import assert from "node:assert/strict";
import { test } from "node:test";
import protobuf from "protobufjs";
import { decodePullImageRequest, encodePullImageRequest, pullImageRequestFor } from "../../../src/cri/cri-messages.ts";

const DIGEST = `sha256:${"ab".repeat(32)}`;

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
