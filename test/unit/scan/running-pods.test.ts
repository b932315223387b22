// What a running pod runs (its status's imageIDs), the pod judged at those digests, and drift from what the spec
// or admission's records name.
import { test } from "node:test";
import assert from "node:assert/strict";
import { digestDrift, digestOfImageId, podAsRunning, runningImages } from "../../../src/core/image-policy/running-pods.ts";

const D1 = `sha256:${"1".repeat(64)}`;
const D2 = `sha256:${"2".repeat(64)}`;

test("the manifest digest of an imageID, as containerd and dockershim report it; a bare image ID has none", () => {
  assert.equal(digestOfImageId(`docker.io/library/nginx@${D1}`), D1);
  assert.equal(digestOfImageId(`docker-pullable://nginx@${D1}`), D1);
  assert.equal(digestOfImageId(`registry.example.com:5000/app@${D2}`), D2);
  assert.equal(digestOfImageId(D1), undefined, "sha256:… alone is the config digest, not a manifest a registry serves");
  assert.equal(digestOfImageId(`docker://${D1}`), undefined);
  assert.equal(digestOfImageId("nginx@sha256:short"), undefined);
  assert.equal(digestOfImageId(""), undefined);
});

test("a scheme is removed only at the start of an imageID: text like one after the @ leaves no digest", () => {
  // What follows the last "@" must be a digest as it stands; nothing inside it is dropped to make it one.
  assert.equal(digestOfImageId(`docker.io/library/nginx@sha256:x://${"1".repeat(64)}`), undefined);
  assert.equal(digestOfImageId(`docker-pullable://docker.io/library/nginx@${D1}`), D1);
});

const pod = (status: object, annotations: Record<string, string> = {}) => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "p", namespace: "shop", uid: "u1", annotations },
  spec: {
    initContainers: [{ name: "init", image: "busybox:1.36" }],
    containers: [
      { name: "app", image: "registry.example.com/app:1.0" },
      { name: "side", image: `registry.example.com/side@${D1}` },
    ],
  },
  status,
});

test("each container with an imageID is matched to its spec entry by name, in every container list", () => {
  const running = runningImages(
    pod({
      initContainerStatuses: [{ name: "init", imageID: `docker.io/library/busybox@${D1}` }],
      containerStatuses: [
        { name: "side", imageID: `registry.example.com/side@${D1}` },
        { name: "app", imageID: `registry.example.com/app@${D2}` },
        { name: "gone", imageID: `registry.example.com/x@${D2}` },
      ],
    }),
  );
  assert.deepEqual(
    running.map((r) => [r.field, r.container, r.digest]),
    [
      ["spec.containers[0].image", "app", D2],
      ["spec.containers[1].image", "side", D1],
      ["spec.initContainers[0].image", "init", D1],
    ],
  );
  assert.deepEqual(runningImages(pod({ containerStatuses: [{ name: "app", imageID: "" }] })), [], "a container not started yet has no imageID");
  assert.deepEqual(runningImages({ spec: {} }), []);
});

test("the pod as it runs: tags carry their running digest; a pinned image stays as written", () => {
  const p = pod({
    containerStatuses: [
      { name: "app", imageID: `registry.example.com/app@${D2}` },
      { name: "side", imageID: `registry.example.com/side@${D2}` },
    ],
  });
  const asRunning = podAsRunning(p, runningImages(p)) as { spec: { containers: Array<{ image: string }>; initContainers: Array<{ image: string }> } };
  assert.deepEqual(
    asRunning.spec.containers.map((c) => c.image),
    [`registry.example.com/app:1.0@${D2}`, `registry.example.com/side@${D1}`],
  );
  assert.equal(asRunning.spec.initContainers[0]!.image, "busybox:1.36", "no status, no change");
  assert.equal((p.spec.containers[0] as { image: string }).image, "registry.example.com/app:1.0", "the pod given is not changed");
});

test("drift: a running digest other than the spec's pin, the verified record's or the pinned record's", () => {
  const running = pod(
    {
      containerStatuses: [
        { name: "app", imageID: `registry.example.com/app@${D2}` },
        { name: "side", imageID: `registry.example.com/side@${D2}` },
      ],
    },
    { "imprimatur.dev/verified-images": JSON.stringify({ "registry.example.com/app:1.0": { digest: D1, signers: ["key"] } }) },
  );
  assert.deepEqual(digestDrift(running, runningImages(running)), [
    { field: "spec.containers[0].image", image: "registry.example.com/app:1.0", running: D2, expected: D1, source: "verified-images" },
    { field: "spec.containers[1].image", image: `registry.example.com/side@${D1}`, running: D2, expected: D1, source: "spec" },
  ]);
  const pinned = pod(
    { containerStatuses: [{ name: "app", imageID: `registry.example.com/app@${D2}` }] },
    { "imprimatur.dev/pinned-images": JSON.stringify({ "registry.example.com/app:1.0": `registry.example.com/app:1.0@${D1}` }) },
  );
  assert.deepEqual(
    digestDrift(pinned, runningImages(pinned)).map((d) => d.source),
    ["pinned-images"],
  );
  const same = pod(
    { containerStatuses: [{ name: "app", imageID: `registry.example.com/app@${D1}` }] },
    { "imprimatur.dev/verified-images": JSON.stringify({ "registry.example.com/app:1.0": { digest: D1 } }) },
  );
  assert.deepEqual(digestDrift(same, runningImages(same)), []);
  const malformed = pod({ containerStatuses: [{ name: "app", imageID: `registry.example.com/app@${D2}` }] }, { "imprimatur.dev/verified-images": "{not json" });
  assert.deepEqual(digestDrift(malformed, runningImages(malformed)), [], "an unreadable record is no finding");
});

test("odd statuses, containers and records are skipped, not thrown on", () => {
  const odd = {
    spec: { containers: [null, { name: "noimage" }, { name: "app", image: "app:1" }] },
    status: { containerStatuses: [null, { imageID: `x@${D1}` }, { name: "noimage", imageID: `x@${D1}` }, { name: "app", imageID: 5 }] },
  };
  assert.deepEqual(runningImages(odd), []);
  // A status without a manifest digest leaves the image as written, and is no drift.
  const bare = [{ field: "spec.containers[0].image", container: "app", image: `app@${D1}`, imageID: D2 }];
  assert.deepEqual(podAsRunning({ spec: { containers: [{ name: "app", image: "app:1" }] } }, [{ ...bare[0]!, image: "app:1" }]), {
    spec: { containers: [{ name: "app", image: "app:1" }] },
  });
  assert.deepEqual(digestDrift({ spec: {} }, bare), []);
  // Records whose entries are not digests give nothing.
  const running = [{ field: "spec.containers[0].image", container: "app", image: "app:1", imageID: `app@${D2}`, digest: D2 }];
  for (const annotations of [
    { "imprimatur.dev/verified-images": JSON.stringify({ "app:1": "x" }) },
    { "imprimatur.dev/verified-images": JSON.stringify({ "app:1": { digest: 5 } }) },
    { "imprimatur.dev/verified-images": JSON.stringify({ "app:1": { digest: "sha256:bogus" } }) },
    { "imprimatur.dev/pinned-images": JSON.stringify({ "app:1": 5 }) },
  ]) {
    assert.deepEqual(digestDrift({ metadata: { annotations } }, running), [], JSON.stringify(annotations));
  }
});

test("the pod as it runs: the eleventh container gets its digest too", () => {
  const containers = Array.from({ length: 11 }, (_, i) => ({ name: `c${i}`, image: `app:${i}` }));
  const running = [{ field: "spec.containers[10].image", container: "c10", image: "app:10", imageID: `app@${D1}`, digest: D1 }];
  const spec = podAsRunning({ spec: { containers } }, running).spec as { containers: Array<{ image: string }> };
  assert.equal(spec.containers[10]!.image, `app:10@${D1}`);
});
