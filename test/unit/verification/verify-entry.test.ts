// One signature against one attestor entry (verify-entry.ts), case by case: what binds a signature to the image
// (cosign payloads, referrer bundles, in-toto statements), the entry's thresholds and trust root, the hash a key
// type implies, a message signature given only its digest, the certificate's identity and extensions, and the
// reasons given. Each case is one a mutation of verify-entry.ts turned from refused into accepted or vice versa.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { before, describe, test } from "node:test";
import type { Bundle } from "@sigstore/bundle";
import { HashAlgorithm } from "@sigstore/protobuf-specs";
import type { SigstoreTrust } from "../../../src/core/trust-root/trust-root-kind.ts";
import { bundleToItem, cosignLayerToItem, type SignedItem } from "../../../src/verification/signed-item.ts";
import { attestationBinding, imageBinding, inTotoStatement, publicKeyFromPem, verifyItem } from "../../../src/verification/verify-entry.ts";
import { cosignSignatureLayer, simpleSigningPayload } from "../../support/signer/cosign-signatures.ts";
import { generateSigningKey, signBytes, type KeyAlgorithm, type SignatureHash, type SigningKey } from "../../support/signer/keys.ts";
import { createMockSigstore, type MockSigstore } from "../../support/signer/mock-sigstore.ts";
import { imageSignatureBundle, messageSignatureBundle } from "../../support/signer/sigstore-bundles.ts";
import {
  leafAttestorsWith,
  mockTrustRoot,
  KEYLESS_ISSUER as ISSUER,
  KEYLESS_WORKFLOW as WORKFLOW,
  SIGNED_IMAGE_NAME as NAME,
  SIGNED_MANIFEST as MANIFEST,
  SIGNED_MANIFEST_DIGEST as DIGEST,
  SIGNED_MANIFEST_HEX as HEX,
} from "../../support/verification-fixtures.ts";

const OTHER = `sha256:${createHash("sha256").update("other").digest("hex")}`;
const SIGN_PREDICATE = "https://sigstore.dev/cosign/sign/v1";

const keyEntry = (key: SigningKey, extra = ", ignoreTlog: true") =>
  leafAttestorsWith(`{staticKey: {name: k, key: ${JSON.stringify(key.publicKeyPem)}${extra}}}`)[0]!;
const keyless = (extra = "") => leafAttestorsWith(`{keyless: {subject: "https://github.com/acme/app/*", issuer: "${ISSUER}", trustRoot: mock${extra}}}`)[0]!;
const refused = (outcome: ReturnType<typeof verifyItem>) => (outcome.ok ? `accepted (${outcome.evidence.signer})` : outcome.reason);

// ---------------------------------------------------------------------------------------------
// What the signed content says it signs (no cryptography: the binding is checked only after it).

function messageItem(format: SignedItem["format"], artifact: Buffer | undefined, messageDigest?: { algorithm: HashAlgorithm; digest: Buffer }): SignedItem {
  const bundle = {
    mediaType: "application/vnd.dev.sigstore.bundle.v0.3+json",
    verificationMaterial: { content: { $case: "publicKey", publicKey: { hint: "" } }, tlogEntries: [], timestampVerificationData: { rfc3161Timestamps: [] } },
    content: { $case: "messageSignature", messageSignature: { ...(messageDigest ? { messageDigest } : {}), signature: Buffer.alloc(0) } },
  } as unknown as Bundle;
  return { format, location: "l", bundle, ...(artifact ? { artifact } : {}) };
}

function dsseItem(payload: string, payloadType = "application/vnd.in-toto+json"): SignedItem {
  const bundle = {
    mediaType: "application/vnd.dev.sigstore.bundle.v0.3+json",
    verificationMaterial: { content: { $case: "publicKey", publicKey: { hint: "" } }, tlogEntries: [], timestampVerificationData: { rfc3161Timestamps: [] } },
    content: { $case: "dsseEnvelope", dsseEnvelope: { payload: Buffer.from(payload), payloadType, signatures: [] } },
  } as unknown as Bundle;
  return { format: "sigstore-bundle", location: "l", bundle };
}

const statement = (subject: unknown, predicateType = SIGN_PREDICATE, type = "https://in-toto.io/Statement/v1") =>
  JSON.stringify({ _type: type, subject, predicateType, predicate: {} });

describe("binding: cosign simple-signing payloads", () => {
  const bind = (payload: string) => imageBinding(DIGEST)(messageItem("cosign-signature", Buffer.from(payload)));

  test("a payload that is not JSON, or has no critical section, signs nothing", () => {
    assert.equal(bind("{not json"), "the signed payload is not JSON");
    assert.equal(bind("{}"), 'the signed payload is not a "cosign container image signature"');
    // JSON that is not an object (null, a number, a list) is refused with a reason, never a crash.
    for (const notAnObject of ["null", "7", "[]", '"text"']) assert.equal(bind(notAnObject), "the signed payload is not a JSON object");
    assert.equal(bind(JSON.stringify({ critical: { type: "cosign container image signature" } })), `signs no digest, not ${DIGEST}`);
    assert.equal(bind(JSON.stringify({ critical: { type: "cosign container image signature", image: {} } })), `signs no digest, not ${DIGEST}`);
    assert.equal(
      bind(JSON.stringify({ critical: { type: "cosign container image signature", image: { "docker-manifest-digest": 7 } } })),
      `signs no digest, not ${DIGEST}`,
    );
  });

  test("the type is compared without case, and the digest exactly", () => {
    const payload = (type: string, digest: string) => JSON.stringify({ critical: { type, image: { "docker-manifest-digest": digest } } });
    assert.equal(bind(payload("Cosign Container Image Signature", DIGEST)), undefined);
    assert.equal(bind(payload("cosign container image signature", DIGEST.toUpperCase())), `signs ${DIGEST.toUpperCase()}, not ${DIGEST}`);
  });

  test("a message signature without the bytes it signs binds to nothing", () => {
    assert.equal(imageBinding(DIGEST)(messageItem("cosign-signature", undefined)), "a message signature without the bytes it signs");
    const digest = { algorithm: HashAlgorithm.SHA2_256, digest: Buffer.from(HEX, "hex") };
    assert.equal(imageBinding(DIGEST)(messageItem("sigstore-bundle", undefined, digest)), "a message signature without the bytes it signs");
  });
});

describe("binding: referrer message-signature bundles sign the manifest", () => {
  const sha256 = { algorithm: HashAlgorithm.SHA2_256, digest: Buffer.from(HEX, "hex") };

  test("the manifest's digest and the bundle's messageDigest must both be the admitted digest", () => {
    assert.equal(imageBinding(DIGEST)(messageItem("sigstore-bundle", MANIFEST, sha256)), undefined);
    const otherBytes = Buffer.from("another manifest");
    assert.equal(imageBinding(DIGEST)(messageItem("sigstore-bundle", otherBytes, sha256)), `the bundle's message digest is not ${DIGEST}`);
    const wrongMessageDigest = { algorithm: HashAlgorithm.SHA2_256, digest: createHash("sha256").update("x").digest() };
    assert.equal(imageBinding(DIGEST)(messageItem("sigstore-bundle", MANIFEST, wrongMessageDigest)), `the bundle's message digest is not ${DIGEST}`);
    assert.equal(imageBinding(DIGEST)(messageItem("sigstore-bundle", MANIFEST)), `the bundle's message digest is not ${DIGEST}`);
  });

  test("a sha512 image digest is computed with sha512", () => {
    const hex512 = createHash("sha512").update(MANIFEST).digest("hex");
    const item = messageItem("sigstore-bundle", MANIFEST, { algorithm: HashAlgorithm.SHA2_512, digest: Buffer.from(hex512, "hex") });
    assert.equal(imageBinding(`sha512:${hex512}`)(item), undefined);
  });
});

describe("binding: in-toto statements", () => {
  test("the subject list must hold the digest: any one entry of it, skipping entries without digests", () => {
    const two = statement([
      { name: "x", digest: { sha256: "00" } },
      { name: NAME, digest: { sha256: HEX } },
    ]);
    assert.equal(imageBinding(DIGEST)(dsseItem(two)), undefined);
    assert.equal(imageBinding(DIGEST)(dsseItem(statement([null, { name: "x" }, { digest: { sha256: HEX } }]))), undefined);
    assert.equal(imageBinding(DIGEST)(dsseItem(statement([{ digest: { sha512: HEX } }]))), `the statement's subject is not ${DIGEST}`);
    assert.equal(imageBinding(DIGEST)(dsseItem(statement({ digest: { sha256: HEX } }))), `the statement's subject is not ${DIGEST}`);
  });

  test("both in-toto statement versions are read; other types, payload types and non-objects are not", () => {
    assert.equal(imageBinding(DIGEST)(dsseItem(statement([{ digest: { sha256: HEX } }], SIGN_PREDICATE, "https://in-toto.io/Statement/v0.1"))), undefined);
    assert.equal(
      imageBinding(DIGEST)(dsseItem(statement([{ digest: { sha256: HEX } }], SIGN_PREDICATE, "https://in-toto.io/Statement/v2"))),
      'unknown in-toto statement type "https://in-toto.io/Statement/v2"',
    );
    for (const text of ["null", "7", '"text"']) assert.deepEqual(inTotoStatement(dsseItem(text)), { error: "the in-toto statement is not an object" }, text);
    assert.deepEqual(inTotoStatement(dsseItem("{")), { error: "the in-toto statement is not JSON" });
    assert.deepEqual(inTotoStatement(messageItem("sigstore-bundle", MANIFEST)), { error: "not a DSSE envelope" });
  });

  test("an attestation must be a DSSE statement", () => {
    assert.equal(
      attestationBinding(DIGEST, "https://slsa.dev/provenance/v1")(messageItem("sigstore-bundle", MANIFEST)),
      "a message signature, not an in-toto attestation",
    );
  });
});

// ---------------------------------------------------------------------------------------------
// Static keys, without a log (ignoreTlog), through the Sigstore verifier.

function keyLayer(key: SigningKey, hash: SignatureHash | null, digest = DIGEST): SignedItem {
  const payload = simpleSigningPayload({ dockerReference: NAME, digest });
  const signature = signBytes(key, payload, hash).toString("base64");
  return cosignLayerToItem(payload, { "dev.cosignproject.cosign/signature": signature }, "layer 0");
}

const keyContext = (key: SigningKey) => ({ binding: imageBinding(DIGEST), trustRoot: undefined, key: publicKeyFromPem(key.publicKeyPem) });

describe("static keys: the hash follows the key type", () => {
  const accepted: Array<[KeyAlgorithm, SignatureHash | null]> = [
    ["ecdsa-p256", "sha256"],
    ["ecdsa-p384", "sha384"],
    ["ecdsa-p521", "sha512"],
    ["ed25519", null],
    ["rsa-2048", "sha256"],
  ];
  for (const [algorithm, hash] of accepted) {
    test(`${algorithm} over ${hash ?? "the message itself"} verifies`, () => {
      const key = generateSigningKey(algorithm);
      const outcome = verifyItem(keyLayer(key, hash), keyEntry(key), keyContext(key));
      assert.ok(outcome.ok, refused(outcome));
    });
  }

  const refusedPairs: Array<[KeyAlgorithm, SignatureHash]> = [
    ["ecdsa-p256", "sha384"],
    ["ecdsa-p256", "sha512"],
    ["ecdsa-p384", "sha512"],
    ["ecdsa-p521", "sha384"],
    ["rsa-2048", "sha512"],
  ];
  for (const [algorithm, hash] of refusedPairs) {
    test(`${algorithm} over ${hash} is not what the key type implies: refused`, () => {
      const key = generateSigningKey(algorithm);
      assert.deepEqual(verifyItem(keyLayer(key, hash), keyEntry(key), keyContext(key)), {
        ok: false,
        reason: "the signature does not verify with this key",
        notThisSigner: true,
      });
    });
  }

  test("a malformed signature is refused, not thrown", () => {
    for (const algorithm of ["ecdsa-p384", "ed25519"] as const) {
      const key = generateSigningKey(algorithm);
      const payload = simpleSigningPayload({ dockerReference: NAME, digest: DIGEST });
      const item = cosignLayerToItem(payload, { "dev.cosignproject.cosign/signature": Buffer.from("short").toString("base64") }, "l");
      assert.deepEqual(
        verifyItem(item, keyEntry(key), keyContext(key)),
        { ok: false, reason: "the signature does not verify with this key", notThisSigner: true },
        algorithm,
      );
    }
  });

  test("a key entry without its key, or without a trust root when the log is required, refuses", () => {
    const key = generateSigningKey("ecdsa-p256");
    assert.deepEqual(verifyItem(keyLayer(key, "sha256"), keyEntry(key), { binding: imageBinding(DIGEST), trustRoot: undefined }), {
      ok: false,
      reason: "the key is not available",
    });
    const logged = leafAttestorsWith(`{staticKey: {name: k, trustRoot: mock, key: ${JSON.stringify(key.publicKeyPem)}}}`)[0]!;
    assert.deepEqual(verifyItem(keyLayer(key, "sha256"), logged, keyContext(key)), { ok: false, reason: 'trust root "mock" is not loaded' });
  });

  test("a DSSE envelope whose signature covers the raw bytes, not the envelope, is refused", async () => {
    for (const algorithm of ["ecdsa-p384", "ed25519"] as const) {
      const key = generateSigningKey(algorithm);
      const built = await imageSignatureBundle({ name: NAME, digest: DIGEST, key, version: "0.3" });
      const item = bundleToItem(built.bytes, "referrer", MANIFEST);
      const envelope = item.bundle.content.$case === "dsseEnvelope" ? item.bundle.content.dsseEnvelope : assert.fail("not DSSE");
      // Signed the way a message signature of these bytes is: over the payload (and over the artifact).
      envelope.signatures[0]!.sig = signBytes(key, envelope.payload);
      assert.equal(verifyItem(item, keyEntry(key), keyContext(key)).ok, false, `${algorithm}, payload`);
      envelope.signatures[0]!.sig = signBytes(key, MANIFEST);
      const withArtifact = { ...item, artifact: MANIFEST };
      assert.equal(verifyItem(withArtifact, keyEntry(key), keyContext(key)).ok, false, `${algorithm}, artifact`);
    }
  });
});

describe("a message signature given only the artifact's sha256", () => {
  const noBinding = () => undefined;

  async function digestOnly(key: SigningKey, alter?: (messageDigest: { algorithm: HashAlgorithm; digest: Buffer }) => void) {
    const built = await messageSignatureBundle({ artifact: MANIFEST, key, version: "0.3" });
    const item = bundleToItem(built.bytes, "file", undefined);
    if (alter && item.bundle.content.$case === "messageSignature") alter(item.bundle.content.messageSignature.messageDigest!);
    return item;
  }
  const artifactDigest = Buffer.from(HEX, "hex");

  test("verifies when the message digest is the artifact's, stated as SHA-256 or unspecified", async () => {
    const key = generateSigningKey("ecdsa-p256");
    const plain = verifyItem(await digestOnly(key), keyEntry(key), { ...keyContext(key), binding: noBinding, artifactDigest });
    assert.ok(plain.ok, refused(plain));
    const unspecified = await digestOnly(key, (d) => (d.algorithm = HashAlgorithm.HASH_ALGORITHM_UNSPECIFIED));
    const outcome = verifyItem(unspecified, keyEntry(key), { ...keyContext(key), binding: noBinding, artifactDigest });
    assert.ok(outcome.ok, refused(outcome));
  });

  test("is refused when the bundle's message digest is another, or another algorithm's", async () => {
    const key = generateSigningKey("ecdsa-p256");
    const wrongAlgorithm = await digestOnly(key, (d) => (d.algorithm = HashAlgorithm.SHA2_384));
    assert.deepEqual(verifyItem(wrongAlgorithm, keyEntry(key), { ...keyContext(key), binding: noBinding, artifactDigest }), {
      ok: false,
      reason: "the bundle's message digest is not the artifact's",
    });
    const noDigest = await digestOnly(key);
    if (noDigest.bundle.content.$case === "messageSignature")
      (noDigest.bundle.content.messageSignature as { messageDigest?: unknown }).messageDigest = undefined;
    assert.deepEqual(verifyItem(noDigest, keyEntry(key), { ...keyContext(key), binding: noBinding, artifactDigest }), {
      ok: false,
      reason: "the bundle's message digest is not the artifact's",
    });
    const wrongDigest = await digestOnly(key, (d) => (d.digest = createHash("sha256").update("x").digest()));
    assert.deepEqual(verifyItem(wrongDigest, keyEntry(key), { ...keyContext(key), binding: noBinding, artifactDigest }), {
      ok: false,
      reason: "the bundle's message digest is not the artifact's",
    });
  });

  test("a key type that signs the message itself cannot be checked from a digest, and says so", async () => {
    const key = generateSigningKey("ed25519");
    const outcome = verifyItem(await digestOnly(key), keyEntry(key), { ...keyContext(key), binding: noBinding, artifactDigest });
    assert.deepEqual(outcome, { ok: false, reason: "a ed25519 signature covers the artifact itself: give the file, not its digest", notThisSigner: true });
  });

  test("without the artifact or its digest, a message signature is refused", async () => {
    const key = generateSigningKey("ecdsa-p256");
    const outcome = verifyItem(await digestOnly(key), keyEntry(key), { ...keyContext(key), binding: noBinding });
    assert.deepEqual(outcome, { ok: false, reason: "the signature does not verify with this key", notThisSigner: true });
    const bound = verifyItem(await digestOnly(key), keyEntry(key), { ...keyContext(key), binding: imageBinding(DIGEST), artifactDigest });
    assert.deepEqual(bound, { ok: false, reason: "a message signature without the bytes it signs" });
  });
});

// ---------------------------------------------------------------------------------------------
// With a (mock) Sigstore: logs, certificates, timestamps.

describe("with a Sigstore instance", () => {
  let sigstore: MockSigstore;
  let stranger: MockSigstore;
  let root: SigstoreTrust;
  let key: SigningKey;

  before(async () => {
    sigstore = await createMockSigstore({ name: "mock" });
    stranger = await createMockSigstore({ name: "stranger" });
    root = mockTrustRoot(sigstore, "mock").sigstore!;
    key = generateSigningKey("ecdsa-p256");
  });

  test("a keyless entry refuses without its trust root, even with ignoreTlog", async () => {
    const cert = await sigstore.issueKeylessCertificate({ subjectAltName: WORKFLOW, issuer: ISSUER });
    const layer = await cosignSignatureLayer({ payload: simpleSigningPayload({ dockerReference: NAME, digest: DIGEST }), keyless: cert, rekor: sigstore });
    const item = cosignLayerToItem(layer.blob, layer.annotations, "l");
    for (const entry of [keyless(), keyless(", ignoreTlog: true")])
      assert.deepEqual(verifyItem(item, entry, { trustRoot: undefined, binding: imageBinding(DIGEST) }), {
        ok: false,
        reason: 'trust root "mock" is not loaded',
      });
  });

  test("a logged signature's evidence is its log index and the log's integrated time", async () => {
    const cert = await sigstore.issueKeylessCertificate({ subjectAltName: WORKFLOW, issuer: ISSUER });
    const layer = await cosignSignatureLayer({ payload: simpleSigningPayload({ dockerReference: NAME, digest: DIGEST }), keyless: cert, rekor: sigstore });
    const item = cosignLayerToItem(layer.blob, layer.annotations, "l");
    const outcome = verifyItem(item, keyless(), { trustRoot: root, binding: imageBinding(DIGEST) });
    assert.ok(outcome.ok, refused(outcome));
    const tlog = item.bundle.verificationMaterial.tlogEntries[0]!;
    assert.equal(outcome.evidence.tlogIndex, tlog.logIndex);
    assert.equal(outcome.evidence.signedAt, new Date(Number(tlog.integratedTime) * 1000).toISOString());
  });

  test("a logged message-signature bundle verifies against the manifest (its log entry names the manifest's digest)", async () => {
    const built = await messageSignatureBundle({ artifact: MANIFEST, key, rekor: sigstore, version: "0.3" });
    const entry = keyEntry(key, ", trustRoot: mock");
    const outcome = verifyItem(bundleToItem(built.bytes, "referrer", MANIFEST), entry, { ...keyContext(key), trustRoot: root });
    assert.ok(outcome.ok, refused(outcome));
  });

  test("without ignoreTlog, an unlogged signature by another key, or for another digest, says that rather than the missing log", () => {
    const entry = keyEntry(key, ", trustRoot: mock");
    const stranger = generateSigningKey("ecdsa-p256");
    assert.deepEqual(verifyItem(keyLayer(stranger, "sha256"), entry, { ...keyContext(key), trustRoot: root }), {
      ok: false,
      reason: "the signature does not verify with this key",
      notThisSigner: true,
    });
    assert.deepEqual(verifyItem(keyLayer(key, "sha256", OTHER), entry, { ...keyContext(key), trustRoot: root }), {
      ok: false,
      reason: `signs ${OTHER}, not ${DIGEST}`,
    });
  });

  test("a key entry with ignoreTlog ignores the log entry and timestamps a key signature carries", async () => {
    const payload = simpleSigningPayload({ dockerReference: NAME, digest: DIGEST });
    // Logged in, and timestamped by, a Sigstore nobody here trusts: nothing to check them against, and not needed.
    const layer = await cosignSignatureLayer({ payload, key, rekor: stranger, timestamp: stranger, hash: "sha256" });
    const outcome = verifyItem(cosignLayerToItem(layer.blob, layer.annotations, "l"), keyEntry(key), keyContext(key));
    assert.ok(outcome.ok, refused(outcome));
    assert.equal(outcome.evidence.tlogIndex, undefined);
  });

  test("a keyless entry with ignoreTlog ignores a log entry from another log", async () => {
    const cert = await sigstore.issueKeylessCertificate({ subjectAltName: WORKFLOW, issuer: ISSUER });
    const layer = await cosignSignatureLayer({
      payload: simpleSigningPayload({ dockerReference: NAME, digest: DIGEST }),
      keyless: cert,
      rekor: stranger,
      timestamp: sigstore,
    });
    const item = cosignLayerToItem(layer.blob, layer.annotations, "l");
    const outcome = verifyItem(item, keyless(", ignoreTlog: true"), { trustRoot: root, binding: imageBinding(DIGEST) });
    assert.ok(outcome.ok, refused(outcome));
    const strict = verifyItem(item, keyless(), { trustRoot: root, binding: imageBinding(DIGEST) });
    assert.equal(strict.ok, false);
    assert.deepEqual(strict, { ok: false, reason: "transparency log: inclusion promise could not be verified" });
  });

  test("a keyless entry refuses a key-signed bundle as someone else's", async () => {
    const built = await messageSignatureBundle({ artifact: MANIFEST, key, rekor: sigstore, version: "0.3" });
    assert.deepEqual(verifyItem(bundleToItem(built.bytes, "referrer", MANIFEST), keyless(), { trustRoot: root, binding: imageBinding(DIGEST) }), {
      ok: false,
      reason: "signed with a key, not a certificate",
      notThisSigner: true,
    });
  });

  test("reasons name the failed check once, without the error's class", async () => {
    const cert = await stranger.issueKeylessCertificate({ subjectAltName: WORKFLOW, issuer: ISSUER });
    const layer = await cosignSignatureLayer({ payload: simpleSigningPayload({ dockerReference: NAME, digest: DIGEST }), keyless: cert, rekor: sigstore });
    const foreign = verifyItem(cosignLayerToItem(layer.blob, layer.annotations, "l"), keyless(), { trustRoot: root, binding: imageBinding(DIGEST) });
    assert.deepEqual(foreign, { ok: false, reason: "certificate: Failed to verify certificate chain" });

    const own = await sigstore.issueKeylessCertificate({ subjectAltName: WORKFLOW, issuer: ISSUER });
    const payload = simpleSigningPayload({ dockerReference: NAME, digest: DIGEST });
    const untimed = await cosignSignatureLayer({ payload, keyless: own });
    const outcome = verifyItem(cosignLayerToItem(untimed.blob, untimed.annotations, "l"), keyless(", ignoreTlog: true"), {
      trustRoot: root,
      binding: imageBinding(DIGEST),
    });
    assert.deepEqual(outcome, { ok: false, reason: "TIMESTAMP_ERROR: expected 1 timestamps, got 0" });

    const tampered = await cosignSignatureLayer({ payload, keyless: own, rekor: sigstore, tamper: { signedEntryTimestamp: true } });
    const promise = verifyItem(cosignLayerToItem(tampered.blob, tampered.annotations, "l"), keyless(), { trustRoot: root, binding: imageBinding(DIGEST) });
    assert.deepEqual(promise, { ok: false, reason: "transparency log: inclusion promise could not be verified" });

    const timedOnly = await cosignSignatureLayer({ payload, keyless: own, timestamp: sigstore });
    const unlogged = verifyItem(cosignLayerToItem(timedOnly.blob, timedOnly.annotations, "l"), keyless(), { trustRoot: root, binding: imageBinding(DIGEST) });
    assert.deepEqual(unlogged, { ok: false, reason: "transparency log: expected 1 tlog entries, got 0" });

    const proved = await imageSignatureBundle({ name: NAME, digest: DIGEST, keyless: own, rekor: sigstore, timestamp: sigstore, inclusionPromise: false });
    const item = bundleToItem(proved.bytes, "referrer", undefined);
    item.bundle.verificationMaterial.tlogEntries[0]!.inclusionProof!.hashes[0] = Buffer.alloc(32);
    assert.deepEqual(verifyItem(item, keyless(), { trustRoot: root, binding: imageBinding(DIGEST) }), {
      ok: false,
      reason: "transparency log: calculated root hash does not match inclusion proof",
    });
  });

  test("a log entry with neither an inclusion promise nor a proof is refused as such", async () => {
    const cert = await sigstore.issueKeylessCertificate({ subjectAltName: WORKFLOW, issuer: ISSUER });
    const layer = await cosignSignatureLayer({
      payload: simpleSigningPayload({ dockerReference: NAME, digest: DIGEST }),
      keyless: cert,
      rekor: sigstore,
      timestamp: sigstore,
    });
    const item = cosignLayerToItem(layer.blob, layer.annotations, "l");
    const tlog = item.bundle.verificationMaterial.tlogEntries[0]!;
    tlog.inclusionPromise = undefined;
    tlog.inclusionProof = undefined;
    const outcome = verifyItem(item, keyless(), { trustRoot: root, binding: imageBinding(DIGEST) });
    assert.deepEqual(outcome, { ok: false, reason: "transparency log: inclusion could not be verified" });
  });

  test("a DSSE envelope without a signature is refused", async () => {
    const built = await imageSignatureBundle({ name: NAME, digest: DIGEST, key, version: "0.3" });
    const item = bundleToItem(built.bytes, "file", undefined);
    if (item.bundle.content.$case === "dsseEnvelope") item.bundle.content.dsseEnvelope.signatures = [];
    const outcome = verifyItem(item, keyEntry(key), keyContext(key));
    assert.deepEqual(outcome, { ok: false, reason: "the signature does not verify with this key", notThisSigner: true });
  });

  test("a certificate without an identity or without an issuer matches no entry, not even a wildcard one", async () => {
    const anyone = leafAttestorsWith(`{keyless: {subject: "*", issuer: "*", trustRoot: mock}}`)[0]!;
    const signed = async (subjectAltName: string | { dns: string }, issuer: string | null) => {
      const cert = await sigstore.issueKeylessCertificate({ subjectAltName, issuer });
      const layer = await cosignSignatureLayer({ payload: simpleSigningPayload({ dockerReference: NAME, digest: DIGEST }), keyless: cert, rekor: sigstore });
      return verifyItem(cosignLayerToItem(layer.blob, layer.annotations, "l"), anyone, { trustRoot: root, binding: imageBinding(DIGEST) });
    };
    const control = await signed(WORKFLOW, ISSUER);
    assert.ok(control.ok, refused(control));
    assert.match(refused(await signed({ dns: "build.example.com" }, ISSUER)), /^certificate identity null does not match /);
    assert.match(refused(await signed(WORKFLOW, null)), /^certificate issuer null does not match /);
  });

  test("an identity or issuer too long for its regular expression's work limit cannot be checked: refused, saying so", async () => {
    const pattern = "^https://[a-z.]{1,900}/[a-z]{1,900}/[a-z]{1,900}/[a-z]{1,900}/.*$";
    const long = `https://github.com/${"a".repeat(3000)}`;
    const entry = (field: "subjectRegExp" | "issuerRegExp") =>
      leafAttestorsWith(
        field === "subjectRegExp"
          ? `{keyless: {subjectRegExp: '${pattern}', issuer: "${ISSUER}", trustRoot: mock}}`
          : `{keyless: {subject: "${WORKFLOW}", issuerRegExp: '${pattern}', trustRoot: mock}}`,
      )[0]!;
    const signed = async (subjectAltName: string, issuer: string, field: "subjectRegExp" | "issuerRegExp") => {
      const cert = await sigstore.issueKeylessCertificate({ subjectAltName, issuer });
      const layer = await cosignSignatureLayer({ payload: simpleSigningPayload({ dockerReference: NAME, digest: DIGEST }), keyless: cert, rekor: sigstore });
      return verifyItem(cosignLayerToItem(layer.blob, layer.annotations, "l"), entry(field), { trustRoot: root, binding: imageBinding(DIGEST) });
    };
    assert.match(
      refused(await signed(long, ISSUER, "subjectRegExp")),
      /^certificate identity cannot be checked: a value of 3019 characters is too long to match against /,
    );
    assert.match(
      refused(await signed(WORKFLOW, long, "issuerRegExp")),
      /^certificate issuer cannot be checked: a value of 3019 characters is too long to match against /,
    );
  });

  test("a DSSE bundle verifies the same when an artifact digest is given (it is for message signatures only)", async () => {
    const built = await imageSignatureBundle({ name: NAME, digest: DIGEST, key, version: "0.3" });
    const outcome = verifyItem(bundleToItem(built.bytes, "file", undefined), keyEntry(key), { ...keyContext(key), artifactDigest: Buffer.from(HEX, "hex") });
    assert.ok(outcome.ok, refused(outcome));
  });

  describe("certificate extensions", () => {
    const LONG = `https://github.com/acme/app/.github/workflows/${"x".repeat(150)}.yml@refs/heads/main`;
    const VERY_LONG = `https://github.com/acme/app/.github/workflows/${"y".repeat(300)}.yml@refs/heads/main`;
    async function signedWith(extensions: Record<string, string | Buffer>) {
      const cert = await sigstore.issueKeylessCertificate({ subjectAltName: WORKFLOW, issuer: ISSUER, extensions });
      const layer = await cosignSignatureLayer({ payload: simpleSigningPayload({ dockerReference: NAME, digest: DIGEST }), keyless: cert, rekor: sigstore });
      return cosignLayerToItem(layer.blob, layer.annotations, "l");
    }
    const requiring = (name: string, value: string) => keyless(`, additionalExtensions: {${name}: ${JSON.stringify(value)}}`);

    test("DER UTF8String values are read, with short and long lengths", async () => {
      for (const value of ["refs/heads/main", "", LONG, VERY_LONG]) {
        const item = await signedWith({ "1.3.6.1.4.1.57264.1.9": value });
        const outcome = verifyItem(item, requiring("buildSignerURI", value), { trustRoot: root, binding: imageBinding(DIGEST) });
        assert.ok(outcome.ok, `${value.length}: ${refused(outcome)}`);
      }
    });

    test("a raw value is read whole, even when its bytes look like a length", async () => {
      for (const value of ["x\u0003abc", "\u000c\u0001ab", "\u000c"]) {
        const item = await signedWith({ "1.3.6.1.4.1.57264.1.2": value });
        const outcome = verifyItem(item, requiring("githubWorkflowTrigger", value), { trustRoot: root, binding: imageBinding(DIGEST) });
        assert.ok(outcome.ok, `${JSON.stringify(value)}: ${refused(outcome)}`);
      }
    });
  });
});
