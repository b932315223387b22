// The verifier's edges, with an in-memory signature store standing in for the registry (the registry paths
// themselves are tested against docker-registry in test/e2e): keys read from Kubernetes Secrets, the reasons a
// denial gives, which attestations count for a check, and how long each kind of result is kept.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { test } from "node:test";
import type { CredentialLookup } from "../../../src/credentials/credential.ts";
import { RegistryError } from "../../../src/registry/registry-error.ts";
import { ImageVerifier, type VerificationRequest, type VerificationResult } from "../../../src/verification/image-verifier.ts";
import { attestationTag, cosignAttestationLayer, cosignSignatureLayer, inTotoStatement, simpleSigningPayload } from "../../support/signer/cosign-signatures.ts";
import { generateSigningKey, type SigningKey } from "../../support/signer/keys.ts";
import { allowRule, attestorsWith, signatureRegistry, type SignatureManifests } from "../../support/verification-fixtures.ts";

const digest = `sha256:${createHash("sha256").update("edges").digest("hex")}`;
const otherDigest = `sha256:${createHash("sha256").update("another image").digest("hex")}`;
const SLSA = "https://slsa.dev/provenance/v1";
const SPDX = "https://spdx.dev/Document";
const ATT_TAG = `r.example/app:${attestationTag(digest)}`;
const release = generateSigningKey("ecdsa-p256");
const stranger = generateSigningKey("ecdsa-p256");

/** `.sig` and `.att` manifests by tag, per repository, no referrers; every other manifest is not found. */
const store = (repos: Record<string, SignatureManifests>, opts: { delayMs?: number } = {}) => signatureRegistry(digest, { byRepository: repos }, opts);

const signatureBy = (key: SigningKey, signed = digest) =>
  cosignSignatureLayer({ key, payload: simpleSigningPayload({ dockerReference: "r.example/app", digest: signed }) });
const attestationBy = (key: SigningKey, predicateType = SLSA, subject = digest) =>
  cosignAttestationLayer({
    key,
    statement: inTotoStatement({ subjectName: "r.example/app", digest: subject, predicateType, predicate: { by: predicateType } }),
  });

const keyEntry = (key: SigningKey) => `{staticKey: {name: release, ignoreTlog: true, key: ${JSON.stringify(key.publicKeyPem)}}}`;

const anonymous: CredentialLookup = () => [];
const soon = () => Date.now() + 5_000;
function request(attestors = attestorsWith(keyEntry(release)), extra: Partial<VerificationRequest> = {}): VerificationRequest {
  return { image: { registry: "r.example", repository: "app", digest }, policy: "p", rule: 0, attestors, lookup: anonymous, ...extra };
}
const reasonOf = (r: VerificationResult) => (r.status === "verified" ? "" : r.reason);

test("a key kept in a Kubernetes Secret is read through the server's reader, once per secret key", async () => {
  const s = store({ app: { sig: [await signatureBy(release)] } });
  const reads: string[] = [];
  const v = new ImageVerifier({
    client: s.client,
    trustRoots: () => new Map(),
    secretKeys: async (ref) => {
      reads.push(`${ref.namespace}/${ref.secret}/${ref.key}`);
      return ref.secret === "keys" ? release.publicKeyPem : stranger.publicKeyPem;
    },
  });
  const fromSecret = attestorsWith(`{staticKey: {ignoreTlog: true, keyRef: "k8s://sig/keys"}}`);
  const verified = await v.verify(request(fromSecret), soon());
  assert.equal(verified.status, "verified", reasonOf(verified));
  assert.deepEqual(Object.keys(verified).sort(), ["evidence", "status"], "no attestations were asked for");
  assert.deepEqual(reads, ["sig/keys/cosign.pub"]);
  // A policy reload verifies again, but a key read in the last minute is not read again.
  v.clear();
  assert.equal((await v.verify(request(fromSecret), soon())).status, "verified");
  assert.equal(v.verifications, 2);
  assert.deepEqual(reads, ["sig/keys/cosign.pub"]);
  // Another secret holds another key: it is read on its own, never served from the first secret's entry.
  const otherSecret = attestorsWith(`{staticKey: {ignoreTlog: true, keyRef: "k8s://sig/other"}}`);
  const denied = await v.verify(request(otherSecret, { rule: 1 }), soon());
  assert.equal(denied.status, "denied");
  assert.match(reasonOf(denied), /no signature by this key \(1 signature checked\)$/);
  assert.deepEqual(reads, ["sig/keys/cosign.pub", "sig/other/cosign.pub"]);
});

test("a Secret key without Kubernetes API access, or one the reader cannot give, denies with the reason", async () => {
  const s = store({ app: { sig: [await signatureBy(release)] } });
  const fromSecret = attestorsWith(`{staticKey: {ignoreTlog: true, keyRef: "k8s://sig/keys"}}`);
  const noApi = await new ImageVerifier({ client: s.client, trustRoots: () => new Map() }).verify(request(fromSecret), soon());
  assert.equal(noApi.status, "denied");
  assert.match(reasonOf(noApi), /k8s:\/\/sig\/keys cannot be read: the server has no Kubernetes API access/);

  const failing = new ImageVerifier({
    client: s.client,
    trustRoots: () => new Map(),
    secretKeys: async () => {
      throw new Error('secrets "keys" is forbidden');
    },
  });
  const refused = await failing.verify(request(fromSecret), soon());
  assert.equal(refused.status, "denied");
  assert.match(reasonOf(refused), /key k8s:\/\/sig\/keys\/cosign\.pub: secrets "keys" is forbidden/);
  assert.doesNotMatch(reasonOf(refused), /no signatures found/);
});

test("a Secret key that cannot be read denies the rule, naming the key, whatever its other entries say", async () => {
  const s = store({ app: { sig: [await signatureBy(release)] } });
  const v = new ImageVerifier({
    client: s.client,
    trustRoots: () => new Map(),
    secretKeys: async (ref) => {
      throw new Error(`cannot read secret ${ref.namespace}/${ref.secret}: HTTP 404: secrets "${ref.secret}" not found`);
    },
  });
  // One of two: release's inline key alone would do, but the rule cannot do what it says without its Secret.
  const either = allowRule(`[{count: 1, entries: [${keyEntry(release)}, {staticKey: {ignoreTlog: true, keyRef: "k8s://sig/gone"}}]}]`).attestors!;
  const result = await v.verify(request(either), soon());
  assert.equal(result.status, "denied");
  assert.equal(
    reasonOf(result),
    'key k8s://sig/gone/cosign.pub: cannot read secret sig/gone: HTTP 404: secrets "gone" not found: this rule denies every image it matches until it can be read',
  );
  assert.equal(s.calls.manifests, 0, "nothing is looked up in the registry");
});

test("keys of two Secrets that cannot be read are both named; a Secret read slower than a millisecond is waited for", async () => {
  const s = store({ app: { sig: [await signatureBy(release)] } });
  const gone = new ImageVerifier({
    client: s.client,
    trustRoots: () => new Map(),
    secretKeys: async (ref) => {
      throw new Error(`secrets "${ref.secret}" not found`);
    },
  });
  const both = attestorsWith(`{staticKey: {ignoreTlog: true, keyRef: "k8s://sig/a"}}, {staticKey: {ignoreTlog: true, keyRef: "k8s://sig/b"}}`);
  assert.equal(
    reasonOf(await gone.verify(request(both), soon())),
    'key k8s://sig/a/cosign.pub: secrets "a" not found; key k8s://sig/b/cosign.pub: secrets "b" not found: this rule denies every image it matches until it can be read',
  );
  const slow = new ImageVerifier({
    client: s.client,
    trustRoots: () => new Map(),
    secretKeys: async () => {
      await new Promise((r) => setTimeout(r, 30));
      return release.publicKeyPem;
    },
  });
  const fromSecret = attestorsWith(`{staticKey: {ignoreTlog: true, keyRef: "k8s://sig/keys"}}`);
  assert.equal((await slow.verify(request(fromSecret), soon())).status, "verified");
});

test("peekAll answers a Secret key's cached result only while the key's read is kept, and never reads the Secret", async () => {
  let now = 1_000;
  const reads: number[] = [];
  const v = new ImageVerifier({
    client: store({ app: { sig: [await signatureBy(release)] } }).client,
    trustRoots: () => new Map(),
    now: () => now,
    secretKeys: async () => {
      reads.push(now);
      return release.publicKeyPem;
    },
  });
  const fromSecret = attestorsWith(`{staticKey: {ignoreTlog: true, keyRef: "k8s://sig/keys"}}`);
  assert.equal(v.peekAll([request(fromSecret)]), undefined, "the key was never read");
  assert.deepEqual(reads, [], "peekAll reads nothing");
  const verified = await v.verify(request(fromSecret), soon());
  assert.equal(v.peekAll([request(fromSecret)])?.[0], verified);
  now += 10_001;
  // The key's read is older than its TTL: a deleted Secret must count, so the cached result is not answered here.
  assert.equal(v.peekAll([request(fromSecret)]), undefined);
  assert.deepEqual(reads, [1_000]);
});

test("a deleted Secret's key stops verifying once its read is 10 s old, cached results included; restored, it verifies again", async () => {
  let now = 1_000;
  let secret: string | undefined = release.publicKeyPem;
  const reads: number[] = [];
  const v = new ImageVerifier({
    client: store({ app: { sig: [await signatureBy(release)] } }).client,
    trustRoots: () => new Map(),
    now: () => now,
    secretKeys: async (ref) => {
      reads.push(now);
      if (secret === undefined) throw new Error(`cannot read secret ${ref.namespace}/${ref.secret}: HTTP 404: secrets "${ref.secret}" not found`);
      return secret;
    },
  });
  const fromSecret = attestorsWith(`{staticKey: {ignoreTlog: true, keyRef: "k8s://sig/keys"}}`);
  assert.equal((await v.verify(request(fromSecret), soon())).status, "verified");
  secret = undefined;
  now += 9_000;
  assert.equal((await v.verify(request(fromSecret), soon())).status, "verified", "the key read 9 s ago is still used");
  now += 2_000;
  const gone = await v.verify(request(fromSecret), soon());
  assert.equal(gone.status, "denied", "the verified result of 11 s ago is not used without its key");
  assert.match(reasonOf(gone), /^key k8s:\/\/sig\/keys\/cosign\.pub: cannot read secret sig\/keys: HTTP 404/);
  // Restored: read again at once (a failed read is not kept), and the result verified with this key is used.
  secret = release.publicKeyPem;
  assert.equal((await v.verify(request(fromSecret), soon())).status, "verified");
  // Replaced by another key: once read, the result verified with the old key is not used.
  secret = stranger.publicKeyPem;
  now += 11_000;
  const replaced = await v.verify(request(fromSecret), soon());
  assert.equal(replaced.status, "denied");
  assert.match(reasonOf(replaced), /no signature by this key/);
  assert.deepEqual(reads, [1_000, 12_000, 12_000, 23_000]);
});

test("an attestation's own key never stands in for the rule's key at the same place in its attestors", async () => {
  // The rule needs release's signature; the attestation's own attestors name stranger's key at the same path
  // (attestors[0].entries[0]). Only stranger signed, the image and the statement.
  const s = store({ app: { sig: [await signatureBy(stranger)], att: [await attestationBy(stranger)] } });
  const v = new ImageVerifier({ client: s.client, trustRoots: () => new Map() });
  const attestations = [{ index: 0, predicateType: SLSA, attestors: attestorsWith(keyEntry(stranger)) }];
  const result = await v.verify(request(attestorsWith(keyEntry(release)), { attestations }), soon());
  assert.equal(result.status, "denied", JSON.stringify(result));
  assert.equal(reasonOf(result), "attestors[0] needs its entry: key release: no signature by this key (1 signature checked)");
});

test("signatures by someone else deny, counting what was checked; a signature for another digest gives its own reason", async () => {
  const one = await new ImageVerifier({ client: store({ app: { sig: [await signatureBy(stranger)] } }).client, trustRoots: () => new Map() }).verify(
    request(),
    soon(),
  );
  assert.equal(one.status, "denied");
  assert.equal(reasonOf(one), "attestors[0] needs its entry: key release: no signature by this key (1 signature checked)");

  const two = await new ImageVerifier({
    client: store({ app: { sig: [await signatureBy(stranger), await signatureBy(stranger)] } }).client,
    trustRoots: () => new Map(),
  }).verify(request(), soon());
  assert.equal(reasonOf(two), "attestors[0] needs its entry: key release: no signature by this key (2 signatures checked)");

  // The right key over another image's digest: that, not "someone else's signature", is the reason.
  const replayed = await new ImageVerifier({
    client: store({ app: { sig: [await signatureBy(stranger), await signatureBy(release, otherDigest)] } }).client,
    trustRoots: () => new Map(),
  }).verify(request(), soon());
  assert.equal(replayed.status, "denied");
  assert.doesNotMatch(reasonOf(replayed), /no signature by this key/);
  assert.match(reasonOf(replayed), new RegExp(otherDigest.slice(7, 20)));
});

test("maxArtifactsPerImage caps the signatures read: the release key's signature past the cap is not seen", async () => {
  const s = store({ app: { sig: [await signatureBy(stranger), await signatureBy(release)] } });
  const capped = await new ImageVerifier({ client: s.client, trustRoots: () => new Map(), maxArtifactsPerImage: 1 }).verify(request(), soon());
  assert.equal(capped.status, "denied");
  assert.match(reasonOf(capped), /no signature by this key \(1 signature checked\) \(unreadable: .*\.sig: 2 signatures; only the first 1 are read\)$/);
  const all = await new ImageVerifier({ client: s.client, trustRoots: () => new Map() }).verify(request(), soon());
  assert.equal(all.status, "verified", reasonOf(all));
});

test("the signature repository is part of the cache key: signatures elsewhere are looked up again", async () => {
  const s = store({ app: {}, "sigs/app": { sig: [await signatureBy(release)] } });
  const v = new ImageVerifier({ client: s.client, trustRoots: () => new Map() });
  const here = await v.verify(request(), soon());
  assert.equal(here.status, "denied");
  const elsewhere = await v.verify(request(undefined, { signatureRepository: { registry: "r.example", repository: "sigs/app" } }), soon());
  assert.equal(elsewhere.status, "verified", reasonOf(elsewhere));
  assert.equal(v.verifications, 2);
});

test("cache keys keep their parts apart: policy p rule 10 is not policy p1 rule 0", async () => {
  const v = new ImageVerifier({ client: store({ app: { sig: [await signatureBy(release)] } }).client, trustRoots: () => new Map() });
  await v.verify(request(undefined, { policy: "p", rule: 10 }), soon());
  await v.verify(request(undefined, { policy: "p1", rule: 0 }), soon());
  assert.equal(v.verifications, 2);
  assert.equal(v.hits, 0);
});

test("a verified result is kept for the verified TTL (5 minutes by default), a denial for 10 seconds", async () => {
  let now = 1_000;
  const signed = store({ app: { sig: [await signatureBy(release)] } });
  const v = new ImageVerifier({ client: signed.client, trustRoots: () => new Map(), now: () => now });
  assert.equal((await v.verify(request(), soon())).status, "verified");
  now += 299_000;
  assert.equal((await v.verify(request(), soon())).status, "verified");
  assert.equal(v.verifications, 1);
  now += 2_000;
  await v.verify(request(), soon());
  assert.equal(v.verifications, 2);

  now = 1_000;
  const unsigned = store({ app: {} });
  const w = new ImageVerifier({ client: unsigned.client, trustRoots: () => new Map(), now: () => now });
  assert.equal((await w.verify(request(), soon())).status, "denied");
  now += 9_000;
  await w.verify(request(), soon());
  assert.equal(w.verifications, 1);
  now += 2_000;
  await w.verify(request(), soon());
  assert.equal(w.verifications, 2);
});

test("maxEntries bounds the cache; a result that finishes after a reload is not kept", async () => {
  const signed = store({ app: { sig: [await signatureBy(release)] } });
  const v = new ImageVerifier({ client: signed.client, trustRoots: () => new Map(), maxEntries: 1 });
  await v.verify(request(), soon());
  await v.verify(request(undefined, { rule: 1 }), soon()); // evicts rule 0
  await v.verify(request(), soon());
  assert.equal(v.verifications, 3);

  const slow = store({ app: { sig: [await signatureBy(release)] } }, { delayMs: 50 });
  const w = new ImageVerifier({ client: slow.client, trustRoots: () => new Map() });
  const pending = w.verify(request(), soon());
  w.clear(); // the policy changed while the old one was being checked
  assert.equal((await pending).status, "verified");
  await w.verify(request(), soon());
  await w.verify(request(), soon());
  assert.equal(w.verifications, 2);
  assert.equal(w.hits, 1);
});

test("each verification that ran is reported with its request, result and duration in seconds", async () => {
  const seen: Array<{ request: VerificationRequest; result: VerificationResult; seconds: number }> = [];
  const signed = store({ app: { sig: [await signatureBy(release)] } });
  const v = new ImageVerifier({
    client: signed.client,
    trustRoots: () => new Map(),
    onVerification: (r, result, seconds) => seen.push({ request: r, result, seconds }),
  });
  const req = request();
  const result = await v.verify(req, soon());
  await v.verify(req, soon()); // a cache hit: not a verification
  assert.equal(seen.length, 1);
  assert.equal(seen[0]!.request, req);
  assert.equal(seen[0]!.result, result);
  assert.ok(seen[0]!.seconds >= 0);
});

test("more than three unreadable signatures are summarised: the first three, then an ellipsis", async () => {
  const signatures = await Promise.all([1, 2, 3, 4, 5].map(() => signatureBy(release)));
  const client = {
    ...store({ app: { sig: signatures } }).client,
    async getBlob(): Promise<never> {
      throw new RegistryError("unauthorized", "blob unauthorized");
    },
  };
  const result = await new ImageVerifier({ client, trustRoots: () => new Map() }).verify(request(), soon());
  assert.equal(result.status, "denied");
  const unreadable = /\(unreadable: (.*)\)$/.exec(reasonOf(result));
  assert.ok(unreadable, reasonOf(result));
  assert.deepEqual(
    unreadable[1]!.split("; ").map((p) => p.replace(/^.* layer (\d): /, "layer $1: ")),
    ["layer 0: blob unauthorized", "layer 1: blob unauthorized", "layer 2: blob unauthorized", "…"],
  );
});

test("exactly three unreadable signatures are all named, without an ellipsis", async () => {
  const signatures = await Promise.all([1, 2, 3].map(() => signatureBy(release)));
  const client = {
    ...store({ app: { sig: signatures } }).client,
    async getBlob(): Promise<never> {
      throw new RegistryError("unauthorized", "blob unauthorized");
    },
  };
  const result = await new ImageVerifier({ client, trustRoots: () => new Map() }).verify(request(), soon());
  const unreadable = /\(unreadable: (.*)\)$/.exec(reasonOf(result));
  assert.ok(unreadable, reasonOf(result));
  assert.equal(unreadable[1]!.split("; ").length, 3);
  assert.doesNotMatch(unreadable[1]!, /…/);
});

test("a registry that never answers: unavailable at the deadline, naming the signature repository's registry", async () => {
  const client = {
    ...store({}).client,
    getManifest: () => new Promise<never>(() => {}),
    listReferrers: () => new Promise<never>(() => {}),
  };
  const v = new ImageVerifier({ client, trustRoots: () => new Map() });
  const result = await v.verify(request(undefined, { signatureRepository: { registry: "sigs.example", repository: "app" } }), Date.now() + 100);
  assert.equal(result.status, "unavailable");
  assert.ok(result.status === "unavailable");
  assert.equal(result.registry, "sigs.example");
  assert.match(result.reason, /^signature verification did not finish: /);
});

test("attestations: only statements of the check's type, signed by its attestors, count", async () => {
  const s = store({
    app: {
      att: [await attestationBy(stranger), await attestationBy(release, SPDX), await attestationBy(release)],
    },
  });
  const v = new ImageVerifier({ client: s.client, trustRoots: () => new Map() });
  const req = request([], { attestations: [{ index: 2, predicateType: SLSA, attestors: attestorsWith(keyEntry(release)) }] });
  const result = await v.verify(req, soon());
  assert.equal(result.status, "verified", reasonOf(result));
  assert.ok(result.status === "verified");
  assert.deepEqual(result.evidence, []);
  const [check] = result.attestations!;
  assert.equal(check!.index, 2);
  assert.equal(check!.predicateType, SLSA);
  assert.equal(check!.statements.length, 1);
  assert.equal((check!.statements[0]!.statement as { predicateType: string }).predicateType, SLSA);
  assert.deepEqual((check!.statements[0]!.statement as { predicate: unknown }).predicate, { by: SLSA });
  assert.equal(check!.statements[0]!.signers.length, 1);
  // The stranger's statement is not evidence; a statement that passes leaves no failure note for it beside it.
  assert.equal(check!.failures.length, 1);
  assert.equal(check!.failures[0]!, `${ATT_TAG} layer 0: attestors[0] needs its entry: key release: the signature does not verify with this key`);
});

test("attestations: the signed statement's type decides, not the layer's unsigned predicateType annotation", async () => {
  const spdx = await attestationBy(release, SPDX);
  const claimsSlsa = { ...spdx, annotations: { ...spdx.annotations, predicateType: SLSA } };
  const v = new ImageVerifier({ client: store({ app: { att: [claimsSlsa] } }).client, trustRoots: () => new Map() });
  const result = await v.verify(request([], { attestations: [{ index: 0, predicateType: SLSA, attestors: attestorsWith(keyEntry(release)) }] }), soon());
  assert.ok(result.status === "verified", reasonOf(result));
  assert.deepEqual(result.attestations![0]!.statements, []);
  assert.deepEqual(result.attestations![0]!.failures, [`no attestation of type ${SLSA} found`]);
});

test("attestations: none signed by the attestors, at most three reasons; none of the type at all, that is said", async () => {
  const strangers = await Promise.all([1, 2, 3, 4].map(() => attestationBy(stranger)));
  const v = new ImageVerifier({ client: store({ app: { att: strangers } }).client, trustRoots: () => new Map() });
  const result = await v.verify(request([], { attestations: [{ index: 0, predicateType: SLSA, attestors: attestorsWith(keyEntry(release)) }] }), soon());
  assert.ok(result.status === "verified", reasonOf(result)); // the signatures are judged; the statements by the core
  const [check] = result.attestations!;
  assert.deepEqual(check!.statements, []);
  assert.equal(check!.failures.length, 3);
  assert.ok(
    check!.failures.every((f) => / layer \d: attestors\[0\] needs its entry: key release: /.test(f)),
    check!.failures.join("\n"),
  );

  const w = new ImageVerifier({ client: store({ app: { att: [await attestationBy(release, SPDX)] } }).client, trustRoots: () => new Map() });
  const missing = await w.verify(request([], { attestations: [{ index: 0, predicateType: SLSA, attestors: attestorsWith(keyEntry(release)) }] }), soon());
  assert.ok(missing.status === "verified");
  assert.deepEqual(missing.attestations![0]!.statements, []);
  assert.deepEqual(missing.attestations![0]!.failures, [`no attestation of type ${SLSA} found`]);
});

test("attestations: a Secret key that cannot be read denies the rule with the reason", async () => {
  const v = new ImageVerifier({ client: store({ app: { att: [await attestationBy(release)] } }).client, trustRoots: () => new Map() });
  const fromSecret = attestorsWith(`{staticKey: {ignoreTlog: true, keyRef: "k8s://sig/keys"}}`);
  const result = await v.verify(request([], { attestations: [{ index: 0, predicateType: SLSA, attestors: fromSecret }] }), soon());
  assert.equal(result.status, "denied");
  assert.match(reasonOf(result), /^k8s:\/\/sig\/keys cannot be read: the server has no Kubernetes API access: this rule denies/);
});

test("attestations: a spent download budget with no statement read denies with code download-limit", async () => {
  const s = store({ app: { att: [await attestationBy(release)] } });
  const v = new ImageVerifier({ client: s.client, trustRoots: () => new Map(), maxBytesPerImage: 64 });
  const result = await v.verify(request([], { attestations: [{ index: 0, predicateType: SLSA, attestors: attestorsWith(keyEntry(release)) }] }), soon());
  assert.equal(result.status, "denied");
  assert.ok(result.status === "denied");
  assert.equal(result.code, "download-limit");
  assert.match(result.reason, /^not every attestation could be read: /);
});
