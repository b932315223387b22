// The node proxy's records on disk (src/node/record-store.ts): layout, permissions, atomic writes, strict reading
// (an unreadable or misplaced record is "unreadable", which the proxy treats as "verify"), intents, pruning.
import { describe, it, beforeEach, afterEach } from "node:test";
import assert from "node:assert/strict";
import { mkdir, mkdtemp, readdir, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { credentialRecorded, recordPull } from "../../../src/core/pull-verification/pull-records.ts";
import { readRecordsFolder, recordFileName, RecordStore } from "../../../src/node/record-store.ts";

const REPO = "registry.example.com/private/app";
const hash = (n: number) => `hmac-sha256:${String(n).padStart(64, "0")}`;
const pod = (name: string) => ({ namespace: "team", name, uid: `uid-${name}` });
let dir: string;

beforeEach(async () => {
  dir = join(await mkdtemp(join(tmpdir(), "imprimatur-records-")), "state");
});
afterEach(async () => {
  await rm(join(dir, ".."), { recursive: true, force: true });
});

const mode = async (p: string) => (await stat(p)).mode & 0o777;

describe("RecordStore", () => {
  it("first start creates the layout, 0700 folders and a 32-byte 0600 key, kept across starts", async () => {
    const first = await RecordStore.open(dir);
    assert.equal(first.snapshot, "due");
    assert.equal(first.key.length, 32);
    for (const sub of ["", "pulling", "pulled"]) assert.equal(await mode(join(dir, sub)), 0o700, sub);
    assert.equal(await mode(join(dir, "credential-hash.key")), 0o600);
    const again = await RecordStore.open(dir);
    assert.equal(again.snapshot, "due", "a key alone is no sign of a completed start");
    assert.deepEqual(again.key, first.key);
  });

  it("a record is written atomically as sha256-<hex> with mode 0600 and read back after a restart", async () => {
    const store = await RecordStore.open(dir);
    await store.update("sha256:aa", (cur) =>
      recordPull(cur.state === "ok" ? cur.record : undefined, "sha256:aa", REPO, { hash: hash(1), pod: pod("a") }, new Date()),
    );
    const name = recordFileName("sha256:aa");
    assert.match(name, /^sha256-[0-9a-f]{64}$/);
    assert.deepEqual(await readdir(join(dir, "pulled")), [name], "no temporary file is left");
    assert.equal(await mode(join(dir, "pulled", name)), 0o600);
    const reopened = await RecordStore.open(dir);
    const read = reopened.get("sha256:aa");
    assert.equal(read.state, "ok");
    assert.equal(read.state === "ok" && credentialRecorded(read.record, REPO, hash(1)), true);
    assert.equal(reopened.get("sha256:bb").state, "none");
  });

  it("concurrent updates of one record are applied one after the other, none lost", async () => {
    const store = await RecordStore.open(dir);
    await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        store.update("sha256:aa", (cur) =>
          recordPull(cur.state === "ok" ? cur.record : undefined, "sha256:aa", REPO, { hash: hash(i), pod: pod(`p${i}`) }, new Date()),
        ),
      ),
    );
    const read = (await RecordStore.open(dir)).get("sha256:aa");
    assert.ok(read.state === "ok");
    assert.equal(read.record.credentialMapping[REPO]!.credentials!.length, 20);
  });

  it("a corrupt record, or one moved under another image's name, is unreadable (the proxy then verifies)", async () => {
    const store = await RecordStore.open(dir);
    const write = (ref: string) => store.update(ref, (cur) => recordPull(cur.state === "ok" ? cur.record : undefined, ref, REPO, undefined, new Date()));
    await write("sha256:aa");
    await write("sha256:bb");
    await writeFile(join(dir, "pulled", recordFileName("sha256:aa")), '{"apiVersion": "imprimatur.dev/v1alpha1", "kind": "ImagePulledRecord"');
    await rm(join(dir, "pulled", recordFileName("sha256:cc")), { force: true });
    await rename(join(dir, "pulled", recordFileName("sha256:bb")), join(dir, "pulled", recordFileName("sha256:cc")));
    const reopened = await RecordStore.open(dir);
    const corrupt = reopened.get("sha256:aa");
    assert.equal(corrupt.state, "unreadable");
    assert.match(corrupt.state === "unreadable" ? corrupt.reason : "", /not JSON/);
    const moved = reopened.get("sha256:cc");
    assert.equal(moved.state, "unreadable");
    assert.match(moved.state === "unreadable" ? moved.reason : "", /file name is not that of its imageRef sha256:bb/);
    assert.deepEqual(reopened.counts(), { pulled: 0, unreadable: 2, intentsInFlight: 0, verified: 0 });
    const listed = await readRecordsFolder(dir);
    assert.deepEqual(
      listed.records.map((r) => r.state),
      ["unreadable", "unreadable"],
    );
  });

  it("intents survive a crash, are listed at the next start, and are removed after a pull; temporary files are dropped", async () => {
    const store = await RecordStore.open(dir);
    store.writeIntent("registry.example.com/private/app:1");
    store.writeIntent("registry.example.com/private/app:2");
    await store.removeIntent("registry.example.com/private/app:2");
    await writeFile(join(dir, "pulled", `.${recordFileName("sha256:zz")}.1.abcd.tmp`), "half");
    await writeFile(join(dir, "pulling", "sha256-garbage"), "not json");
    const after = await RecordStore.open(dir);
    const left = await after.leftoverIntents();
    assert.deepEqual(
      left.filter((l) => l.intent).map((l) => l.intent!.image),
      ["registry.example.com/private/app:1"],
    );
    assert.match(left.find((l) => !l.intent)!.reason!, /not JSON/);
    assert.ok(!(await readdir(join(dir, "pulled"))).some((n) => n.endsWith(".tmp")));
    for (const l of left) await after.dropIntentFile(l.file);
    assert.deepEqual(await readdir(join(dir, "pulling")), []);
  });

  it("an intent is in place, 0600 and complete, when writeIntent returns; pulls of one name share it and its durability", async () => {
    const store = await RecordStore.open(dir);
    const image = "registry.example.com/private/app:1";
    const file = join(dir, "pulling", recordFileName(image));
    const first = store.writeIntent(image);
    // In place before the pull is forwarded, whether or not the fsyncs are done yet.
    assert.equal(JSON.parse(await readFile(file, "utf8")).image, image);
    assert.equal(await mode(file), 0o600);
    const second = store.writeIntent(image);
    assert.equal(second.durable, first.durable, "the second pull waits for the same file's fsyncs");
    await first.durable;
    assert.equal(store.counts().intentsInFlight, 2);
    await store.removeIntent(image);
    assert.equal(JSON.parse(await readFile(file, "utf8")).image, image, "still held by the second pull");
    await store.removeIntent(image);
    assert.deepEqual(await readdir(join(dir, "pulling")), []);
    // Removed before its fsyncs finished (a pull that failed at once): nothing is left and nothing rejects unheard.
    const quick = store.writeIntent(image);
    await store.removeIntent(image);
    await quick.durable.catch(() => {});
    assert.deepEqual(await readdir(join(dir, "pulling")), []);
  });

  it("prune removes the records of images no longer present; preloaded images are remembered, an unreadable list counts none", async () => {
    const store = await RecordStore.open(dir);
    for (const ref of ["sha256:aa", "sha256:bb"]) await store.update(ref, () => recordPull(undefined, ref, REPO, undefined, new Date()));
    assert.deepEqual(await store.prune(new Set(["sha256:bb"]), store.writeTicket()), ["sha256:aa"]);
    assert.deepEqual(await readdir(join(dir, "pulled")), [recordFileName("sha256:bb")]);
    await store.writePreloaded([{ imageRef: "sha256:pre", repositories: [REPO] }]);
    assert.equal((await RecordStore.open(dir)).isPreloaded("sha256:pre", REPO), true);
    assert.equal((await RecordStore.open(dir)).isPreloaded("sha256:pre", "registry.example.com/other"), false, "preloaded under its own names only");
    assert.equal(JSON.parse(await readFile(join(dir, "preloaded-images.json"), "utf8")).kind, "PreloadedImages");
    await writeFile(join(dir, "preloaded-images.json"), "{oops");
    assert.equal((await RecordStore.open(dir)).isPreloaded("sha256:pre", REPO), false, "fail safe: nothing counts as preloaded");
  });

  it("a record written after the runtime's list was taken is not pruned by that list", async () => {
    const store = await RecordStore.open(dir);
    const listedAt = store.writeTicket(); // then ListImages, while a pull of a new image ends and is recorded
    await store.update("sha256:new", () => recordPull(undefined, "sha256:new", REPO, undefined, new Date()));
    assert.deepEqual(await store.prune(new Set(), listedAt), []);
    assert.equal((await RecordStore.open(dir)).get("sha256:new").state, "ok");
    assert.deepEqual(await store.prune(new Set(), store.writeTicket()), ["sha256:new"]);
  });

  it("writes and prunes take one lock: memory and disk agree after they race", async () => {
    const store = await RecordStore.open(dir);
    const refs = Array.from({ length: 20 }, (_, i) => `sha256:${String(i).padStart(64, "0")}`);
    await Promise.all(
      refs.flatMap((ref, i) => [
        store.update(ref, (c) => recordPull(c.state === "ok" ? c.record : undefined, ref, REPO, undefined, new Date())),
        ...(i % 4 === 0 ? [store.prune(new Set(refs.slice(i)), store.writeTicket())] : []),
      ]),
    );
    const reopened = await RecordStore.open(dir);
    assert.deepEqual(
      reopened
        .records()
        .map((r) => r.file)
        .sort(),
      store
        .records()
        .map((r) => r.file)
        .sort(),
    );
  });

  it("preloaded entries expire with their image: pruned when the runtime no longer lists it", async () => {
    const store = await RecordStore.open(dir);
    await store.writePreloaded([
      { imageRef: "sha256:pre", repositories: [REPO] },
      { imageRef: "sha256:kept", repositories: [REPO] },
    ]);
    await store.prune(new Set(["sha256:kept"]), store.writeTicket());
    assert.equal(store.isPreloaded("sha256:pre", REPO), false);
    const reopened = await RecordStore.open(dir);
    assert.equal(reopened.isPreloaded("sha256:pre", REPO), false, "gone from the file too: a later pull of that image is not preloaded");
    assert.equal(reopened.isPreloaded("sha256:kept", REPO), true);
  });

  it("removing an image without a record is no error; other files among the records are not records", async () => {
    const store = await RecordStore.open(dir);
    await store.remove("sha256:never");
    await writeFile(join(dir, "pulled", "notes.txt"), "not a record");
    assert.deepEqual((await RecordStore.open(dir)).records(), []);
  });

  it("a preloaded image whose record is unreadable is not preloaded", async () => {
    const store = await RecordStore.open(dir);
    await store.writePreloaded([{ imageRef: "sha256:pre", repositories: [REPO] }]);
    assert.equal(store.isPreloaded("sha256:pre", REPO), true);
    await writeFile(join(dir, "pulled", recordFileName("sha256:pre")), "{not json");
    assert.equal((await RecordStore.open(dir)).isPreloaded("sha256:pre", REPO), false);
  });

  it("a credential hash key of another length is refused: records keyed with it cannot be trusted", async () => {
    await RecordStore.open(dir);
    await writeFile(join(dir, "credential-hash.key"), Buffer.alloc(16));
    await assert.rejects(RecordStore.open(dir), {
      name: "NodeProxyError",
      code: "invalid-credential-key",
      message: `${join(dir, "credential-hash.key")}: the credential hash key must be 32 bytes, found 16; records keyed with it cannot be trusted`,
    });
  });

  it("a write that fails leaves no temporary file, and the next change goes ahead", async () => {
    const store = await RecordStore.open(dir);
    const record = (imageRef: string) => recordPull(undefined, imageRef, REPO, { hash: hash(1), pod: pod("a") }, new Date());
    // A folder where the record's file should go: the rename over it fails.
    await mkdir(join(dir, "pulled", recordFileName("sha256:blocked")));
    await assert.rejects(
      store.update("sha256:blocked", () => record("sha256:blocked")),
      (e: NodeJS.ErrnoException) => e.code === "EISDIR",
    );
    assert.deepEqual(
      (await readdir(join(dir, "pulled"))).filter((n) => n.startsWith(".")),
      [],
    );
    await store.update("sha256:next", () => record("sha256:next"));
    assert.equal((await RecordStore.open(dir)).get("sha256:next").state, "ok");
    // The same for an intent, which is put in place before the call returns.
    await mkdir(join(dir, "pulling", recordFileName("blocked:1")));
    assert.throws(
      () => store.writeIntent("blocked:1"),
      (e: NodeJS.ErrnoException) => e.code === "EISDIR",
    );
    assert.deepEqual(
      (await readdir(join(dir, "pulling"))).filter((n) => n.startsWith(".")),
      [],
    );
    assert.equal(store.counts().intentsInFlight, 0);
  });
});

describe("the first start's snapshot marks the first start as done", () => {
  const snapshotOf = async () => (await readRecordsFolder(dir)).snapshot;

  it("due until written: a key, folders and temporary files are no sign of a start; once written it is taken, with its time", async () => {
    const store = await RecordStore.open(dir);
    assert.equal(store.snapshot, "due");
    await writeFile(join(dir, ".preloaded-images.json.1.abcd.tmp"), "half");
    await writeFile(join(dir, "pulling", "notes.txt"), "not an intent");
    assert.equal((await RecordStore.open(dir)).snapshot, "due");
    assert.deepEqual(
      (await readdir(dir)).filter((n) => n.endsWith(".tmp")),
      [],
      "the temporary file of an interrupted snapshot is dropped",
    );
    assert.equal(await snapshotOf(), "due");
    await store.writePreloaded([{ imageRef: "sha256:pre", repositories: [REPO] }]);
    assert.equal(store.snapshot, "taken");
    assert.equal((await RecordStore.open(dir)).snapshot, "taken");
    const folder = await readRecordsFolder(dir);
    assert.equal(folder.snapshot, "taken");
    assert.ok(folder.snapshotTime && !Number.isNaN(Date.parse(folder.snapshotTime)), `a time: ${folder.snapshotTime}`);
  });

  it("an empty snapshot is taken too: images that appear later are not preloaded", async () => {
    const store = await RecordStore.open(dir);
    await store.writePreloaded([]);
    assert.equal((await RecordStore.open(dir)).snapshot, "taken");
  });

  it("records or intents without it: missing, never due again", async () => {
    const store = await RecordStore.open(dir);
    await store.update("sha256:aa", () => recordPull(undefined, "sha256:aa", REPO, undefined, new Date()));
    assert.equal((await RecordStore.open(dir)).snapshot, "missing", "a record");
    assert.equal(await snapshotOf(), "missing");
    await rm(join(dir, "pulled", recordFileName("sha256:aa")));
    await writeFile(join(dir, "pulled", recordFileName("sha256:bb")), "{not json");
    assert.equal((await RecordStore.open(dir)).snapshot, "missing", "an unreadable record");
    await rm(join(dir, "pulled", recordFileName("sha256:bb")));
    const intent = store.writeIntent(`${REPO}:v1`);
    await intent.durable;
    assert.equal((await RecordStore.open(dir)).snapshot, "missing", "an intent");
    assert.equal(await snapshotOf(), "missing");
    assert.equal((await RecordStore.open(dir)).isPreloaded("sha256:aa", REPO), false);
  });

  it("a snapshot that cannot be read, or is in the way, is taken: nothing counts as preloaded, and none is taken again", async () => {
    await RecordStore.open(dir);
    await writeFile(join(dir, "preloaded-images.json"), "{not json");
    const unreadable = await RecordStore.open(dir);
    assert.equal(unreadable.snapshot, "taken");
    assert.equal(await snapshotOf(), "taken");
    assert.equal((await readRecordsFolder(dir)).snapshotTime, undefined);
    await rm(join(dir, "preloaded-images.json"));
    await mkdir(join(dir, "preloaded-images.json"));
    assert.equal((await RecordStore.open(dir)).snapshot, "taken", "a read error other than absence");
  });
});
