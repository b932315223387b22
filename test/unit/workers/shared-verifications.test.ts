// The primary's VerificationBroker (src/workers/shared-verifications.ts), and ImageVerifiers sharing it as the
// workers of serve --workers do (each its own verifier, as each worker has): the first to claim a key verifies,
// the others get its result; a result is kept as long as the verifier keeps it, an outage not at all; a claimant
// that gives up or goes hands the claim to the next waiter. The worker processes themselves, over IPC, are tested
// in test/e2e/serve-workers.test.ts.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { test } from "node:test";
import type { CredentialLookup } from "../../../src/credentials/credential.ts";
import { ImageVerifier, type VerificationRequest, type VerificationResult } from "../../../src/verification/image-verifier.ts";
import { VerificationBroker } from "../../../src/workers/shared-verifications.ts";
import { cosignSignatureLayer, simpleSigningPayload } from "../../support/signer/cosign-signatures.ts";
import { generateSigningKey } from "../../support/signer/keys.ts";
import { attestorsWith, signatureRegistry } from "../../support/verification-fixtures.ts";

const digest = `sha256:${createHash("sha256").update("shared").digest("hex")}`;
const release = generateSigningKey("ecdsa-p256");
const signature = await cosignSignatureLayer({ key: release, payload: simpleSigningPayload({ dockerReference: "r.example/app", digest }) });
const attestors = attestorsWith(`{staticKey: {name: release, ignoreTlog: true, key: ${JSON.stringify(release.publicKeyPem)}}}`);
const anonymous: CredentialLookup = () => [];
const request = (rule = 0): VerificationRequest => ({
  image: { registry: "r.example", repository: "app", digest },
  policy: "p",
  rule,
  attestors,
  lookup: anonymous,
});
const soon = () => Date.now() + 5_000;
const verified: VerificationResult = { status: "verified", evidence: [] };

test("the first claimant verifies; a later one gets its result; concurrent ones wait for it", async () => {
  const broker = new VerificationBroker();
  assert.deepEqual(await broker.claim("k", "w1"), { verify: true });
  const waiting = [broker.claim("k", "w2"), broker.claim("k", "w3")];
  broker.settle("k", "w1", verified, 1_000);
  for (const answer of await Promise.all(waiting)) assert.deepEqual(answer, { result: verified, keepMs: 1_000 });
  const later = await broker.claim("k", "w4");
  assert.ok("result" in later && later.result === verified, "kept for its TTL");
  assert.equal(broker.claimsGranted, 1);
  // Only the claimant settles its claim.
  assert.deepEqual(await broker.claim("other", "w1"), { verify: true });
  broker.settle("other", "w2", verified, 1_000);
  const stillPending = broker.claim("other", "w3");
  broker.settle("other", "w1", verified, 1_000);
  assert.deepEqual(await stillPending, { result: verified, keepMs: 1_000 });
});

test("an outage is handed to those who waited for it, and kept for nobody after", async () => {
  const broker = new VerificationBroker();
  const outage: VerificationResult = { status: "unavailable", reason: "registry down", registry: "r.example" };
  await broker.claim("k", "w1");
  const waiter = broker.claim("k", "w2");
  broker.settle("k", "w1", outage, undefined);
  assert.deepEqual(await waiter, { result: outage, keepMs: undefined });
  assert.deepEqual(await broker.claim("k", "w3"), { verify: true }, "asked again: verified again");
});

test("a result is kept no longer than the verifier keeps it, and handed on with what is left of its time", async () => {
  let now = 1_000;
  const broker = new VerificationBroker({ now: () => now });
  await broker.claim("k", "w1");
  broker.settle("k", "w1", verified, 500);
  now += 400;
  assert.deepEqual(await broker.claim("k", "w2"), { result: verified, keepMs: 100 }, "not 500 again: a deleted signature must stop counting in time");
  now += 101;
  assert.deepEqual(await broker.claim("k", "w2"), { verify: true });
});

test("a claimant that gives up or exits hands the claim to the next waiter; the others keep waiting for its result", async () => {
  const broker = new VerificationBroker();
  await broker.claim("k", "w1");
  const second = broker.claim("k", "w2");
  const third = broker.claim("k", "w3");
  broker.giveUp("k", "w1");
  assert.deepEqual(await second, { verify: true });
  broker.claimantGone("w2");
  assert.deepEqual(await third, { verify: true }, "w2 exited: w3 verifies");
  broker.settle("k", "w3", verified, 1_000);
  assert.ok("result" in (await broker.claim("k", "w1")));
});

test("a new policy set: results of the old one are not kept", async () => {
  const broker = new VerificationBroker();
  await broker.claim("k", "w1");
  broker.settle("k", "w1", verified, 60_000);
  broker.clear();
  assert.deepEqual(await broker.claim("k", "w2"), { verify: true });
});

test("two verifiers sharing a broker (two workers): one verification, one registry lookup, for all their admissions", async () => {
  const registry = signatureRegistry(digest, { anyRepository: { sig: [signature] } });
  const broker = new VerificationBroker();
  const worker = (id: string) => new ImageVerifier({ client: registry.client, trustRoots: () => new Map(), shared: broker.local(id), scope: "" });
  const [one, two] = [worker("w1"), worker("w2")];
  // At once from both: the second waits for the first's result.
  const [a, b] = await Promise.all([one.verify(request(), soon()), two.verify(request(), soon())]);
  assert.equal(a.status, "verified");
  assert.deepEqual(b, a);
  assert.equal(one.verifications + two.verifications, 1);
  assert.equal(two.sharedResults + one.sharedResults, 1);
  const lookups = registry.calls.manifests;
  // A third worker later: from the broker, then from its own cache.
  const three = worker("w3");
  await three.verify(request(), soon());
  await three.verify(request(), soon());
  assert.equal(three.verifications, 0);
  assert.equal(three.sharedResults, 1);
  assert.equal(three.hits, 1);
  assert.equal(registry.calls.manifests, lookups, "no registry lookup after the first verification");
  // Another rule is another key: verified on its own.
  await three.verify(request(1), soon());
  assert.equal(three.verifications, 1);
});

test("a verifier keeps a shared result only as long as it is left to be kept", async () => {
  let now = 1_000;
  const registry = signatureRegistry(digest, { anyRepository: { sig: [signature] } });
  const broker = new VerificationBroker({ now: () => now });
  const worker = (id: string) =>
    new ImageVerifier({ client: registry.client, trustRoots: () => new Map(), shared: broker.local(id), scope: "", now: () => now, verifiedTtlMs: 1_000 });
  await worker("w1").verify(request(), soon());
  now += 900;
  const late = worker("w2");
  await late.verify(request(), soon());
  assert.equal(late.sharedResults, 1);
  now += 101;
  // 1 000 ms after the verification: gone from the broker and from w2's cache alike, so verified again.
  await late.verify(request(), soon());
  assert.equal(late.verifications, 1);
});

test("verifiers of different clusters or policy sets never share a result", async () => {
  const registry = signatureRegistry(digest, { anyRepository: { sig: [signature] } });
  const broker = new VerificationBroker();
  const home = new ImageVerifier({ client: registry.client, trustRoots: () => new Map(), shared: broker.local("w1"), scope: "" });
  const other = new ImageVerifier({ client: registry.client, trustRoots: () => new Map(), shared: broker.local("w2"), scope: "cluster-b" });
  await home.verify(request(), soon());
  await other.verify(request(), soon());
  assert.equal(other.verifications, 1, "another cluster's trust roots and keys may differ: verified on its own");
  // A worker on another policy set (a reload not yet everywhere) names its results with that set's number.
  const reloaded = new ImageVerifier({ client: registry.client, trustRoots: () => new Map(), shared: broker.local("w3"), scope: "" });
  reloaded.clear(7);
  await reloaded.verify(request(), soon());
  assert.equal(reloaded.verifications, 1);
  const sameSet = new ImageVerifier({ client: registry.client, trustRoots: () => new Map(), shared: broker.local("w4"), scope: "" });
  sameSet.clear(7);
  await sameSet.verify(request(), soon());
  assert.equal(sameSet.verifications, 0);
  assert.equal(sameSet.sharedResults, 1);
});
