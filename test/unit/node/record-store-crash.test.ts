// kill -9 at each step of the record store's writes (a child process that SIGKILLs itself from the store's step
// hook): the next start reads the folder without loss — no unreadable file, every earlier record as it was, the
// interrupted pull either recorded or left as an intent — and the node proxy's start finishes what was left.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { cp, mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, describe, test } from "node:test";
import { credentialRecorded, recordPull } from "../../../src/core/pull-verification/pull-records.ts";
import { RecordStore, type StoreStep } from "../../../src/node/record-store.ts";
import { inProcessNodeProxy } from "../../support/in-process-node-proxy.ts";
import { FakeImageService } from "./fake-image-service.ts";
import { CRASH } from "./record-store-crash-fixture.ts";

const CHILD = fileURLToPath(new URL("./record-store-crash-child.ts", import.meta.url));
const STEPS: StoreStep[] = [
  "intent-in-place",
  "intent-durable",
  "record-temporary-written",
  "record-renamed",
  "record-durable",
  "verified-temporary-written",
  "verified-renamed",
  "verified-durable",
  "intent-removed",
  "record-pruned",
  "preloaded-temporary-written",
  "preloaded-renamed",
  "preloaded-durable",
];

let root: string;
let base: string;

before(async () => {
  root = await mkdtemp(join(tmpdir(), "imprimatur-records-crash-"));
  base = join(root, "base");
  const store = await RecordStore.open(base);
  await store.writePreloaded([
    { imageRef: CRASH.expired.imageRef, repositories: [CRASH.expired.repository] },
    { imageRef: CRASH.preloaded.imageRef, repositories: [CRASH.preloaded.repository] },
  ]);
  for (const r of [CRASH.kept, CRASH.gone]) {
    await store.update(r.imageRef, () => recordPull(undefined, r.imageRef, r.repository, { hash: r.hash, pod: r.pod }, new Date()));
  }
  await store.recordVerified({ imageRef: CRASH.kept.imageRef, ...CRASH.verified, everyPod: true, name: `${CRASH.kept.repository}:v1` });
});

after(async () => {
  await rm(root, { recursive: true, force: true });
});

describe("kill -9 of a process writing records", () => {
  for (const step of [...STEPS, "never" as const]) {
    test(step === "never" ? "no crash: the pull is recorded, the gone image pruned, the expired entry dropped" : `killed after ${step}`, async () => {
      const dir = join(root, step);
      await cp(base, dir, { recursive: true });
      const child = spawnSync(process.execPath, [CHILD, dir, step], { encoding: "utf8", timeout: 60_000 });
      if (step === "never") assert.equal(child.stdout, "done\n", child.stderr);
      else assert.equal(child.signal, "SIGKILL", `the child reached ${step} and died there: ${child.stderr}`);

      const store = await RecordStore.open(dir);
      assert.deepEqual(
        store.records().filter((r) => r.state !== "ok"),
        [],
        "no unreadable record",
      );
      const kept = store.get(CRASH.kept.imageRef);
      assert.ok(kept.state === "ok" && credentialRecorded(kept.record, CRASH.kept.repository, CRASH.kept.hash), "the earlier record is intact");
      assert.ok(store.isPreloaded(CRASH.preloaded.imageRef, CRASH.preloaded.repository), "the preloaded list is readable");
      const intents = await store.leftoverIntents();
      assert.ok(
        intents.every((i) => i.intent !== undefined),
        "every intent left is readable",
      );
      const pulled = store.get(CRASH.pulled.imageRef);
      const recorded = pulled.state === "ok" && credentialRecorded(pulled.record, CRASH.pulled.repository, CRASH.pulled.hash);
      assert.ok(recorded || intents.some((i) => i.intent?.image === CRASH.pulled.image), "the pull is recorded or its intent is there");
      assert.ok(!(await readdir(join(dir, "pulled"))).some((n) => n.endsWith(".tmp")), "temporary files are gone");
      assert.ok(!(await readdir(join(dir, "verified"))).some((n) => n.endsWith(".tmp")), "temporary verification files are gone");
      assert.equal(store.verification(CRASH.kept.imageRef)?.digest, CRASH.verified.digest, "the earlier verification is intact");
      // The pull's verification is whole or absent (then the image is verified again): never a torn record.
      const verification = store.verification(CRASH.pulled.imageRef);
      assert.ok(verification === undefined || verification.names.includes(CRASH.pulled.image));
      const verifiedFiles = (await readdir(join(dir, "verified"))).filter((n) => n.startsWith("sha256-"));
      assert.equal(store.counts().verified, verifiedFiles.length, "every verification file reads back whole");
      if (["verified-renamed", "verified-durable", "intent-removed", "record-pruned", "never"].includes(step))
        assert.ok(verification, "renamed into place: kept");

      // The next start of the proxy finishes it: no intent left, the pulled image recorded (for nobody if its
      // record was not written), the earlier record untouched.
      const fake = new FakeImageService();
      fake.preload(CRASH.pulled.image, CRASH.pulled.imageRef);
      fake.preload(`${CRASH.kept.repository}:v1`, CRASH.kept.imageRef);
      fake.preload(`${CRASH.preloaded.repository}:1`, CRASH.preloaded.imageRef);
      const proxy = inProcessNodeProxy({ store, runtime: fake.runtime });
      await proxy.start();
      await proxy.stop();
      assert.deepEqual(await store.leftoverIntents(), []);
      assert.equal(store.get(CRASH.pulled.imageRef).state, "ok");
      if (recorded) {
        const after = store.get(CRASH.pulled.imageRef);
        assert.ok(after.state === "ok" && credentialRecorded(after.record, CRASH.pulled.repository, CRASH.pulled.hash), "a written record is kept");
      }
      const keptAfter = store.get(CRASH.kept.imageRef);
      assert.ok(keptAfter.state === "ok" && credentialRecorded(keptAfter.record, CRASH.kept.repository, CRASH.kept.hash));
      assert.equal(store.get(CRASH.gone.imageRef).state, "none");
      assert.equal(store.isPreloaded(CRASH.expired.imageRef, CRASH.expired.repository), false);
    });
  }
});

describe("kill -9 during the first start's snapshot", () => {
  const SNAPSHOT_STEPS = ["preloaded-temporary-written", "preloaded-renamed", "preloaded-durable"] as const;
  for (const step of [...SNAPSHOT_STEPS, "never" as const]) {
    const done = step !== "preloaded-temporary-written";
    test(`killed after ${step}: the next start ${done ? "has the snapshot" : "is still the first"}`, async () => {
      const dir = join(root, `first-${step}`);
      const child = spawnSync(process.execPath, [CHILD, dir, step, "first-start"], { encoding: "utf8", timeout: 60_000 });
      if (step === "never") assert.equal(child.stdout, "done\n", child.stderr);
      else assert.equal(child.signal, "SIGKILL", `the child reached ${step} and died there: ${child.stderr}`);
      const store = await RecordStore.open(dir);
      assert.equal(store.snapshot, done ? "taken" : "due");
      assert.equal(store.isPreloaded(CRASH.preloaded.imageRef, CRASH.preloaded.repository), done);
      assert.ok(!(await readdir(dir)).some((n) => n.endsWith(".tmp")), "temporary files are gone");
    });
  }
});
