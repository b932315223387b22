// The test signer's cosign .sig/.att layers are right: each layer is turned here, independently of the signer, into
// a Sigstore bundle built only from the blob and its annotations (messageDigest = sha256 of the payload, signature,
// certificate or key hint, tlog entry from dev.sigstore.cosign/bundle, RFC 3161 timestamp from
// dev.sigstore.cosign/rfc3161timestamp) and verified with @sigstore/verify.

import { before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { RFC3161Timestamp } from "@sigstore/core";
import { generateSigningKey, trustedPublicKeys } from "../../support/signer/keys.ts";
import type { SigningKey } from "../../support/signer/keys.ts";
import { createMockSigstore, rekorEntryToTlogEntry } from "../../support/signer/mock-sigstore.ts";
import type { KeylessCertificate, MockSigstore } from "../../support/signer/mock-sigstore.ts";
import {
  ANNOTATIONS,
  attestationTag,
  cosignAttestationLayer,
  cosignSignatureLayer,
  inTotoStatement,
  MEDIA_TYPES,
  ociManifestWithLayers,
  signatureTag,
  simpleSigningPayload,
} from "../../support/signer/cosign-signatures.ts";
import type { SignatureLayer } from "../../support/signer/cosign-signatures.ts";
import { verifyBundle } from "../../support/signer/reference-verify.ts";

const WORKFLOW = "https://github.com/acme/app/.github/workflows/release.yml@refs/tags/v1";
const ISSUER = "https://token.actions.githubusercontent.com";
const REFERENCE = "registry.example/acme/app";
const DIGEST = `sha256:${createHash("sha256").update("the image manifest").digest("hex")}`;

const pemToBase64Der = (pem: string) => pem.replace(/-----(BEGIN|END) [A-Z ]+-----/g, "").replace(/\s+/g, "");

/** The tlog entry a verifier reconstructs from the dev.sigstore.cosign/bundle annotation (no inclusion proof there). */
function tlogEntryFromAnnotation(annotation: string): Record<string, unknown> {
  const bundle = JSON.parse(annotation) as { SignedEntryTimestamp: string; Payload: { body: string; integratedTime: number; logIndex: number; logID: string } };
  const body = JSON.parse(Buffer.from(bundle.Payload.body, "base64").toString()) as { kind: string; apiVersion: string };
  return {
    logIndex: String(bundle.Payload.logIndex),
    logId: { keyId: Buffer.from(bundle.Payload.logID, "hex").toString("base64") },
    kindVersion: { kind: body.kind, version: body.apiVersion },
    integratedTime: String(bundle.Payload.integratedTime),
    inclusionPromise: { signedEntryTimestamp: bundle.SignedEntryTimestamp },
    canonicalizedBody: bundle.Payload.body,
  };
}

function verificationMaterial(layer: SignatureLayer, version: "0.1" | "0.2", keyHint: string | undefined): Record<string, unknown> {
  const certificate = layer.annotations[ANNOTATIONS.certificate];
  const tlogEntries: Record<string, unknown>[] = [];
  const bundleAnnotation = layer.annotations[ANNOTATIONS.bundle];
  if (bundleAnnotation !== undefined) {
    const entry = tlogEntryFromAnnotation(bundleAnnotation);
    // v0.2 requires an inclusion proof, which cosign's annotation does not carry: take it from the full log entry.
    if (version === "0.2") entry.inclusionProof = rekorEntryToTlogEntry(layer.rekorEntry!).inclusionProof;
    tlogEntries.push(entry);
  }
  const timestamp = layer.annotations[ANNOTATIONS.rfc3161Timestamp];
  return {
    ...(certificate !== undefined ? { x509CertificateChain: { certificates: [{ rawBytes: pemToBase64Der(certificate) }] } } : { publicKey: { hint: keyHint } }),
    tlogEntries,
    timestampVerificationData: { rfc3161Timestamps: timestamp !== undefined ? [{ signedTimestamp: JSON.parse(timestamp).SignedRFC3161Timestamp }] : [] },
  };
}

/** A .sig layer as a message-signature bundle over its blob. */
function signatureLayerToBundle(layer: SignatureLayer, version: "0.1" | "0.2", keyHint?: string): Record<string, unknown> {
  return {
    mediaType: `application/vnd.dev.sigstore.bundle+json;version=${version}`,
    verificationMaterial: verificationMaterial(layer, version, keyHint),
    messageSignature: {
      messageDigest: { algorithm: "SHA2_256", digest: createHash("sha256").update(layer.blob).digest("base64") },
      signature: layer.annotations[ANNOTATIONS.signature],
    },
  };
}

/** An .att layer as a DSSE bundle: the blob is the envelope. */
function attestationLayerToBundle(layer: SignatureLayer, version: "0.1" | "0.2", keyHint?: string): Record<string, unknown> {
  return {
    mediaType: `application/vnd.dev.sigstore.bundle+json;version=${version}`,
    verificationMaterial: verificationMaterial(layer, version, keyHint),
    dsseEnvelope: JSON.parse(layer.blob.toString()),
  };
}

describe("cosign signature layers from the test signer", () => {
  let sigstore: MockSigstore;
  let cert: KeylessCertificate;
  let key: SigningKey;
  const payload = simpleSigningPayload({ dockerReference: REFERENCE, digest: DIGEST });

  before(async () => {
    sigstore = await createMockSigstore();
    cert = await sigstore.issueKeylessCertificate({ subjectAltName: WORKFLOW, issuer: ISSUER });
    key = generateSigningKey("ecdsa-p256");
  });

  test("the simple-signing payload is cosign's", () => {
    assert.deepEqual(JSON.parse(payload.toString()), {
      critical: { identity: { "docker-reference": REFERENCE }, image: { "docker-manifest-digest": DIGEST }, type: "cosign container image signature" },
      optional: null,
    });
    const withOptional = JSON.parse(simpleSigningPayload({ dockerReference: REFERENCE, digest: DIGEST, optional: { env: "prod" } }).toString());
    assert.deepEqual(withOptional.optional, { env: "prod" });
  });

  test("a keyless signature layer (certificate, chain, Rekor bundle, timestamp) verifies as v0.1 and v0.2 bundles", async () => {
    const layer = await cosignSignatureLayer({ payload, keyless: cert, rekor: sigstore, timestamp: sigstore });
    assert.equal(layer.mediaType, MEDIA_TYPES.simpleSigning);
    assert.equal(layer.annotations[ANNOTATIONS.certificate], cert.certificatePem);
    assert.equal(layer.annotations[ANNOTATIONS.chain], cert.chainPem.join(""));
    const body = JSON.parse(Buffer.from(JSON.parse(layer.annotations[ANNOTATIONS.bundle]!).Payload.body, "base64").toString());
    assert.deepEqual(body.spec.data.hash, { algorithm: "sha256", value: createHash("sha256").update(payload).digest("hex") });
    assert.equal(body.spec.signature.content, layer.annotations[ANNOTATIONS.signature]);
    assert.equal(Buffer.from(body.spec.signature.publicKey.content, "base64").toString(), cert.certificatePem);
    for (const version of ["0.1", "0.2"] as const) {
      verifyBundle(sigstore.trustedRoot, signatureLayerToBundle(layer, version), {
        artifact: layer.blob,
        timestampThreshold: 2,
        policy: { subjectAlternativeName: WORKFLOW, extensions: { issuer: ISSUER } },
      });
    }
  });

  test("a key signature with a Rekor entry, and one without (tlog threshold 0)", async () => {
    const keys = trustedPublicKeys([key]);
    const logged = await cosignSignatureLayer({ payload, key, rekor: sigstore });
    assert.equal(logged.annotations[ANNOTATIONS.certificate], undefined);
    verifyBundle(sigstore.trustedRoot, signatureLayerToBundle(logged, "0.1", key.hint), { artifact: payload, keys });
    const body = JSON.parse(Buffer.from(JSON.parse(logged.annotations[ANNOTATIONS.bundle]!).Payload.body, "base64").toString());
    assert.equal(Buffer.from(body.spec.signature.publicKey.content, "base64").toString(), key.publicKeyPem);

    const plain = await cosignSignatureLayer({ payload, key });
    assert.deepEqual(Object.keys(plain.annotations), [ANNOTATIONS.signature]);
    verifyBundle(sigstore.trustedRoot, signatureLayerToBundle(plain, "0.1", key.hint), { artifact: payload, keys, tlogThreshold: 0, timestampThreshold: 0 });
  });

  test("every tamper option breaks verification", async () => {
    // The first check that notices: the Rekor entry and the timestamp still cover the original payload and signature.
    const expected = {
      payload: "TLOG_BODY_ERROR",
      signature: "TIMESTAMP_ERROR",
      signedEntryTimestamp: "TLOG_INCLUSION_PROMISE_ERROR",
      rekorBody: "TLOG_BODY_ERROR",
      timestamp: "TIMESTAMP_ERROR",
    };
    for (const [tamper, code] of Object.entries(expected)) {
      const layer = await cosignSignatureLayer({ payload, keyless: cert, rekor: sigstore, timestamp: sigstore, tamper: { [tamper]: true } });
      assert.throws(
        () => verifyBundle(sigstore.trustedRoot, signatureLayerToBundle(layer, "0.1"), { artifact: layer.blob, timestampThreshold: 2 }),
        { code },
        tamper,
      );
    }
    // Without log or timestamp, a changed payload or signature is caught by the signature check itself.
    const keys = trustedPublicKeys([key]);
    for (const tamper of ["payload", "signature"] as const) {
      const layer = await cosignSignatureLayer({ payload, key, tamper: { [tamper]: true } });
      const verify = () =>
        verifyBundle(sigstore.trustedRoot, signatureLayerToBundle(layer, "0.1", key.hint), {
          artifact: layer.blob,
          keys,
          tlogThreshold: 0,
          timestampThreshold: 0,
        });
      assert.throws(verify, { code: "SIGNATURE_ERROR" }, tamper);
    }
    const noChain = await cosignSignatureLayer({ payload, keyless: cert, tamper: { omitChain: true } });
    assert.equal(noChain.annotations[ANNOTATIONS.chain], undefined);
  });

  test("attestation layers (intoto and dsse Rekor kinds, keyless and key) verify as DSSE bundles", async () => {
    const statement = inTotoStatement({
      subjectName: REFERENCE,
      digest: DIGEST,
      predicateType: "https://slsa.dev/provenance/v1",
      predicate: { builder: "ci" },
    });
    for (const rekorKind of ["intoto", "dsse"] as const) {
      const layer = await cosignAttestationLayer({ statement, keyless: cert, rekor: sigstore, rekorKind });
      assert.equal(layer.mediaType, MEDIA_TYPES.dsseEnvelope);
      assert.equal(layer.annotations[ANNOTATIONS.predicateType], "https://slsa.dev/provenance/v1");
      assert.equal(layer.annotations[ANNOTATIONS.certificate], cert.certificatePem);
      const envelope = JSON.parse(layer.blob.toString());
      assert.equal(envelope.payloadType, "application/vnd.in-toto+json");
      assert.deepEqual(JSON.parse(Buffer.from(envelope.payload, "base64").toString()), statement);
      for (const version of ["0.1", "0.2"] as const) {
        verifyBundle(sigstore.trustedRoot, attestationLayerToBundle(layer, version), { policy: { subjectAlternativeName: WORKFLOW } });
      }
    }
    const keyed = await cosignAttestationLayer({ statement, key, rekor: sigstore });
    verifyBundle(sigstore.trustedRoot, attestationLayerToBundle(keyed, "0.1", key.hint), { keys: trustedPublicKeys([key]) });
    const tampered = await cosignAttestationLayer({ statement, key, rekor: sigstore, tamper: { payload: true } });
    assert.throws(() => verifyBundle(sigstore.trustedRoot, attestationLayerToBundle(tampered, "0.1", key.hint), { keys: trustedPublicKeys([key]) }));
  });

  test("an attestation's RFC 3161 timestamp covers the envelope (cosign's rule), not the signature", async () => {
    const statement = inTotoStatement({ subjectName: REFERENCE, digest: DIGEST, predicateType: "https://example/predicate" });
    const layer = await cosignAttestationLayer({ statement, keyless: cert, timestamp: sigstore });
    const timestamp = RFC3161Timestamp.parse(Buffer.from(JSON.parse(layer.annotations[ANNOTATIONS.rfc3161Timestamp]!).SignedRFC3161Timestamp, "base64"));
    timestamp.tstInfo.verify(layer.blob);
    assert.throws(() => timestamp.tstInfo.verify(Buffer.from(JSON.parse(layer.blob.toString()).signatures[0].sig, "base64")));
  });

  test("several signatures in one manifest; tags", async () => {
    const other = generateSigningKey("ed25519");
    const layers = [
      await cosignSignatureLayer({ payload, keyless: cert, rekor: sigstore }),
      await cosignSignatureLayer({ payload, key }),
      await cosignSignatureLayer({ payload, key: other }),
    ];
    const built = ociManifestWithLayers(layers);
    const manifest = JSON.parse(built.manifest.toString());
    assert.equal(manifest.mediaType, "application/vnd.oci.image.manifest.v1+json");
    assert.equal(manifest.config.mediaType, "application/vnd.oci.image.config.v1+json");
    assert.equal(manifest.layers.length, 3);
    for (const [i, layer] of layers.entries()) {
      assert.deepEqual(manifest.layers[i].annotations, layer.annotations);
      assert.equal(manifest.layers[i].mediaType, MEDIA_TYPES.simpleSigning);
    }
    // Identical payloads share one blob; the config is the other.
    assert.equal(built.blobs.size, 2);
    for (const [digest, bytes] of built.blobs) assert.equal(digest, `sha256:${createHash("sha256").update(bytes).digest("hex")}`);
    assert.equal(built.digest, `sha256:${createHash("sha256").update(built.manifest).digest("hex")}`);
    assert.equal(signatureTag(DIGEST), `sha256-${DIGEST.slice(7)}.sig`);
    assert.equal(attestationTag(DIGEST), `sha256-${DIGEST.slice(7)}.att`);
  });
});
