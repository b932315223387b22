// Verification at pull time on the node's side: the records in the state folder and their name index
// (src/node/record-store.ts), and the generation of the policies in force (src/node/node-policies.ts).
import assert from "node:assert/strict";
import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { pino } from "pino";
import type { Verification } from "../../../src/core/pull-verification/verified-records.ts";
import { NodePolicies, generationOf } from "../../../src/node/node-policies.ts";
import { RecordStore, recordFileName } from "../../../src/node/record-store.ts";
import { PolicyFolder } from "../../../src/policy/policy-source.ts";

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
