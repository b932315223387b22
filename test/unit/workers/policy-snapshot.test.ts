// What the primary of serve --workers sends its workers (src/workers/policy-snapshot.ts): each load's texts with
// the files its policies named beside them, as reading them gave. A worker loads the same set from it — the same
// key, even once the file on disk has changed — through the same loader, and never reads the folder itself.
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { PolicyFolder } from "../../../src/policy/policy-source.ts";
import { loadPolicySet } from "../../../src/policy/policy-set.ts";
import { PolicyLoadError } from "../../../src/policy/policy-error.ts";
import { RecordingPolicySource, SnapshotPolicySource, type PolicySnapshot } from "../../../src/workers/policy-snapshot.ts";
import { generateSigningKey } from "../../support/signer/keys.ts";

const first = generateSigningKey("ecdsa-p256");
const second = generateSigningKey("ecdsa-p256");
let dir: string;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), "imprimatur-policy-snapshot-"));
});
after(() => rm(dir, { recursive: true, force: true }));

const policy = (name: string) => `apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: { name: ${name} }
spec:
  rules:
    - action: allow
      images: ["r.example/*"]
      attestors: [{ entries: [{ staticKey: { name: release, ignoreTlog: true, keyRef: release.pub } }] }]
`;

const keyOf = (set: Awaited<ReturnType<typeof loadPolicySet>>) => {
  const entry = set.policies.ImagePolicy[0]?.rules[0]?.attestors?.[0]?.entries[0];
  return entry?.type === "staticKey" && "pem" in entry.key ? entry.key.pem : undefined;
};

test("a worker loads the set the primary read, with the key file as the primary read it", async () => {
  await writeFile(join(dir, "policy.yaml"), policy("signed"));
  await writeFile(join(dir, "release.pub"), first.publicKeyPem);
  const recording = new RecordingPolicySource(new PolicyFolder(dir));
  const primarySet = await loadPolicySet(recording, { profiles: [], allowEmpty: false });
  const snapshot = recording.snapshot(3);
  assert.ok(snapshot);
  assert.equal(snapshot.version, 3);
  assert.deepEqual(
    snapshot.texts.find((t) => t.origin.endsWith("policy.yaml"))?.related?.map((r) => r.path),
    ["release.pub"],
  );
  // The snapshot is plain data: what crosses the IPC channel.
  const sent = structuredClone(snapshot) as PolicySnapshot;

  // The file changes on disk after the primary's load: the worker still judges by what the primary loaded.
  await writeFile(join(dir, "release.pub"), second.publicKeyPem);
  const worker = new SnapshotPolicySource(sent);
  const workerSet = await loadPolicySet(worker, { profiles: [], allowEmpty: false });
  assert.equal(worker.lastReadVersion, 3);
  assert.deepEqual(
    workerSet.policies.ImagePolicy.map((p) => p.name),
    primarySet.policies.ImagePolicy.map((p) => p.name),
  );
  assert.equal(keyOf(workerSet), keyOf(primarySet));
  assert.equal(keyOf(workerSet)?.trim(), first.publicKeyPem.trim());
});

test("a newer snapshot replaces the set and tells the watcher; an older one (overtaken) is ignored", async () => {
  await writeFile(join(dir, "policy.yaml"), policy("signed"));
  await writeFile(join(dir, "release.pub"), first.publicKeyPem);
  const recording = new RecordingPolicySource(new PolicyFolder(dir));
  await loadPolicySet(recording, { profiles: [], allowEmpty: false });
  const v1 = structuredClone(recording.snapshot(1)!);
  await writeFile(join(dir, "policy.yaml"), policy("renamed"));
  await loadPolicySet(recording, { profiles: [], allowEmpty: false });
  const v2 = structuredClone(recording.snapshot(2)!);

  const worker = new SnapshotPolicySource(v1);
  let changes = 0;
  worker.watch(() => changes++);
  assert.equal(worker.replace(v2), true);
  assert.equal(worker.replace(v1), false);
  assert.equal(changes, 1);
  const set = await loadPolicySet(worker, { profiles: [], allowEmpty: false });
  assert.deepEqual(
    set.policies.ImagePolicy.map((p) => p.name),
    ["renamed"],
  );
  assert.equal(worker.lastReadVersion, 2);
});

test("a file the primary could not read fails the worker's load with the primary's reason; one it never read is never read", async () => {
  const snapshot: PolicySnapshot = {
    version: 1,
    description: "policies/",
    errors: [],
    texts: [{ origin: "policies/policy.yaml", text: policy("signed"), related: [{ path: "release.pub", error: "no such file or directory" }] }],
  };
  await assert.rejects(loadPolicySet(new SnapshotPolicySource(snapshot), { profiles: [], allowEmpty: false }), (e: Error) => {
    assert.ok(e instanceof PolicyLoadError);
    assert.match(e.message, /cannot read "release\.pub": no such file or directory/);
    return true;
  });
  const unread = { ...snapshot, texts: [{ ...snapshot.texts[0]!, related: [] }] };
  await assert.rejects(
    loadPolicySet(new SnapshotPolicySource(unread), { profiles: [], allowEmpty: false }),
    /release\.pub: not read when the primary loaded policies\/policy\.yaml/,
  );
});
