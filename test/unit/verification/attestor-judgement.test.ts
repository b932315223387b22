// judgeAttestors (src/core/image-policy/attestors.ts) on hand-built sets: which entries the evidence names, nested
// entries among leaves, and the exact explanation of each unsatisfied set (distinct signers counted, nested ones
// included).
import assert from "node:assert/strict";
import { test } from "node:test";
import { judgeAttestors, type AttestorEntry, type AttestorSet, type EntryOutcome, type SignerEvidence } from "../../../src/core/image-policy/attestors.ts";

const leaf = (path: string, label = path): AttestorEntry => ({
  type: "staticKey",
  path,
  label,
  key: { pem: "", fingerprint: `sha256:${path}` },
  ignoreTlog: false,
  trustRoot: "public-good",
});
const nested = (path: string, label: string, sets: AttestorSet[]): AttestorEntry => ({ type: "nested", path, label, sets });
const set = (path: string, required: number, entries: AttestorEntry[]): AttestorSet => ({ path, required, entries });
const evidence = (entry: string, signer: string): SignerEvidence => ({ entry, attestor: entry, signer, format: "cosign-signature" });
const signed = (entry: string, ...signers: string[]): [string, EntryOutcome] => [entry, { ok: true, signers: signers.map((s) => evidence(entry, s)) }];
const unsigned = (entry: string, reason: string): [string, EntryOutcome] => [entry, { ok: false, reason }];

test("of several entries that would do, the evidence names the first in the policy's order", () => {
  const sets = [set("s", 1, [leaf("a"), leaf("b")])];
  const j = judgeAttestors(sets, new Map([signed("a", "alice"), signed("b", "bob")]));
  assert.equal(j.satisfied, true);
  assert.deepEqual(j.evidence, [evidence("a", "alice")]);

  const first = [set("s", 1, [nested("n", "nested n", [set("n.s", 1, [leaf("x")])]), leaf("b")])];
  const k = judgeAttestors(first, new Map([signed("x", "xavier"), signed("b", "bob")]));
  assert.deepEqual(k.evidence, [evidence("x", "xavier")]);
});

test("a nested entry before leaves counts as one entry, and the leaves after it count too", () => {
  const sets = [set("s", 2, [nested("n", "nested n", [set("n.s", 1, [leaf("x")])]), leaf("b")])];
  const j = judgeAttestors(sets, new Map([signed("x", "xavier"), signed("b", "bob")]));
  assert.equal(j.satisfied, true);
  assert.deepEqual(j.evidence, [evidence("x", "xavier"), evidence("b", "bob")]);
  assert.equal(judgeAttestors(sets, new Map([signed("x", "xavier"), unsigned("b", "no signature by this key")])).satisfied, false);
});

test("each unsatisfied set is explained on its own, one after the other", () => {
  const sets = [set("attestors[0]", 1, [leaf("a", "key a")]), set("attestors[1]", 1, [leaf("b", "key b")])];
  const j = judgeAttestors(sets, new Map([unsigned("a", "no signature by this key")]));
  assert.equal(j.satisfied, false);
  assert.deepEqual(j.evidence, []);
  assert.equal(j.explanation, "attestors[0] needs its entry: key a: no signature by this key; attestors[1] needs its entry: key b: not verified");
});

test("too few entries verified: the explanation names them and says nothing of shared signers", () => {
  const sets = [set("attestors[0]", 2, [leaf("a", "key a"), leaf("b", "key b")])];
  const j = judgeAttestors(sets, new Map([signed("a", "alice"), unsigned("b", "no signature by this key")]));
  assert.equal(j.explanation, "attestors[0] needs all 2: key a verified; key b: no signature by this key");
});

test("enough entries verified by too few signers: the distinct signers are counted, one in the singular", () => {
  const sets = [set("attestors[0]", 2, [leaf("a", "key a"), leaf("b", "key b")])];
  const j = judgeAttestors(sets, new Map([signed("a", "alice"), signed("b", "alice")]));
  assert.equal(j.satisfied, false);
  assert.equal(
    j.explanation,
    "attestors[0] needs all 2: key a verified; key b verified; but one signer counts for one entry only, and these entries have 1 distinct signer",
  );
});

test("a satisfied nested entry's signers are counted with the others when signers fall short", () => {
  // The nested set needs alice and bob; the leaf only has alice, who is then taken.
  const sets = [set("attestors[0]", 2, [nested("n", "nested set n", [set("n.s", 2, [leaf("x"), leaf("y")])]), leaf("b", "key b")])];
  const j = judgeAttestors(sets, new Map([signed("x", "alice"), signed("y", "bob"), signed("b", "alice")]));
  assert.equal(j.satisfied, false);
  assert.equal(
    j.explanation,
    "attestors[0] needs all 2: nested set n satisfied; key b verified; but one signer counts for one entry only, and these entries have 2 distinct signers",
  );
});

test("a nested entry inside a nested entry that is satisfied ends the search there: the evidence is the first found", () => {
  const inner = nested("m", "nested m", [set("m.s", 1, [leaf("x")])]);
  const sets = [set("s", 1, [nested("n", "nested n", [set("n.s", 1, [inner])]), leaf("b")])];
  const j = judgeAttestors(sets, new Map([signed("x", "xavier"), signed("b", "bob")]));
  assert.equal(j.satisfied, true);
  assert.deepEqual(j.evidence, [evidence("x", "xavier")]);
});
