// Verification at pull time on the node's side: the records in the state folder and their name index
// (src/node/record-store.ts), and the policies in force (src/node/node-policies.ts): their generation, what a
// reload and the watch do, and what the operator is told.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { closeSync, constants, openSync } from "node:fs";
import { mkdtemp, readdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { pino } from "pino";
import { recordPull } from "../../../src/core/pull-verification/pull-records.ts";
import { decodeVerifiedRecord, type Verification } from "../../../src/core/pull-verification/verified-records.ts";
import { NodePolicies, generationOf } from "../../../src/node/node-policies.ts";
import { RecordStore, recordFileName } from "../../../src/node/record-store.ts";
import type { PolicyError } from "../../../src/policy/policy-error.ts";
import { PolicyFolder, type PolicySource, type PolicyText } from "../../../src/policy/policy-source.ts";

const D1 = `sha256:${"1".repeat(64)}`;
const D2 = `sha256:${"2".repeat(64)}`;
const v = (over: Partial<Verification> = {}): Verification => ({
  imageRef: "sha256:img",
  digest: D1,
  policyGeneration: "g1",
  everyPod: true,
  name: "r/a:1",
  ...over,
});
const imagePolicy = (spec: string) => `apiVersion: imprimatur.dev/v1alpha1\nkind: ImagePolicy\nmetadata: {name: p}\nspec:\n${spec}`;
const dirs: string[] = [];
after(() => Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true }))));
/** The promise's value, or "timed out" after `ms`. */
async function within<T>(promise: Promise<T>, ms: number): Promise<T | "timed out"> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([promise, new Promise<"timed out">((resolve) => (timer = setTimeout(() => resolve("timed out"), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

test("the store writes records under verified/, finds a name's image, survives a reopen, and prunes with the image", async () => {
  const dir = await mkdtemp(join(tmpdir(), "imprimatur-verified-"));
  dirs.push(dir);
  const store = await RecordStore.open(dir);
  await store.recordVerified(v({ imageRef: "sha256:old", name: "r/a:1" }));
  await store.recordVerified(v({ imageRef: "sha256:new", digest: D2, name: "r/a:1" }));
  assert.equal(store.verifiedAs("r/a:1"), "sha256:new", "the tag moved: the newest verification names it");
  assert.deepEqual((await readdir(join(dir, "verified"))).sort(), [recordFileName("sha256:new"), recordFileName("sha256:old")].sort());
  const reopened = await RecordStore.open(dir);
  assert.equal(reopened.verifiedAs("r/a:1"), "sha256:new");
  assert.equal(reopened.verification("sha256:old")?.digest, D1);
  // A file moved under another image's name, or torn, is no record: the image is verified again.
  await writeFile(join(dir, "verified", recordFileName("sha256:forged")), await readFile(join(dir, "verified", recordFileName("sha256:new")), "utf8"));
  await writeFile(join(dir, "verified", recordFileName("sha256:torn")), "{");
  const third = await RecordStore.open(dir);
  assert.equal(third.verification("sha256:forged"), undefined);
  assert.equal(third.verification("sha256:torn"), undefined);
  assert.equal(third.counts().verified, 2);
  const gone = await third.prune(new Set(["sha256:old"]), third.writeTicket());
  assert.ok(gone.includes("sha256:new"));
  assert.equal(third.verifiedAs("r/a:1"), undefined);
  assert.equal(third.verification("sha256:old")?.digest, D1);
  await third.remove("sha256:old");
  assert.equal(third.verification("sha256:old"), undefined);
});

test("a policy set's generation follows its documents, in any order, and changes with any of them", async () => {
  const a = { origin: "a.yaml", text: "x" };
  const b = { origin: "b.yaml", text: "y" };
  assert.equal(generationOf([a, b]), generationOf([b, a]));
  assert.notEqual(generationOf([a, b]), generationOf([a, { ...b, text: "y2" }]));
  assert.equal(generationOf([a]), generationOf([{ ...a, origin: "moved/a.yaml" }]), "where a document is does not change what it says");
  assert.notEqual(
    generationOf([{ origin: "a", text: "xy" }]),
    generationOf([
      { origin: "a", text: "x" },
      { origin: "b", text: "y" },
    ]),
  );
  const dir = await mkdtemp(join(tmpdir(), "imprimatur-node-policies-"));
  dirs.push(dir);
  await writeFile(join(dir, "p.yaml"), imagePolicy("  rules: [{action: allow, images: ['*']}]\n"));
  const loaded = new NodePolicies(new PolicyFolder(dir), pino({ level: "silent" }));
  const first = await loaded.first(false);
  assert.equal(first.everyPod, true);
  assert.match(first.generation, /^sha256:[0-9a-f]{64}$/);
  const seen: string[] = [];
  await loaded.reload((p) => seen.push(p.generation));
  assert.equal(seen.length, 0, "the same documents: no change");
  await writeFile(join(dir, "p.yaml"), imagePolicy("  namespaces: [a]\n  rules: [{action: allow, images: ['*']}]\n"));
  await loaded.reload((p) => seen.push(p.generation));
  assert.equal(seen.length, 1);
  assert.notEqual(seen[0], first.generation);
  assert.equal(loaded.current().everyPod, false);
  await writeFile(join(dir, "p.yaml"), "kind: Nonsense\n");
  assert.ok(await loaded.reload(() => assert.fail("a set that does not load changes nothing")));
  assert.equal(loaded.current().generation, seen[0]);
});

test("a prune by an image list taken before a verified pull ended spares its record", async () => {
  const dir = await mkdtemp(join(tmpdir(), "imprimatur-verified-prune-"));
  dirs.push(dir);
  const store = await RecordStore.open(dir);
  const listedAt = store.writeTicket(); // the runtime's list is taken, then the pull ends
  const pruning = store.prune(new Set(), listedAt); // a prune already waiting for the store's lock
  const written = store.recordVerified(v({ imageRef: "sha256:just-pulled" }));
  const gone = await pruning;
  await written;
  assert.ok(!gone.includes("sha256:just-pulled"));
  assert.equal(store.verification("sha256:just-pulled")?.digest, D1);
  assert.equal((await RecordStore.open(dir)).verification("sha256:just-pulled")?.digest, D1);
});

test("a verification recorded while a removal of its image waits for the store is still written, whole", async () => {
  const dir = await mkdtemp(join(tmpdir(), "imprimatur-verified-removed-"));
  dirs.push(dir);
  const store = await RecordStore.open(dir);
  await store.recordVerified(v({ imageRef: "sha256:img" }));
  const removing = store.remove("sha256:img"); // runs once this call returns: after the record below is kept
  const written = store.recordVerified(v({ imageRef: "sha256:img", digest: D2 }));
  await removing;
  assert.equal((await written).digest, D2);
  assert.deepEqual(await readdir(join(dir, "verified")), [recordFileName("sha256:img")], "the record, and no temporary file");
  assert.equal(decodeVerifiedRecord(await readFile(join(dir, "verified", recordFileName("sha256:img")), "utf8")).digest, D2);
});

test("dropping an image's verification record keeps its names that were verified as another image since", async () => {
  const dir = await mkdtemp(join(tmpdir(), "imprimatur-verified-moved-tag-"));
  dirs.push(dir);
  const store = await RecordStore.open(dir);
  await store.recordVerified(v({ imageRef: "sha256:old", name: "r/a:1" }));
  await store.recordVerified(v({ imageRef: "sha256:old", name: "r/a:old" }));
  await store.recordVerified(v({ imageRef: "sha256:new", digest: D2, name: "r/a:1" })); // the tag moved
  await store.remove("sha256:old");
  assert.equal(store.verifiedAs("r/a:1"), "sha256:new");
  assert.equal(store.verifiedAs("r/a:old"), undefined);
  await store.recordVerified(v({ imageRef: "sha256:old", name: "r/a:1" })); // and back
  assert.deepEqual(await store.prune(new Set(["sha256:old"]), store.writeTicket()), ["sha256:new"]);
  assert.equal(store.verifiedAs("r/a:1"), "sha256:old");
});

test("a prune names an image gone once, whether its pulled record, its verification record or both went", async () => {
  const dir = await mkdtemp(join(tmpdir(), "imprimatur-verified-gone-"));
  dirs.push(dir);
  const store = await RecordStore.open(dir);
  await store.update("sha256:both", () => recordPull(undefined, "sha256:both", "r/a", undefined, new Date()));
  await store.recordVerified(v({ imageRef: "sha256:both" }));
  await store.recordVerified(v({ imageRef: "sha256:verified-only", name: "r/b:1" }));
  assert.deepEqual((await store.prune(new Set(), store.writeTicket())).sort(), ["sha256:both", "sha256:verified-only"]);
  assert.deepEqual(await readdir(join(dir, "verified")), []);
  assert.deepEqual(await readdir(join(dir, "pulled")), []);
});

test("a verification record moved under another image's name counts for neither image after a restart", async () => {
  const dir = await mkdtemp(join(tmpdir(), "imprimatur-verified-moved-"));
  dirs.push(dir);
  const store = await RecordStore.open(dir);
  await store.recordVerified(v({ imageRef: "sha256:a", name: "r/a:1" }));
  await rename(join(dir, "verified", recordFileName("sha256:a")), join(dir, "verified", recordFileName("sha256:b")));
  const reopened = await RecordStore.open(dir);
  assert.equal(reopened.verification("sha256:a"), undefined);
  assert.equal(reopened.verification("sha256:b"), undefined);
  assert.equal(reopened.verifiedAs("r/a:1"), undefined);
  assert.equal(reopened.counts().verified, 0);
});

test("a start reads only the record files of verified/: a pipe of another name there is not opened (it would hold the start)", async () => {
  const dir = await mkdtemp(join(tmpdir(), "imprimatur-verified-pipe-"));
  dirs.push(dir);
  await (await RecordStore.open(dir)).recordVerified(v());
  const pipe = join(dir, "verified", "notes");
  execFileSync("mkfifo", [pipe]);
  try {
    const opened = await within(RecordStore.open(dir), 3000);
    assert.ok(opened !== "timed out", "the start waited on the pipe");
    assert.equal(opened.verification("sha256:img")?.digest, D1);
  } finally {
    // Should a start be blocked opening the pipe, its writing end releases it (no reader: ENXIO, nothing to do).
    try {
      closeSync(openSync(pipe, constants.O_WRONLY | constants.O_NONBLOCK));
    } catch {
      // no reader
    }
  }
});

/** Policies held in memory: the test changes them, fires the watch, and sees the outcome of each load. */
class MemorySource implements PolicySource {
  readonly description = "test policies";
  texts: PolicyText[] = [];
  readFails: Error | undefined;
  readonly outcomes: Array<readonly PolicyError[]> = [];
  changed: (() => void) | undefined;
  failed: ((err: unknown) => void) | undefined;
  closed = 0;

  async read(): Promise<{ texts: PolicyText[]; errors: PolicyError[] }> {
    if (this.readFails) throw this.readFails;
    return { texts: [...this.texts], errors: [] };
  }

  watch(changed: () => void, failed: (err: unknown) => void): { close(): void } {
    this.changed = changed;
    this.failed = failed;
    return { close: () => void this.closed++ };
  }

  loaded(outcome: { errors: readonly PolicyError[] }): void {
    this.outcomes.push(outcome.errors);
  }
}

const logged = () => {
  const lines: Array<Record<string, unknown>> = [];
  return { lines, logger: pino({ level: "debug" }, { write: (line: string) => void lines.push(JSON.parse(line)) }) };
};
const NO_POLICY = "no image policy is in force: every pull is allowed";

test("the node's policies warn when none is in force, and log each reload that changes them or fails", async () => {
  const empty = logged();
  await new NodePolicies(new MemorySource(), empty.logger).first(true);
  assert.deepEqual(
    empty.lines.filter((l) => l.msg === NO_POLICY).map((l) => [l.level, l.policies]),
    [[40, "test policies"]],
  );

  const source = new MemorySource();
  source.texts = [{ origin: "p", text: imagePolicy("  rules: [{action: allow, images: ['*']}]\n") }];
  const { lines, logger } = logged();
  const policies = new NodePolicies(source, logger);
  await policies.first(false);
  assert.equal(lines.filter((l) => l.msg === NO_POLICY).length, 0, "one policy is in force");
  source.texts = [{ origin: "p", text: imagePolicy("  rules: [{action: deny, images: ['*']}]\n") }];
  await policies.reload(() => {});
  const reloaded = lines.filter((l) => l.msg === "policies reloaded: images are verified again before use");
  assert.deepEqual(
    reloaded.map((l) => [l.level, l.generation, l.policies]),
    [[30, policies.current().generation, ["p"]]],
  );
  source.texts = [{ origin: "p", text: "kind: Nonsense\n" }];
  const failure = await policies.reload(() => assert.fail("a set that does not load changes nothing"));
  const failed = lines.filter((l) => l.msg === "policy reload failed; keeping the last good policies");
  assert.equal(failed.length, 1);
  assert.equal(failed[0]!.level, 50);
  assert.deepEqual(failed[0]!.errors, JSON.parse(JSON.stringify(failure!.errors)));
  assert.ok(failure!.errors.length > 0);
});

test("the node's policies tell their source the outcome of each load", async () => {
  const source = new MemorySource();
  source.texts = [{ origin: "p", text: imagePolicy("  rules: [{action: allow, images: ['*']}]\n") }];
  const policies = new NodePolicies(source, pino({ level: "silent" }));
  await policies.first(false);
  source.texts = [{ origin: "p", text: "kind: Nonsense\n" }];
  await policies.reload(() => {});
  assert.equal(source.outcomes.length, 2);
  assert.equal(source.outcomes[0]!.length, 0, "the first set is in force");
  assert.ok(source.outcomes[1]!.length > 0, "the reload failed, with its errors");
});

test("a read that throws is no policy error: the reload rejects with it, and the set in force stays", async () => {
  const source = new MemorySource();
  source.texts = [{ origin: "p", text: imagePolicy("  rules: [{action: allow, images: ['*']}]\n") }];
  const policies = new NodePolicies(source, pino({ level: "silent" }));
  const first = await policies.first(false);
  source.readFails = new Error("the apiserver went away");
  await assert.rejects(
    policies.reload(() => assert.fail("nothing loaded")),
    /the apiserver went away/,
  );
  assert.equal(policies.current(), first);
});

test("before the first set: current() throws, close() is no error, and a reload brings a set in force", async () => {
  const source = new MemorySource();
  source.texts = [{ origin: "p", text: imagePolicy("  rules: [{action: allow, images: ['*']}]\n") }];
  const policies = new NodePolicies(source, pino({ level: "silent" }));
  assert.throws(() => policies.current(), /NodePolicies\.current\(\) before first\(\)/);
  policies.close(); // as a start that fails before watching does
  const seen: string[] = [];
  assert.equal(await policies.reload((p) => seen.push(p.generation)), undefined);
  assert.deepEqual(seen, [policies.current().generation]);
});

test("watching reloads on every change the source reports, logs a watch that fails, and close() stops the source's watch", async () => {
  const source = new MemorySource();
  source.texts = [{ origin: "p", text: imagePolicy("  rules: [{action: allow, images: ['*']}]\n") }];
  const { lines, logger } = logged();
  const policies = new NodePolicies(source, logger);
  await policies.first(false);
  let reloaded: (generation: string) => void = () => {};
  policies.watch((p) => reloaded(p.generation));
  for (const action of ["deny", "allow"]) {
    source.texts = [{ origin: "p", text: imagePolicy(`  rules: [{action: ${action}, images: ['*']}]\n`) }];
    const generation = new Promise<string>((resolve) => (reloaded = resolve));
    source.changed!();
    assert.equal(await within(generation, 5000), policies.current().generation, `reloaded with ${action}`);
  }
  source.failed!(new Error("inotify watch limit reached"));
  const warned = lines.filter((l) => l.msg === "cannot watch the policies; restart the proxy to reload them");
  assert.deepEqual(
    warned.map((l) => [l.level, (l.err as { message?: string } | undefined)?.message]),
    [[40, "inotify watch limit reached"]],
  );
  assert.equal(source.closed, 0);
  policies.close();
  assert.equal(source.closed, 1);
});

test("a source that cannot be watched: watch() and close() are no error, and the set stays as first loaded", async () => {
  const folder = await mkdtemp(join(tmpdir(), "imprimatur-node-policies-unwatched-"));
  dirs.push(folder);
  await writeFile(join(folder, "p.yaml"), imagePolicy("  rules: [{action: allow, images: ['*']}]\n"));
  const inner = new PolicyFolder(folder);
  const unwatched: PolicySource = { description: folder, read: () => inner.read() };
  const policies = new NodePolicies(unwatched, pino({ level: "silent" }));
  const first = await policies.first(false);
  policies.watch(() => assert.fail("nothing watches"));
  policies.close();
  assert.equal(policies.current(), first);
});

test("a change between the first load and the watch (while the proxy builds its engine) is read when the watch starts; no change, no reload", async () => {
  const source = new MemorySource();
  source.texts = [{ origin: "p", text: imagePolicy("  rules: [{action: allow, images: ['*']}]\n") }];
  const policies = new NodePolicies(source, pino({ level: "silent" }));
  const first = await policies.first(false);
  source.texts = [{ origin: "p", text: imagePolicy("  rules: [{action: deny, images: ['*']}]\n") }];
  const seen: string[] = [];
  policies.watch((next) => seen.push(next.generation));
  for (let i = 0; i < 100 && seen.length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 10));
  assert.equal(seen.length, 1);
  assert.notEqual(seen[0], first.generation);
  assert.equal(policies.current().set.ImagePolicy[0]!.rules[0]!.action, "deny");
  policies.close();

  const unchanged = new NodePolicies(source, pino({ level: "silent" }));
  await unchanged.first(false);
  const calls: string[] = [];
  unchanged.watch((next) => calls.push(next.generation));
  await new Promise((resolve) => setTimeout(resolve, 50));
  assert.deepEqual(calls, [], "the same documents are the same generation");
  unchanged.close();
});
