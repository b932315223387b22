// Pull records (src/core/pull-verification/pull-records.ts): what a pull adds, and strict decoding — anything
// but what the proxy writes is refused, so that the caller verifies instead of allowing.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  accessibleToAllPods,
  credentialLessRecord,
  credentialRecorded,
  decodePreloadedImages,
  decodePulledRecord,
  decodePullIntent,
  MAX_PODS_PER_CREDENTIAL,
  preloadedImages,
  pullIntent,
  recordPull,
  RecordFormatError,
} from "../../../src/core/pull-verification/pull-records.ts";

const NOW = new Date("2026-11-24T12:00:00Z");
const REPO = "registry.example.com/private/app";
const H1 = `hmac-sha256:${"1".repeat(64)}`;
const H2 = `hmac-sha256:${"2".repeat(64)}`;
const pod = (name: string) => ({ namespace: "team", name, uid: `uid-${name}` });

describe("recordPull", () => {
  it("an anonymous pull makes the image usable by every pod of that repository, and nothing else", () => {
    const r = recordPull(undefined, "sha256:aa", REPO, undefined, NOW);
    assert.equal(accessibleToAllPods(r, REPO), true);
    assert.equal(accessibleToAllPods(r, "registry.example.com/other"), false);
    assert.equal(r.lastUpdatedTime, NOW.toISOString());
  });

  it("credentials are kept by hash with the pods that presented them, newest last and bounded", () => {
    let r = recordPull(undefined, "sha256:aa", REPO, { hash: H1, pod: pod("a") }, NOW);
    r = recordPull(r, "sha256:aa", REPO, { hash: H2, pod: pod("b") }, NOW);
    r = recordPull(r, "sha256:aa", REPO, { hash: H1, pod: pod("c") }, NOW);
    r = recordPull(r, "sha256:aa", REPO, { hash: H1, pod: pod("a") }, NOW);
    assert.equal(credentialRecorded(r, REPO, H1), true);
    assert.equal(credentialRecorded(r, REPO, H2), true);
    assert.equal(credentialRecorded(r, "registry.example.com/other", H1), false);
    assert.equal(accessibleToAllPods(r, REPO), false);
    assert.deepEqual(
      r.credentialMapping[REPO]!.credentials![0]!.presentedBy.map((p) => p.name),
      ["c", "a"],
    );
    for (let i = 0; i < 30; i++) r = recordPull(r, "sha256:aa", REPO, { hash: H2, pod: pod(`p${i}`) }, NOW);
    assert.equal(r.credentialMapping[REPO]!.credentials![1]!.presentedBy.length, MAX_PODS_PER_CREDENTIAL);
  });

  it("a credentialed pull does not narrow an image every pod may already use; the input record is not changed", () => {
    const open = recordPull(undefined, "sha256:aa", REPO, undefined, NOW);
    const after = recordPull(open, "sha256:aa", REPO, { hash: H1, pod: pod("a") }, NOW);
    assert.equal(accessibleToAllPods(after, REPO), true);
    const narrow = recordPull(undefined, "sha256:aa", REPO, { hash: H1, pod: pod("a") }, NOW);
    recordPull(narrow, "sha256:aa", REPO, { hash: H2, pod: pod("b") }, NOW);
    assert.equal(credentialRecorded(narrow, REPO, H2), false);
  });

  it("a credential-less record names nobody", () => {
    const r = credentialLessRecord("sha256:aa", NOW);
    assert.equal(accessibleToAllPods(r, REPO), false);
    assert.equal(credentialRecorded(r, REPO, H1), false);
  });
});

describe("strict decoding", () => {
  const good = recordPull(recordPull(undefined, "sha256:aa", REPO, { hash: H1, pod: pod("a") }, NOW), "sha256:aa", "docker.io/library/busybox", undefined, NOW);

  it("reads back exactly what was written", () => {
    assert.deepEqual(decodePulledRecord(JSON.stringify(good)), good);
    assert.deepEqual(decodePullIntent(JSON.stringify(pullIntent("app:1"))), pullIntent("app:1"));
    const pre = preloadedImages(
      [
        { imageRef: "sha256:b", repositories: ["r.example/y", "r.example/x", "r.example/y"] },
        { imageRef: "sha256:a", repositories: [] },
      ],
      NOW,
    );
    assert.deepEqual(decodePreloadedImages(JSON.stringify(pre)).images, [
      { imageRef: "sha256:a", repositories: [] },
      { imageRef: "sha256:b", repositories: ["r.example/x", "r.example/y"] },
    ]);
    // The list of an earlier version (ids without names) is not read: nothing counts as preloaded (fail safe).
    assert.throws(
      () => decodePreloadedImages(JSON.stringify({ apiVersion: pre.apiVersion, kind: pre.kind, recordedTime: pre.recordedTime, imageRefs: ["sha256:a"] })),
      RecordFormatError,
    );
  });

  const broken: Array<[string, (r: Record<string, any>) => unknown]> = [
    ["not JSON", () => "{"],
    ["another apiVersion", (r) => ({ ...r, apiVersion: "kubelet.config.k8s.io/v1alpha1" })],
    ["another kind", (r) => ({ ...r, kind: "ImagePullIntent" })],
    ["an unknown field", (r) => ({ ...r, extra: 1 })],
    ["a missing field", (r) => ({ ...r, imageRef: undefined })],
    ["both nodePodsAccessible and credentials", (r) => ({ ...r, credentialMapping: { [REPO]: { nodePodsAccessible: true, credentials: [] } } })],
    ["nodePodsAccessible false", (r) => ({ ...r, credentialMapping: { [REPO]: { nodePodsAccessible: false } } })],
    ["a hash that is not an HMAC", (r) => ({ ...r, credentialMapping: { [REPO]: { credentials: [{ credentialHash: "sha256:x", presentedBy: [] }] } } })],
    ["a bad time", (r) => ({ ...r, lastUpdatedTime: "yesterday" })],
    ["a list", () => []],
  ];
  for (const [what, mutate] of broken) {
    it(`refuses ${what} with a RecordFormatError`, () => {
      const value = mutate(structuredClone(good) as Record<string, any>);
      const text = typeof value === "string" ? value : JSON.stringify(value);
      assert.throws(
        () => decodePulledRecord(text),
        (e: unknown) => e instanceof RecordFormatError && e.code === "corrupt-record",
      );
    });
  }
});
