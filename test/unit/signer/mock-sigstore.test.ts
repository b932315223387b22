// The test signer's mock Sigstore instance: its trusted root is accepted by protobuf-specs and @sigstore/verify,
// its log is a real Merkle tree (every entry's inclusion proof checks against its signed checkpoint), and keys.ts
// keys sign the way @sigstore/verify expects.

import { before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { createHash, verify, X509Certificate } from "node:crypto";
import { json } from "@sigstore/core";
import { TrustedRoot } from "@sigstore/protobuf-specs";
import { toTrustMaterial } from "@sigstore/verify";
import { generateSigningKey, signBytes, trustedPublicKeys } from "../../support/signer/keys.ts";
import { createMockSigstore, rekorEntryToTlogEntry, TRUSTED_ROOT_MEDIA_TYPE } from "../../support/signer/mock-sigstore.ts";
import type { MockSigstore } from "../../support/signer/mock-sigstore.ts";
import { messageSignatureBundle } from "../../support/signer/sigstore-bundles.ts";
import { verifyBundle } from "../../support/signer/reference-verify.ts";

describe("mock Sigstore instance", () => {
  let sigstore: MockSigstore;
  before(async () => {
    sigstore = await createMockSigstore();
  });

  test("the trusted root parses and becomes trust material", () => {
    assert.equal(sigstore.trustedRoot.mediaType, TRUSTED_ROOT_MEDIA_TYPE);
    const root = TrustedRoot.fromJSON(sigstore.trustedRoot);
    assert.equal(root.certificateAuthorities[0]!.certChain!.certificates.length, 2);
    assert.equal(root.timestampAuthorities[0]!.certChain!.certificates.length, 2);
    assert.deepEqual(root.tlogs[0]!.logId!.keyId, createHash("sha256").update(root.tlogs[0]!.publicKey!.rawBytes!).digest());
    assert.deepEqual(root.tlogs[0]!.logId!.keyId, sigstore.rekor.logId);
    const trust = toTrustMaterial(root);
    assert.equal(trust.certificateAuthorities.length, 1);
    assert.equal(trust.ctlogs.length, 1);
  });

  test("keyless certificates chain to the CA and carry Fulcio's extensions", async () => {
    const cert = await sigstore.issueKeylessCertificate({
      subjectAltName: "https://github.com/acme/app/.github/workflows/ci.yml@refs/heads/main",
      issuer: "https://token.actions.githubusercontent.com",
      extensions: { "1.3.6.1.4.1.57264.1.6": "refs/heads/main", "1.3.6.1.4.1.57264.1.14": "refs/heads/main" },
    });
    const leaf = new X509Certificate(cert.certificatePem);
    const intermediate = new X509Certificate(cert.chainPem[0]!);
    const root = new X509Certificate(cert.chainPem[1]!);
    assert.ok(leaf.verify(intermediate.publicKey));
    assert.ok(intermediate.verify(root.publicKey));
    assert.equal(leaf.subjectAltName, "URI:https://github.com/acme/app/.github/workflows/ci.yml@refs/heads/main");
    assert.equal(leaf.subject ?? "", "", "Fulcio leaves have an empty subject");
    assert.ok(leaf.publicKey.equals(cert.key.publicKey));
    const der = cert.certificateDer;
    // Legacy raw-string (.6) vs DER UTF8String (.14) extension values.
    assert.ok(der.includes(Buffer.from("refs/heads/main")));
    assert.ok(der.includes(Buffer.concat([Buffer.from([0x0c, 15]), Buffer.from("refs/heads/main")])));
    const email = await sigstore.issueKeylessCertificate({ subjectAltName: "dev@acme.example", issuer: "https://accounts.google.com" });
    assert.equal(new X509Certificate(email.certificatePem).subjectAltName, "email:dev@acme.example");
  });

  test("log entries: sequential indexes, SETs and inclusion proofs that verify against their checkpoints", async () => {
    const key = generateSigningKey();
    const first = sigstore.logEntry({ apiVersion: "0.0.1", kind: "test", spec: { n: 0 } });
    const entries = [first];
    for (let n = 1; n < 7; n++) entries.push(sigstore.logEntry({ apiVersion: "0.0.1", kind: "test", spec: { n } }));
    entries.forEach((entry, i) => {
      assert.equal(entry.logIndex, first.logIndex + i);
      assert.equal(entry.verification.inclusionProof.treeSize, entry.logIndex + 1);
      const setPayload = json.canonicalize({ body: entry.body, integratedTime: entry.integratedTime, logIndex: entry.logIndex, logID: entry.logID });
      assert.ok(verify("sha256", Buffer.from(setPayload), sigstore.rekor.publicKey, Buffer.from(entry.verification.signedEntryTimestamp, "base64")));
    });
    // Each entry, in trees of different sizes, verifies through @sigstore/verify's Merkle and checkpoint code.
    const artifact = Buffer.from("logged artifact");
    for (let n = 0; n < 5; n++) {
      const built = await messageSignatureBundle({ artifact, key, rekor: sigstore, inclusionPromise: false });
      const tlog = (built.json as any).verificationMaterial.tlogEntries[0];
      assert.equal(tlog.inclusionPromise, undefined);
      assert.ok(tlog.inclusionProof.hashes.length > 0 || tlog.inclusionProof.treeSize === "1");
      verifyBundle(sigstore.trustedRoot, built.bytes, {
        artifact,
        keys: trustedPublicKeys([key]),
        timestampThreshold: 0,
      });
    }
    const converted = rekorEntryToTlogEntry(first, { inclusionPromise: false });
    assert.equal(converted.inclusionPromise, undefined);
    assert.equal(converted.logIndex, String(first.logIndex));
  });

  test("keys: every algorithm signs what node:crypto verifies with its default digest", () => {
    const data = Buffer.from("data");
    for (const algorithm of ["ecdsa-p256", "ecdsa-p384", "ecdsa-p521", "rsa-2048", "ed25519"] as const) {
      const key = generateSigningKey(algorithm);
      const expected = { "ecdsa-p256": "sha256", "ecdsa-p384": "sha384", "ecdsa-p521": "sha512", "rsa-2048": "sha256", ed25519: null }[algorithm];
      assert.equal(key.hash, expected);
      assert.ok(verify(key.hash, data, key.publicKey, signBytes(key, data)), algorithm);
      assert.ok(key.publicKeyPem.startsWith("-----BEGIN PUBLIC KEY-----"));
      assert.equal(key.hint, createHash("sha256").update(key.publicKeyDer).digest("base64"));
    }
  });
});
