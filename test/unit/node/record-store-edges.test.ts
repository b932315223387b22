// The node proxy's records on disk at their edges (src/node/record-store.ts): files of others in the state folder,
// records and intents removed from outside, unreadable records pruned, intents released more than held, a failed
// fsync while the pull is still running, the order of the write steps (the crash test stops at each), what
// `node-records` reads, and file descriptors given back after every kind of write.
import { describe, it, beforeEach, afterEach } from "node:test";
import assert from "node:assert/strict";
import { mkdir, mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { inspect } from "node:util";
import { recordPull } from "../../../src/core/pull-verification/pull-records.ts";
import { readRecordsFolder, recordFileName, RecordStore, type StoreStep } from "../../../src/node/record-store.ts";

const REPO = "registry.example.com/private/app";
const IMAGE = `${REPO}:1`;
let dir: string;

beforeEach(async () => {
  dir = join(await mkdtemp(join(tmpdir(), "imprimatur-records-edges-")), "state");
});
afterEach(async () => {
  await rm(join(dir, ".."), { recursive: true, force: true });
});

const write = (store: RecordStore, imageRef: string) => store.update(imageRef, () => recordPull(undefined, imageRef, REPO, undefined, new Date()));

describe("RecordStore, files it did not write or that went away", () => {
  it("a start drops only its own temporary files (.<name>.tmp): other files in the state folder are left alone", async () => {
    await RecordStore.open(dir);
    const others = [join(dir, ".keep"), join(dir, "backup.tmp"), join(dir, "pulled", ".notes"), join(dir, "pulling", "copy.tmp")];
    for (const file of others) await writeFile(file, "not the proxy's");
    await writeFile(join(dir, "pulled", `.${recordFileName("sha256:aa")}.1.abcd.tmp`), "half");
    await RecordStore.open(dir);
    assert.deepEqual((await readdir(dir)).sort(), [".keep", "backup.tmp", "credential-hash.key", "pulled", "pulling", "verified"]);
    assert.deepEqual(await readdir(join(dir, "pulled")), [".notes"]);
    assert.deepEqual(await readdir(join(dir, "pulling")), ["copy.tmp"]);
  });

  it("a record whose file was deleted by hand is pruned all the same, and the prune goes on to the others", async () => {
    const store = await RecordStore.open(dir);
    await write(store, "sha256:aa");
    await write(store, "sha256:bb");
    await rm(join(dir, "pulled", recordFileName("sha256:aa")));
    assert.deepEqual((await store.prune(new Set(), store.writeTicket())).sort(), ["sha256:aa", "sha256:bb"]);
    assert.deepEqual(await readdir(join(dir, "pulled")), []);
  });

  it("an unreadable record is pruned when the image is gone, reported by its file name (it names no image)", async () => {
    await RecordStore.open(dir);
    const file = recordFileName("sha256:aa");
    await writeFile(join(dir, "pulled", file), "{not json");
    const store = await RecordStore.open(dir);
    assert.deepEqual(await store.prune(new Set(), store.writeTicket()), [file]);
    assert.equal(store.get("sha256:aa").state, "none");
  });

  it("an intent file deleted by someone else during the pull: removing the intent is no error", async () => {
    const store = await RecordStore.open(dir);
    const intent = store.writeIntent(IMAGE);
    await intent.durable;
    await rm(join(dir, "pulling", recordFileName(IMAGE)));
    await store.removeIntent(IMAGE);
    assert.equal(store.counts().intentsInFlight, 0);
  });
});

describe("RecordStore, intents", () => {
  it("releasing an intent this run does not hold does nothing: an earlier run's file stays for the start to finish", async () => {
    const store = await RecordStore.open(dir);
    const leftover = join(dir, "pulling", recordFileName(IMAGE));
    await writeFile(leftover, JSON.stringify({ apiVersion: "imprimatur.dev/v1alpha1", kind: "ImagePullIntent", image: IMAGE }));
    await store.removeIntent(IMAGE);
    store.keepIntent(IMAGE);
    assert.deepEqual(await readdir(join(dir, "pulling")), [recordFileName(IMAGE)]);
    assert.equal(store.counts().intentsInFlight, 0);
    // A pull after its intent was released writes the intent anew.
    const first = store.writeIntent(`${REPO}:2`);
    await first.durable;
    await store.removeIntent(`${REPO}:2`);
    await store.removeIntent(`${REPO}:2`);
    assert.equal(store.counts().intentsInFlight, 0, "a second release is not counted");
    const again = store.writeIntent(`${REPO}:2`);
    assert.deepEqual((await readdir(join(dir, "pulling"))).sort(), [recordFileName(IMAGE), recordFileName(`${REPO}:2`)].sort());
    await again.durable;
    await store.removeIntent(`${REPO}:2`);
  });

  it("an intent that cannot be made durable while its pull runs rejects for that pull only: the process sees no unhandled rejection", async () => {
    const store = await RecordStore.open(dir);
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on("unhandledRejection", onUnhandled);
    try {
      const intent = store.writeIntent(IMAGE);
      // The folder goes away before its fsync: the intent is in place but can no longer be made durable.
      rmSync(join(dir, "pulling"), { recursive: true });
      // The pull is still running: nobody waits for `durable` yet. Wait (without a handler) for it to fail.
      while (!inspect(intent.durable).includes("<rejected>")) await new Promise((r) => setTimeout(r, 5));
      await new Promise((r) => setImmediate(r));
      assert.deepEqual(unhandled, []);
      await assert.rejects(intent.durable, { code: "ENOENT" });
    } finally {
      process.off("unhandledRejection", onUnhandled);
    }
  });

  it("each write reports its steps in order (the points where the crash test stops the process)", async () => {
    const steps: StoreStep[] = [];
    const store = await RecordStore.open(dir, { onStep: (s) => steps.push(s) });
    await store.writePreloaded([{ imageRef: "sha256:pre", repositories: [REPO] }]);
    const intent = store.writeIntent(IMAGE);
    await intent.durable;
    await write(store, "sha256:aa");
    await store.removeIntent(IMAGE);
    await store.prune(new Set(), store.writeTicket());
    assert.deepEqual(steps, [
      "preloaded-temporary-written",
      "preloaded-renamed",
      "preloaded-durable",
      "intent-in-place",
      "intent-durable",
      "record-temporary-written",
      "record-renamed",
      "record-durable",
      "intent-removed",
      "record-pruned",
      "preloaded-temporary-written",
      "preloaded-renamed",
      "preloaded-durable",
    ]);
  });
});

describe("what the store and node-records list", () => {
  it("records() lists the records in memory, readable or not", async () => {
    await RecordStore.open(dir);
    await writeFile(join(dir, "pulled", recordFileName("sha256:bad")), "{not json");
    const store = await RecordStore.open(dir);
    await write(store, "sha256:aa");
    assert.deepEqual(
      store
        .records()
        .map((r) => `${r.file} ${r.state}`)
        .sort(),
      [`${recordFileName("sha256:aa")} ok`, `${recordFileName("sha256:bad")} unreadable`].sort(),
    );
  });

  it("readRecordsFolder: records sorted by file name, only record files, intents by file name", async () => {
    const store = await RecordStore.open(dir);
    const refs = Array.from({ length: 12 }, (_, i) => `sha256:${String(i).padStart(64, "0")}`);
    for (const ref of refs) await write(store, ref);
    await writeFile(join(dir, "pulled", "notes.txt"), "not a record");
    await writeFile(join(dir, "pulled", `.${recordFileName("sha256:zz")}.1.abcd.tmp`), "half");
    const intent = store.writeIntent(IMAGE);
    await intent.durable;
    const folder = await readRecordsFolder(dir);
    const names = refs.map(recordFileName).sort();
    assert.deepEqual(
      folder.records.map((r) => r.file),
      names,
    );
    assert.ok(folder.records.every((r) => r.state === "ok"));
    assert.deepEqual(folder.intents, [
      { file: recordFileName(IMAGE), intent: { apiVersion: "imprimatur.dev/v1alpha1", kind: "ImagePullIntent", image: IMAGE } },
    ]);
  });

  it("readRecordsFolder: a folder without pulling/ lists no intents", async () => {
    const store = await RecordStore.open(dir);
    await write(store, "sha256:aa");
    await rm(join(dir, "pulling"), { recursive: true });
    const folder = await readRecordsFolder(dir);
    assert.deepEqual(folder.intents, []);
    assert.equal(folder.records.length, 1);
  });
});

describe("RecordStore gives back its file descriptors", () => {
  const openFds = () => readdirSync("/proc/self/fd").length;

  it("after records, snapshots, intents made durable, and writes that failed", async () => {
    const store = await RecordStore.open(dir);
    await mkdir(join(dir, "pulling", recordFileName("blocked:1")));
    const before = openFds();
    for (let i = 0; i < 10; i++) {
      await write(store, `sha256:${i}`);
      await store.writePreloaded([]);
      const intent = store.writeIntent(`${REPO}:${i}`);
      await intent.durable;
      await store.removeIntent(`${REPO}:${i}`);
      assert.throws(() => store.writeIntent("blocked:1"), { code: "EISDIR" });
    }
    assert.equal(openFds(), before);
  });
});
