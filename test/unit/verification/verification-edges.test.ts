// More edges of signature verification, through the verifier with a registry client in memory (the registry
// paths themselves are tested against docker-registry in test/e2e): which results are kept and for how long,
// what an outage says, attestation checks when a download limit was hit, statements that cannot be read,
// keyless signers' evidence and reasons, and layer descriptors and bundles written in unusual but valid ways.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { before, test } from "node:test";
import type { TrustRoot } from "../../../src/core/trust-root/trust-root-kind.ts";
import type { CredentialLookup } from "../../../src/credentials/credential.ts";
import { RegistryError } from "../../../src/registry/registry-error.ts";
import { ImageVerifier, type VerificationRequest, type VerificationResult } from "../../../src/verification/image-verifier.ts";
import { discoverSignatures } from "../../../src/verification/signature-discovery.ts";
import { cosignLayerToItem } from "../../../src/verification/signed-item.ts";
import {
  cosignAttestationLayer,
  cosignSignatureLayer,
  inTotoStatement,
  MEDIA_TYPES,
  signatureTag,
  signDsseEnvelope,
  simpleSigningPayload,
  type SignatureLayer,
} from "../../support/signer/cosign-signatures.ts";
import { generateSigningKey, type SigningKey } from "../../support/signer/keys.ts";
import { createMockSigstore, type MockSigstore } from "../../support/signer/mock-sigstore.ts";
import { attestorsWith, mockTrustRoot, signatureRegistry, type SignatureManifests } from "../../support/verification-fixtures.ts";

const digest = `sha256:${createHash("sha256").update("verification edges").digest("hex")}`;
const SLSA = "https://slsa.dev/provenance/v1";
const SPDX = "https://spdx.dev/Document";
const ISSUER = "https://token.actions.githubusercontent.com";
const APP = "https://github.com/acme/app/.github/workflows/release.yml@refs/tags/v1";
const release = generateSigningKey("ecdsa-p256");

let sigstore: MockSigstore;
let mockRoot: TrustRoot;
before(async () => {
  sigstore = await createMockSigstore({ name: "mock" });
  mockRoot = mockTrustRoot(sigstore, "mock");
});

/** The image's `.sig` and `.att` manifests (each body may be rewritten), no referrers; other manifests are not found. */
const registry = (layers: SignatureManifests, rewrite?: (tag: string, body: Buffer) => Buffer) =>
  signatureRegistry(digest, { anyRepository: layers }, rewrite ? { rewrite } : {}).client;
const keyEntry = (key: SigningKey) => `{staticKey: {name: release, ignoreTlog: true, key: ${JSON.stringify(key.publicKeyPem)}}}`;
const keylessEntry = (subject: string) => `{keyless: {subject: "${subject}", issuer: "${ISSUER}", trustRoot: mock}}`;

const anonymous: CredentialLookup = () => [];
const soon = () => Date.now() + 30_000;
function request(attestors = attestorsWith(keyEntry(release)), extra: Partial<VerificationRequest> = {}): VerificationRequest {
  return { image: { registry: "r.example", repository: "app", digest }, policy: "p", rule: 0, attestors, lookup: anonymous, ...extra };
}
const reasonOf = (r: VerificationResult) => (r.status === "verified" ? "" : r.reason);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const signatureBy = (key: SigningKey) => cosignSignatureLayer({ key, payload: simpleSigningPayload({ dockerReference: "r.example/app", digest }) });
const attestationBy = (key: SigningKey, predicateType = SLSA) =>
  cosignAttestationLayer({ key, statement: inTotoStatement({ subjectName: "r.example/app", digest, predicateType, predicate: { by: predicateType } }) });
async function keylessSignature(subject: string): Promise<SignatureLayer> {
  const cert = await sigstore.issueKeylessCertificate({ subjectAltName: subject, issuer: ISSUER });
  return cosignSignatureLayer({ payload: simpleSigningPayload({ dockerReference: "r.example/app", digest }), keyless: cert, rekor: sigstore });
}

test("without a clock of its own, the verifier's cache runs on the process clock: a result past its TTL is verified again", async () => {
  const v = new ImageVerifier({ client: registry({ sig: [await signatureBy(release)] }), trustRoots: () => new Map(), verifiedTtlMs: 20 });
  assert.equal((await v.verify(request(), soon())).status, "verified");
  await sleep(80);
  assert.equal((await v.verify(request(), soon())).status, "verified");
  assert.equal(v.verifications, 2);
  assert.equal(v.hits, 0);
});

test("the duration reported for a verification is in seconds, within the time the call took", async () => {
  const durations: number[] = [];
  const v = new ImageVerifier({
    client: registry({ sig: [await signatureBy(release)] }),
    trustRoots: () => new Map(),
    onVerification: (_r, _result, seconds) => durations.push(seconds),
  });
  const started = performance.now();
  await v.verify(request(), soon());
  const elapsedSeconds = (performance.now() - started) / 1000;
  assert.equal(durations.length, 1);
  assert.ok(durations[0]! >= 0 && durations[0]! <= elapsedSeconds, `${durations[0]} s reported, the call took ${elapsedSeconds} s`);
});

test("a registry answering 5xx is an outage: unavailable with the registry's message, and not kept, so the next admission asks again", async () => {
  let down = true;
  const signed = registry({ sig: [await signatureBy(release)] });
  const client = {
    ...signed,
    async getManifest(ref: { tag?: string }) {
      if (down) throw new RegistryError("unavailable", "503 Service Unavailable");
      return signed.getManifest(ref);
    },
  };
  const v = new ImageVerifier({ client, trustRoots: () => new Map() });
  const outage = await v.verify(request(), soon());
  assert.equal(outage.status, "unavailable");
  assert.ok(outage.status === "unavailable");
  assert.equal(outage.registry, "r.example");
  assert.match(outage.reason, /^the registry did not answer every signature lookup \(503 Service Unavailable\); attestors\[0\] needs its entry: /);
  down = false;
  assert.equal((await v.verify(request(), soon())).status, "verified");
  assert.equal(v.verifications, 2);
});

test("a result that finishes after a reload does not push the reloaded policy's results out of a full cache", async () => {
  const signed = registry({ sig: [await signatureBy(release)] });
  let first = true;
  const client = {
    ...signed,
    async getManifest(ref: { tag?: string }) {
      if (first) {
        first = false;
        await sleep(150); // the verification started before the reload finishes last
      }
      return signed.getManifest(ref);
    },
  };
  const v = new ImageVerifier({ client, trustRoots: () => new Map(), maxEntries: 1 });
  const before = v.verify(request(), soon());
  v.clear();
  assert.equal((await v.verify(request(), soon())).status, "verified");
  assert.equal((await before).status, "verified");
  assert.equal((await v.verify(request(), soon())).status, "verified");
  assert.equal(v.verifications, 2);
  assert.equal(v.hits, 1);
});

/** The `.sig` manifest with one more layer that declares more bytes than the per-image download budget allows. */
const withOversizedLayer = (tag: string, body: Buffer) => {
  if (tag !== signatureTag(digest)) return body;
  const doc = JSON.parse(body.toString("utf8")) as { layers: unknown[] };
  doc.layers.push({ mediaType: MEDIA_TYPES.simpleSigning, digest: `sha256:${"0".repeat(64)}`, size: 100_000, annotations: {} });
  return Buffer.from(JSON.stringify(doc));
};

test("a download limit hit elsewhere does not deny attestation checks that each found a statement", async () => {
  const client = registry({ sig: [await signatureBy(release)], att: [await attestationBy(release)] }, withOversizedLayer);
  const v = new ImageVerifier({ client, trustRoots: () => new Map(), maxBytesPerImage: 50_000 });
  const result = await v.verify(request(undefined, { attestations: [{ index: 0, predicateType: SLSA, attestors: attestorsWith(keyEntry(release)) }] }), soon());
  assert.equal(result.status, "verified", reasonOf(result));
  assert.ok(result.status === "verified");
  assert.equal(result.attestations![0]!.statements.length, 1);
});

test("a download limit hit denies when any one attestation check found no statement, even if another found one", async () => {
  const client = registry({ sig: [await signatureBy(release)], att: [await attestationBy(release)] }, withOversizedLayer);
  const v = new ImageVerifier({ client, trustRoots: () => new Map(), maxBytesPerImage: 50_000 });
  const result = await v.verify(
    request(undefined, {
      attestations: [
        { index: 0, predicateType: SLSA, attestors: attestorsWith(keyEntry(release)) },
        { index: 1, predicateType: SPDX, attestors: attestorsWith(keyEntry(release)) },
      ],
    }),
    soon(),
  );
  assert.equal(result.status, "denied");
  assert.ok(result.status === "denied");
  assert.equal(result.code, "download-limit");
  assert.match(result.reason, /^not every attestation could be read: .*declares 100000 bytes/);
});

test("an attestation whose statement cannot be read is passed over; the others are judged", async () => {
  const notJson = signDsseEnvelope(release, Buffer.from("not a statement"));
  const unreadable: SignatureLayer = {
    blob: Buffer.from(JSON.stringify(notJson.envelope)),
    mediaType: MEDIA_TYPES.dsseEnvelope,
    annotations: { predicateType: SLSA },
  };
  const client = registry({ att: [unreadable, await attestationBy(release)] });
  const result = await new ImageVerifier({ client, trustRoots: () => new Map() }).verify(
    request([], { attestations: [{ index: 0, predicateType: SLSA, attestors: attestorsWith(keyEntry(release)) }] }),
    soon(),
  );
  assert.equal(result.status, "verified", reasonOf(result));
  assert.ok(result.status === "verified");
  assert.equal(result.attestations![0]!.statements.length, 1);
  assert.deepEqual(result.attestations![0]!.failures, []);
});

test("an attestation check whose statement verifies lists no failure", async () => {
  const client = registry({ att: [await attestationBy(release)] });
  const result = await new ImageVerifier({ client, trustRoots: () => new Map() }).verify(
    request([], { attestations: [{ index: 0, predicateType: SLSA, attestors: attestorsWith(keyEntry(release)) }] }),
    soon(),
  );
  assert.ok(result.status === "verified", reasonOf(result));
  assert.equal(result.attestations![0]!.statements.length, 1);
  assert.deepEqual(result.attestations![0]!.failures, []);
});

test("keyless: two signatures by one identity are one signer, evidenced by the first signature found", async () => {
  const first = await keylessSignature(APP);
  const second = await keylessSignature(APP);
  const v = new ImageVerifier({ client: registry({ sig: [first, second] }), trustRoots: () => new Map([["mock", mockRoot]]) });
  const result = await v.verify(request(attestorsWith(keylessEntry("https://github.com/acme/app/*"))), soon());
  assert.ok(result.status === "verified", reasonOf(result));
  assert.equal(result.evidence.length, 1);
  assert.equal(result.evidence[0]!.signer, `subject ${APP} issuer ${ISSUER}`);
  assert.equal(result.evidence[0]!.tlogIndex, String(first.rekorEntry!.logIndex));
  assert.notEqual(first.rekorEntry!.logIndex, second.rekorEntry!.logIndex);
});

test("keyless: only signatures made with a key deny as 'no signature by this identity', counting them", async () => {
  const v = new ImageVerifier({ client: registry({ sig: [await signatureBy(release)] }), trustRoots: () => new Map([["mock", mockRoot]]) });
  const result = await v.verify(request(attestorsWith(keylessEntry("https://github.com/acme/app/*"))), soon());
  assert.equal(result.status, "denied");
  assert.match(reasonOf(result), /: no signature by this identity \(1 signature checked\)$/);
});

test("a layer whose digest is not a string is skipped, even one that would read as a digest; null annotations read as none", async () => {
  const sha = (s: string) => `sha256:${createHash("sha256").update(s).digest("hex")}`;
  const layer = { mediaType: MEDIA_TYPES.simpleSigning, size: 10, annotations: { "dev.cosignproject.cosign/signature": "AAAA" } };
  const body = Buffer.from(
    JSON.stringify({
      layers: [
        { ...layer, digest: [sha("array")] },
        { ...layer, digest: sha("null annotations"), annotations: null },
      ],
    }),
  );
  const fetched: string[] = [];
  const client = {
    async getManifest() {
      return { digest: sha("m"), mediaType: MEDIA_TYPES.manifest, size: body.length, body, endpoint: "r.example", credentialSource: "anonymous" };
    },
    async getBlob(_repo: unknown, d: string) {
      fetched.push(String(d));
      return { digest: d, body: Buffer.from("{}"), endpoint: "r.example", credentialSource: "anonymous" };
    },
    async listReferrers() {
      return { descriptors: [], source: "none" as const, endpoint: "r.example", credentialSource: "anonymous" };
    },
  };
  const at = { registry: "r.example", repository: "app", digest };
  const found = await discoverSignatures(client, at, at, {});
  assert.deepEqual(fetched, [sha("null annotations")]);
  assert.deepEqual(found.problems, [`r.example/app:${digest.replace(":", "-")}.sig layer 0: no dev.cosignproject.cosign/signature annotation`]);
});

test("a referrer announced as a message signature gets the image manifest, however its bundle spells the field names", async () => {
  const sha = (s: string) => `sha256:${createHash("sha256").update(s).digest("hex")}`;
  const imageManifest = Buffer.from('{"schemaVersion":2,"the":"image"}');
  const BUNDLE = "application/vnd.dev.sigstore.bundle.v0.3+json";
  // JSON lets a key be written with escapes: this bundle has a messageSignature that no plain text search finds.
  const bundle = Buffer.from(
    `{"mediaType":"${BUNDLE}","verificationMaterial":{"publicKey":{"hint":"k"},"tlogEntries":[],"timestampVerificationData":{"rfc3161Timestamps":[]}},` +
      `"message\\u0053ignature":{"messageDigest":{"algorithm":"SHA2_256","digest":"${createHash("sha256").update(imageManifest).digest("base64")}"},"signature":"AAAA"}}`,
  );
  const artifact = Buffer.from(JSON.stringify({ layers: [{ mediaType: BUNDLE, digest: sha("bundle"), size: bundle.length }] }));
  const referrer = sha("referrer");
  const reply = (b: Buffer) => ({
    digest: sha("x"),
    mediaType: MEDIA_TYPES.manifest,
    size: b.length,
    body: b,
    endpoint: "r.example",
    credentialSource: "anonymous",
  });
  const client = {
    async getManifest(ref: { digest?: string }) {
      if (ref.digest === digest) return reply(imageManifest);
      if (ref.digest === referrer) return reply(artifact);
      throw new RegistryError("not-found", "manifest unknown");
    },
    async getBlob(_repo: unknown, d: string) {
      return { digest: d, body: bundle, endpoint: "r.example", credentialSource: "anonymous" };
    },
    async listReferrers() {
      return {
        descriptors: [
          {
            mediaType: MEDIA_TYPES.manifest,
            digest: referrer,
            size: artifact.length,
            artifactType: BUNDLE,
            annotations: { "dev.sigstore.bundle.content": "message-signature" },
          },
        ],
        source: "api" as const,
        endpoint: "r.example",
        credentialSource: "anonymous",
      };
    },
  };
  const at = { registry: "r.example", repository: "app", digest };
  const found = await discoverSignatures(client, at, at, {});
  assert.deepEqual(found.problems, []);
  assert.equal(found.items.length, 1);
  assert.ok(found.items[0]!.artifact?.equals(imageManifest));
});

test("a cosign signature annotation broken over lines is read as the bytes it spells", () => {
  const signature = Buffer.from("a signature").toString("base64");
  const wrapped = `${signature.slice(0, 4)}\n${signature.slice(4, 8)} \r\n${signature.slice(8)}`;
  const item = cosignLayerToItem(Buffer.from("{}"), { "dev.cosignproject.cosign/signature": wrapped }, "layer 0");
  assert.ok(item.bundle.content.$case === "messageSignature");
  assert.deepEqual(item.bundle.content.messageSignature.signature, Buffer.from("a signature"));
});
