// The test signer's Sigstore bundles verify with @sigstore/verify (and fail where they should): keyless and
// key-signed, DSSE and message signatures, bundle v0.1/v0.2/v0.3, Rekor entries and TSA timestamps.

import { before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { createHash, verify } from "node:crypto";
import { generateSigningKey, trustedPublicKeys } from "../../support/signer/keys.ts";
import { createMockSigstore, OID_ISSUER_V1 } from "../../support/signer/mock-sigstore.ts";
import type { KeylessCertificate, MockSigstore } from "../../support/signer/mock-sigstore.ts";
import {
  attestationBundle,
  BUNDLE_MEDIA_TYPES,
  COSIGN_SIGN_PREDICATE_TYPE,
  dsseBundle,
  imageSignatureBundle,
  messageSignatureBundle,
  OCI_EMPTY,
  referrerManifest,
  referrersTag,
  referrersTagIndex,
} from "../../support/signer/sigstore-bundles.ts";
import { verifyBundle } from "../../support/signer/reference-verify.ts";

const WORKFLOW = "https://github.com/acme/app/.github/workflows/release.yml@refs/tags/v1";
const GITHUB_ISSUER = "https://token.actions.githubusercontent.com";
const IMAGE = "registry.example/acme/app";
const DIGEST = `sha256:${createHash("sha256").update("image").digest("hex")}`;

describe("Sigstore bundles from the test signer", () => {
  let sigstore: MockSigstore;
  let other: MockSigstore;
  let cert: KeylessCertificate;

  before(async () => {
    sigstore = await createMockSigstore();
    other = await createMockSigstore();
    cert = await sigstore.issueKeylessCertificate({
      subjectAltName: WORKFLOW,
      issuer: GITHUB_ISSUER,
      extensions: {
        "1.3.6.1.4.1.57264.1.2": "push", // legacy raw: GitHub workflow trigger
        "1.3.6.1.4.1.57264.1.3": "0123456789abcdef0123456789abcdef01234567",
        "1.3.6.1.4.1.57264.1.9": WORKFLOW, // DER UTF8String: build signer URI
        "1.3.6.1.4.1.57264.1.12": "https://github.com/acme/app",
      },
    });
  });

  test("keyless DSSE image signature bundle v0.3 verifies with the right identity", async () => {
    const built = await imageSignatureBundle({ name: IMAGE, digest: DIGEST, keyless: cert, rekor: sigstore });
    assert.equal(built.mediaType, BUNDLE_MEDIA_TYPES["0.3"]);
    const json = JSON.parse(built.bytes.toString());
    assert.ok(json.verificationMaterial.certificate, "v0.3 uses `certificate`");
    assert.equal(json.verificationMaterial.tlogEntries[0].kindVersion.kind, "dsse");
    assert.ok(json.verificationMaterial.tlogEntries[0].inclusionProof.checkpoint.envelope);
    const statement = JSON.parse(Buffer.from(json.dsseEnvelope.payload, "base64").toString());
    assert.deepEqual(statement, {
      _type: "https://in-toto.io/Statement/v1",
      subject: [{ name: IMAGE, digest: { sha256: DIGEST.slice(7) } }],
      predicateType: COSIGN_SIGN_PREDICATE_TYPE,
      predicate: {},
    });

    const signer = verifyBundle(sigstore.trustedRoot, built.bytes, {
      policy: { subjectAlternativeName: `^${WORKFLOW.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&")}$`, extensions: { issuer: GITHUB_ISSUER } },
    });
    assert.equal(signer.identity?.subjectAlternativeName, WORKFLOW);
    // Both encodings of Fulcio extensions are in the certificate: raw (.2) and DER UTF8String (.9).
    const oid = (id: string) => signer.identity?.oids?.find((o) => o.oid?.id.join(".") === id)?.value;
    assert.equal(oid("1.3.6.1.4.1.57264.1.2")?.toString(), "push");
    assert.equal(oid(OID_ISSUER_V1)?.toString(), GITHUB_ISSUER);
    assert.deepEqual(oid("1.3.6.1.4.1.57264.1.9"), Buffer.concat([Buffer.from([0x0c, WORKFLOW.length]), Buffer.from(WORKFLOW)]));
  });

  test("the same bundle fails a wrong identity policy and another instance's trust root", async () => {
    const built = await imageSignatureBundle({ name: IMAGE, digest: DIGEST, keyless: cert, rekor: sigstore });
    assert.throws(() => verifyBundle(sigstore.trustedRoot, built.bytes, { policy: { subjectAlternativeName: "^https://github.com/evil/" } }), /identity/);
    assert.throws(() => verifyBundle(sigstore.trustedRoot, built.bytes, { policy: { extensions: { issuer: "https://accounts.google.com" } } }), /extension/);
    assert.throws(() => verifyBundle(other.trustedRoot, built.bytes), /certificate|tlog|TLOG|CERTIFICATE/);
  });

  test("key-signed bundle without a tlog entry verifies with zero thresholds, and only with the key", async () => {
    const key = generateSigningKey("ecdsa-p256");
    const built = await imageSignatureBundle({ name: IMAGE, digest: DIGEST, key });
    const json = JSON.parse(built.bytes.toString());
    assert.deepEqual(json.verificationMaterial.tlogEntries, []);
    assert.equal(json.verificationMaterial.publicKey.hint, key.hint);
    verifyBundle(sigstore.trustedRoot, built.bytes, { keys: trustedPublicKeys([key]), tlogThreshold: 0, timestampThreshold: 0 });
    assert.throws(() => verifyBundle(sigstore.trustedRoot, built.bytes, { keys: trustedPublicKeys([key]) }), /timestamps|tlog/);
    const stranger = generateSigningKey("ecdsa-p256");
    assert.throws(
      () =>
        verifyBundle(sigstore.trustedRoot, built.bytes, {
          keys: trustedPublicKeys([{ key: stranger, hint: key.hint }]),
          tlogThreshold: 0,
          timestampThreshold: 0,
        }),
      /signature/,
    );
  });

  test("key-signed bundles with a Rekor entry (dsse and intoto kinds) verify with the default thresholds", async () => {
    const key = generateSigningKey("ecdsa-p256");
    for (const rekorKind of ["dsse", "intoto"] as const) {
      const built = await imageSignatureBundle({ name: IMAGE, digest: DIGEST, key, rekor: sigstore, rekorKind });
      verifyBundle(sigstore.trustedRoot, built.bytes, { keys: trustedPublicKeys([key]) });
    }
  });

  test("every key algorithm signs verifiable DSSE and message-signature bundles", async () => {
    for (const algorithm of ["ecdsa-p256", "ecdsa-p384", "ecdsa-p521", "rsa-2048", "ed25519"] as const) {
      const key = generateSigningKey(algorithm);
      const keys = trustedPublicKeys([key]);
      const dsse = await imageSignatureBundle({ name: IMAGE, digest: DIGEST, key, rekor: sigstore });
      verifyBundle(sigstore.trustedRoot, dsse.bytes, { keys });
      const artifact = Buffer.from(`artifact for ${algorithm}`);
      const message = await messageSignatureBundle({ artifact, key, rekor: sigstore });
      if (algorithm === "ed25519") {
        // @sigstore/verify passes the messageDigest hash to crypto.verify, which Ed25519 (pure) rejects: it cannot
        // verify Ed25519 message signatures at all. Check the signature directly instead.
        const sig = Buffer.from(JSON.parse(message.bytes.toString()).messageSignature.signature, "base64");
        assert.ok(verify(null, artifact, key.publicKey, sig));
        continue;
      }
      verifyBundle(sigstore.trustedRoot, message.bytes, { keys, artifact });
      assert.throws(
        () => verifyBundle(sigstore.trustedRoot, message.bytes, { keys, artifact: Buffer.from("other bytes") }),
        { code: "SIGNATURE_ERROR" },
        algorithm,
      );
    }
  });

  test("bundle versions 0.1 and 0.2 have their media type, x509CertificateChain and inclusion evidence", async () => {
    const artifact = Buffer.from("release.tar.gz contents");
    for (const version of ["0.1", "0.2"] as const) {
      const built = await messageSignatureBundle({ artifact, keyless: cert, rekor: sigstore, version, includeChain: version === "0.2" });
      const json = JSON.parse(built.bytes.toString());
      assert.equal(json.mediaType, BUNDLE_MEDIA_TYPES[version]);
      assert.equal(json.verificationMaterial.x509CertificateChain.certificates.length, version === "0.2" ? 3 : 1);
      const entry = json.verificationMaterial.tlogEntries[0];
      assert.ok(entry.inclusionPromise.signedEntryTimestamp);
      assert.equal(entry.inclusionProof !== undefined, version === "0.2");
      assert.equal(entry.kindVersion.kind, "hashedrekord");
      verifyBundle(sigstore.trustedRoot, built.bytes, { artifact, policy: { subjectAlternativeName: WORKFLOW } });
    }
  });

  test("a TSA timestamp alone satisfies the timestamp threshold; a tampered one does not verify", async () => {
    const built = await attestationBundle({
      name: IMAGE,
      digest: DIGEST,
      predicateType: "https://slsa.dev/provenance/v1",
      predicate: { buildDefinition: { buildType: "https://example/build" } },
      keyless: cert,
      timestamp: sigstore,
    });
    const json = JSON.parse(built.bytes.toString());
    assert.equal(json.verificationMaterial.tlogEntries.length, 0);
    assert.equal(json.verificationMaterial.timestampVerificationData.rfc3161Timestamps.length, 1);
    verifyBundle(sigstore.trustedRoot, built.bytes, { tlogThreshold: 0, timestampThreshold: 1 });
    assert.throws(() => verifyBundle(other.trustedRoot, built.bytes, { tlogThreshold: 0, timestampThreshold: 1 }));
    const signed = Buffer.from(json.verificationMaterial.timestampVerificationData.rfc3161Timestamps[0].signedTimestamp, "base64");
    signed[signed.length - 5]! ^= 0x01;
    json.verificationMaterial.timestampVerificationData.rfc3161Timestamps[0].signedTimestamp = signed.toString("base64");
    assert.throws(() => verifyBundle(sigstore.trustedRoot, json, { tlogThreshold: 0, timestampThreshold: 1 }));
  });

  test("keyless with both a Rekor entry and a TSA timestamp; email SANs", async () => {
    const mailCert = await sigstore.issueKeylessCertificate({ subjectAltName: "release@acme.example", issuer: "https://accounts.google.com" });
    const built = await imageSignatureBundle({ name: IMAGE, digest: DIGEST, keyless: mailCert, rekor: sigstore, timestamp: sigstore });
    const signer = verifyBundle(sigstore.trustedRoot, built.bytes, { timestampThreshold: 2, policy: { subjectAlternativeName: "^release@acme\\.example$" } });
    assert.equal(signer.identity?.extensions?.issuer, "https://accounts.google.com");
  });

  test("tampered bundles fail", async () => {
    const payloadTampered = await imageSignatureBundle({ name: IMAGE, digest: DIGEST, keyless: cert, rekor: sigstore, tamper: { payload: true } });
    assert.throws(() => verifyBundle(sigstore.trustedRoot, payloadTampered.bytes), { code: "TLOG_BODY_ERROR" });
    const signatureTampered = await imageSignatureBundle({ name: IMAGE, digest: DIGEST, keyless: cert, rekor: sigstore, tamper: { signature: true } });
    assert.throws(() => verifyBundle(sigstore.trustedRoot, signatureTampered.bytes), { code: "TLOG_BODY_ERROR" });
    const artifact = Buffer.from("x");
    const messageTampered = await messageSignatureBundle({ artifact, keyless: cert, rekor: sigstore, tamper: { signature: true } });
    assert.throws(() => verifyBundle(sigstore.trustedRoot, messageTampered.bytes, { artifact }), { code: "TLOG_BODY_ERROR" });
    // Without a log entry, the signature check itself catches both.
    const key = generateSigningKey();
    for (const tamper of ["payload", "signature"] as const) {
      const built = await imageSignatureBundle({ name: IMAGE, digest: DIGEST, key, tamper: { [tamper]: true } });
      assert.throws(() => verifyBundle(sigstore.trustedRoot, built.bytes, { keys: trustedPublicKeys([key]), tlogThreshold: 0, timestampThreshold: 0 }), {
        code: "SIGNATURE_ERROR",
      });
    }
  });

  test("an expired certificate (signing time outside its validity) fails", async () => {
    const now = sigstore.now().getTime();
    const expired = await sigstore.issueKeylessCertificate({
      subjectAltName: WORKFLOW,
      issuer: GITHUB_ISSUER,
      validity: { notBefore: new Date(now - 3_600_000), notAfter: new Date(now - 1_800_000) },
    });
    const built = await imageSignatureBundle({ name: IMAGE, digest: DIGEST, keyless: expired, rekor: sigstore });
    assert.throws(() => verifyBundle(sigstore.trustedRoot, built.bytes), /certificate/i);
  });

  test("a fixed clock dates certificates, log entries and timestamps", async () => {
    const clock = new Date(Date.now() + 3_600_000);
    const later = await createMockSigstore({ clock });
    const laterCert = await later.issueKeylessCertificate({ subjectAltName: WORKFLOW, issuer: GITHUB_ISSUER });
    const built = await dsseBundle({ payload: Buffer.from("{}"), payloadType: "application/json", keyless: laterCert, rekor: later, timestamp: later });
    const json = JSON.parse(built.bytes.toString());
    assert.equal(json.verificationMaterial.tlogEntries[0].integratedTime, String(Math.floor(clock.getTime() / 1000)));
    verifyBundle(later.trustedRoot, built.bytes, { timestampThreshold: 2 });
  });

  test("referrer manifest and referrers tag index have cosign v3's shape", async () => {
    const built = await imageSignatureBundle({ name: IMAGE, digest: DIGEST, keyless: cert, rekor: sigstore });
    const subject = { mediaType: "application/vnd.oci.image.manifest.v1+json", digest: DIGEST, size: 525 };
    const referrer = referrerManifest({
      bundleBytes: built.bytes,
      bundleMediaType: built.mediaType,
      subject,
      predicateType: COSIGN_SIGN_PREDICATE_TYPE,
      content: "dsse-envelope",
    });
    const manifest = JSON.parse(referrer.manifest.toString());
    assert.equal(manifest.artifactType, "application/vnd.dev.sigstore.bundle.v0.3+json");
    assert.deepEqual(manifest.config, { mediaType: OCI_EMPTY.mediaType, digest: OCI_EMPTY.digest, size: 2 });
    assert.equal(createHash("sha256").update(referrer.blobs.get(OCI_EMPTY.digest)!).digest("hex"), OCI_EMPTY.digest.slice(7));
    assert.equal(manifest.layers.length, 1);
    assert.equal(manifest.layers[0].mediaType, manifest.artifactType);
    assert.deepEqual(referrer.blobs.get(manifest.layers[0].digest), built.bytes);
    assert.deepEqual(manifest.subject, subject);
    assert.equal(manifest.annotations["dev.sigstore.bundle.content"], "dsse-envelope");
    assert.equal(manifest.annotations["dev.sigstore.bundle.predicateType"], COSIGN_SIGN_PREDICATE_TYPE);
    assert.ok(manifest.annotations["org.opencontainers.image.created"]);
    assert.equal(referrer.digest, `sha256:${createHash("sha256").update(referrer.manifest).digest("hex")}`);

    const index = JSON.parse(referrersTagIndex([referrer.descriptor]).manifest.toString());
    assert.equal(index.mediaType, "application/vnd.oci.image.index.v1+json");
    assert.deepEqual(index.manifests, [
      {
        mediaType: manifest.mediaType,
        digest: referrer.digest,
        size: referrer.manifest.length,
        artifactType: manifest.artifactType,
        annotations: manifest.annotations,
      },
    ]);
    assert.equal(referrersTag(DIGEST), `sha256-${DIGEST.slice(7)}`);
  });
});
