// The node's records of verification at pull time: their updates, strict reading, the store's files and name
// index, when a verdict may stand for every pod, and the generation of a policy set.
import assert from "node:assert/strict";
import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { pino } from "pino";
import {
  decodeVerifiedRecord,
  MAX_VERIFIED_NAMES,
  recordVerification,
  verdictHoldsForEveryPod,
  verifiedForEveryPod,
  type Verification,
} from "../../../src/core/pull-verification/verified-records.ts";
import { NodePolicies, generationOf } from "../../../src/node/node-policies.ts";
import { RecordStore, recordFileName } from "../../../src/node/record-store.ts";
import { parsePolicyText } from "../../../src/policy/load-policies.ts";
import { PolicyFolder } from "../../../src/policy/policy-source.ts";
import { parseVerifierArgs, checkDescriptor, reasonLine } from "../../../src/cli/containerd-verifier.ts";

const D1 = `sha256:${"1".repeat(64)}`;
const D2 = `sha256:${"2".repeat(64)}`;
const NOW = new Date("2026-11-30T10:00:00Z");
const v = (over: Partial<Verification> = {}): Verification => ({
  imageRef: "sha256:img",
  digest: D1,
  policyGeneration: "g1",
  everyPod: true,
  name: "r/a:1",
  ...over,
});
const dirs: string[] = [];
after(() => Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true }))));

test("a verification adds its name to a record of the same digest and generation, and starts afresh otherwise", () => {
  const first = recordVerification(undefined, v(), NOW);
  assert.deepEqual(first, {
    apiVersion: "imprimatur.dev/v1alpha1",
    kind: "ImageVerifiedRecord",
    verifiedTime: NOW.toISOString(),
    imageRef: "sha256:img",
    digest: D1,
    policyGeneration: "g1",
    everyPod: true,
    names: ["r/a:1"],
  });
  assert.deepEqual(recordVerification(first, v({ name: "r/a:latest" }), NOW).names, ["r/a:1", "r/a:latest"]);
  assert.deepEqual(recordVerification(recordVerification(first, v({ name: "r/b" }), NOW), v(), NOW).names, ["r/b", "r/a:1"], "newest last, once");
  assert.deepEqual(recordVerification(first, v({ policyGeneration: "g2", name: "x" }), NOW).names, ["x"]);
  assert.deepEqual(recordVerification(first, v({ digest: D2, name: "x" }), NOW).names, ["x"]);
  let many = first;
  for (let i = 0; i < MAX_VERIFIED_NAMES + 5; i++) many = recordVerification(many, v({ name: `r/a:${i}` }), NOW);
  assert.equal(many.names.length, MAX_VERIFIED_NAMES);
  assert.equal(many.names.at(-1), `r/a:${MAX_VERIFIED_NAMES + 4}`);
});

test("a record stands for every pod only under its own generation and when its verdict held for every pod", () => {
  assert.equal(verifiedForEveryPod(recordVerification(undefined, v(), NOW), "g1"), true);
  assert.equal(verifiedForEveryPod(recordVerification(undefined, v(), NOW), "g2"), false);
  assert.equal(verifiedForEveryPod(recordVerification(undefined, v({ everyPod: false }), NOW), "g1"), false);
  assert.equal(verifiedForEveryPod(undefined, "g1"), false);
});

test("records are read strictly: anything not exactly what is written is unreadable", () => {
  const good = recordVerification(undefined, v(), NOW);
  assert.deepEqual(decodeVerifiedRecord(JSON.stringify(good)), good);
  const bad: Array<[unknown, RegExp]> = [
    [{ ...good, extra: 1 }, /unknown field "extra"/],
    [{ ...good, kind: "ImagePulledRecord" }, /kind must be ImageVerifiedRecord/],
    [{ ...good, digest: "sha256:abc" }, /digest is not/],
    [{ ...good, everyPod: "yes" }, /everyPod must be true or false/],
    [{ ...good, names: "r/a:1" }, /names must be a list/],
    [{ ...good, names: [""] }, /names\[0\] must not be empty/],
    [{ ...good, policyGeneration: "" }, /policyGeneration must not be empty/],
    [{ ...good, verifiedTime: "yesterday" }, /verifiedTime is not an RFC 3339 time/],
  ];
  for (const [record, message] of bad) assert.throws(() => decodeVerifiedRecord(JSON.stringify(record)), message);
  assert.throws(() => decodeVerifiedRecord("{"), /not JSON/);
});

const policies = (text: string) => {
  const { policies: set, errors } = parsePolicyText(text, "p.yaml");
  assert.deepEqual(errors, []);
  return set;
};
const imagePolicy = (spec: string) => `apiVersion: imprimatur.dev/v1alpha1\nkind: ImagePolicy\nmetadata: {name: p}\nspec:\n${spec}`;

test("a verdict holds for every pod only when nothing in the policies depends on the pod", () => {
  assert.equal(verdictHoldsForEveryPod(policies(imagePolicy("  rules: [{action: allow, images: ['*']}]\n"))), true);
  const dependent = [
    imagePolicy("  namespaces: [a]\n  rules: [{action: allow, images: ['*']}]\n"),
    imagePolicy("  namespaceSelector: {matchLabels: {a: b}}\n  rules: [{action: allow, images: ['*']}]\n"),
    imagePolicy("  matchConstraints: {objectSelector: {matchLabels: {app: web}}}\n  rules: [{action: allow, images: ['*']}]\n"),
    imagePolicy("  rules: [{action: allow, images: ['*'], validate: {cel: 'object.metadata.name != \"\"'}}]\n"),
    "apiVersion: imprimatur.dev/v1alpha1\nkind: NamespacedImagePolicy\nmetadata: {name: tenant, namespace: team}\nspec:\n  rules: [{action: allow, images: ['*']}]\n",
  ];
  for (const text of dependent) assert.equal(verdictHoldsForEveryPod(policies(text)), false, text);
});

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

test("containerd-verifier reads containerd's arguments as Go's flag package does, and its own", () => {
  const args = parseVerifierArgs(["--policies=/p", "-name", "r/a:1", "-digest", D1, "--stdin-media-type=application/vnd.oci.descriptor.v1+json"]);
  assert.deepEqual(args, { policies: "/p", failOpen: false, timeoutMs: 8000, name: "r/a:1", digest: D1, mediaType: "application/vnd.oci.descriptor.v1+json" });
  assert.equal(parseVerifierArgs(["-policies", "/p", "-name", "n", "-digest", D1, "-stdin-media-type", "t", "--timeout", "500ms"]).timeoutMs, 500);
  const problems: Array<[string[], RegExp]> = [
    [["-name", "n", "-digest", D1, "-stdin-media-type", "t"], /-policies is required/],
    [["--policies", "/p", "-name", "n", "-digest", D1, "-stdin-media-type", "t", "-platform", "x"], /unknown flag -platform/],
    [["--policies", "/p", "-name"], /-name needs a value/],
    [["--policies", "/p", "stray"], /unexpected argument "stray"/],
    [["--policies", "/p", "--policies", "/q"], /-policies given twice/],
    [["--policies", "/p", "-name", "n", "-digest", D1, "-stdin-media-type", "t", "--failure-policy", "Maybe"], /must be Fail or Ignore/],
    [["--policies", "/p", "-name", "n", "-digest", D1, "-stdin-media-type", "t", "--timeout", "0s"], /--timeout must be a duration/],
  ];
  for (const [argv, message] of problems) assert.throws(() => parseVerifierArgs(argv), message);
  assert.equal(checkDescriptor(JSON.stringify({ mediaType: "m", digest: D1, size: 1 }), D1), undefined);
  assert.match(checkDescriptor("[]", D1) ?? "", /not an OCI descriptor/);
  assert.match(checkDescriptor(JSON.stringify({ mediaType: "m", digest: D1 }), D1) ?? "", /no mediaType or size/);
  assert.equal(reasonLine("a\nb"), "a b");
  const long = reasonLine("é".repeat(5000));
  assert.ok(Buffer.byteLength(long) <= 4096 && long.endsWith("..."));
});
