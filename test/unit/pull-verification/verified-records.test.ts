// The node's records of verification at pull time (src/core/pull-verification/verified-records.ts): their updates,
// strict reading, and when a verdict may stand for every pod.
import assert from "node:assert/strict";
import { test } from "node:test";
import {
  decodeVerifiedRecord,
  MAX_VERIFIED_NAMES,
  recordVerification,
  verdictHoldsForEveryPod,
  verifiedForEveryPod,
  type Verification,
} from "../../../src/core/pull-verification/verified-records.ts";
import { parsePolicyText } from "../../../src/policy/load-policies.ts";

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
    [{ ...good, kind: "ImagePulledRecord" }, /kind must be ImageVerifiedRecord/],
    [{ ...good, digest: "sha256:abc" }, /digest is not/],
    [{ ...good, everyPod: "yes" }, /everyPod must be true or false/],
    [{ ...good, names: "r/a:1" }, /names must be a list/],
    [{ ...good, names: [""] }, /names\[0\] must not be empty/],
    [{ ...good, policyGeneration: "" }, /policyGeneration must not be empty/],
    [{ ...good, verifiedTime: "yesterday" }, /verifiedTime is not an RFC 3339 time/],
  ];
  const hex = (n: number, c = "a") => c.repeat(n);
  const { digest: _digest, ...noDigest } = good;
  bad.push(
    [{ ...good, extra: 1 }, /^RecordFormatError: record: unknown field "extra"$/],
    [noDigest, /^RecordFormatError: record: missing field "digest"$/],
    [{ ...good, digest: "" }, /^RecordFormatError: digest must not be empty$/],
    [{ ...good, imageRef: "" }, /^RecordFormatError: imageRef must not be empty$/],
    // The digest's pattern is anchored at both ends and exact in length and alphabet, for both algorithms.
    [{ ...good, digest: `x${D1}` }, /digest is not/],
    [{ ...good, digest: `${D1}0` }, /digest is not/],
    [{ ...good, digest: `sha512:${hex(127)}` }, /digest is not/],
    [{ ...good, digest: `sha512:${hex(127)}g` }, /digest is not/],
  );
  for (const [record, message] of bad)
    assert.throws(
      () => decodeVerifiedRecord(JSON.stringify(record)),
      (e: Error) => message.test(`${e.name}: ${e.message}`),
    );
  assert.equal(decodeVerifiedRecord(JSON.stringify({ ...good, digest: `sha512:${hex(128)}` })).digest, `sha512:${hex(128)}`);
  assert.throws(() => decodeVerifiedRecord("{"), /not JSON/);
  assert.throws(() => decodeVerifiedRecord("[]"), /^RecordFormatError: record must be an object$/);
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
  // Every policy and every rule counts, not just one of them.
  const independent = imagePolicy("  rules: [{action: allow, images: ['*']}]\n");
  for (const text of dependent) assert.equal(verdictHoldsForEveryPod(policies(`${independent}\n---\n${text}`)), false, text);
  assert.equal(
    verdictHoldsForEveryPod(
      policies(imagePolicy("  rules:\n  - {action: allow, images: ['a/*']}\n  - {action: allow, images: ['*'], validate: {cel: 'true'}}\n")),
    ),
    false,
  );
  // An exception may exempt one pod and not another.
  const exception =
    "apiVersion: imprimatur.dev/v1alpha1\nkind: PolicyException\nmetadata: {name: e, namespace: policy-exceptions}\nspec:\n  exceptions: [{policyName: p}]\n  match: {any: [{resources: {kinds: [Pod], namespaces: [team]}}]}\n";
  assert.equal(verdictHoldsForEveryPod(policies(`${independent}\n---\n${exception}`)), false);
});
