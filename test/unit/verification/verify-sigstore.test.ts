// Keyless and logged signatures through the verifier, made offline by the project's test signer (a mock
// Fulcio CA, Rekor log, CT log and TSA, with a trusted_root.json for them): cosign `.sig` layers and Sigstore
// bundles (DSSE and message signature, v0.1–v0.3), judged against attestor entries the way admission does.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { before, describe, test } from "node:test";
import type { SigstoreTrust } from "../../../src/core/trust-root/trust-root-kind.ts";
import { bundleToItem, cosignLayerToItem } from "../../../src/verification/signed-item.ts";
import { imageBinding, publicKeyFromPem, verifyItem } from "../../../src/verification/verify-entry.ts";
import { cosignSignatureLayer, simpleSigningPayload } from "../../support/signer/cosign-signatures.ts";
import { generateSigningKey, type SigningKey } from "../../support/signer/keys.ts";
import { createMockSigstore, type MockSigstore } from "../../support/signer/mock-sigstore.ts";
import { attestationBundle, imageSignatureBundle, messageSignatureBundle } from "../../support/signer/sigstore-bundles.ts";
import { leafAttestorsWith, mockTrustRoot } from "../../support/verification-fixtures.ts";

const WORKFLOW = "https://github.com/acme/app/.github/workflows/release.yml@refs/tags/v1";
const ISSUER = "https://token.actions.githubusercontent.com";
const NAME = "registry.example.com/acme/app";
const MANIFEST = Buffer.from(JSON.stringify({ schemaVersion: 2, mediaType: "application/vnd.oci.image.manifest.v1+json", layers: [] }));
const DIGEST = `sha256:${createHash("sha256").update(MANIFEST).digest("hex")}`;
const OTHER = `sha256:${createHash("sha256").update("other").digest("hex")}`;

let sigstore: MockSigstore;
let stranger: MockSigstore;
let root: SigstoreTrust;
let strangerRoot: SigstoreTrust;
let key: SigningKey;

const keyless = (subject = "https://github.com/acme/app/*", extra = "") =>
  leafAttestorsWith(`{keyless: {subject: "${subject}", issuer: "${ISSUER}", trustRoot: mock${extra}}}`)[0]!;

before(async () => {
  sigstore = await createMockSigstore({ name: "mock" });
  stranger = await createMockSigstore({ name: "stranger" });
  root = mockTrustRoot(sigstore, "mock").sigstore!;
  strangerRoot = mockTrustRoot(stranger, "mock").sigstore!;
  key = generateSigningKey("ecdsa-p256");
});

describe("cosign .sig layers", () => {
  test("keyless, logged in Rekor: verified, with the identity and the log index as evidence", async () => {
    const cert = await sigstore.issueKeylessCertificate({ subjectAltName: WORKFLOW, issuer: ISSUER, extensions: { "1.3.6.1.4.1.57264.1.2": "push" } });
    const layer = await cosignSignatureLayer({ payload: simpleSigningPayload({ dockerReference: NAME, digest: DIGEST }), keyless: cert, rekor: sigstore });
    const item = cosignLayerToItem(layer.blob, layer.annotations, "layer 0");
    const outcome = verifyItem(item, keyless(), { trustRoot: root, binding: imageBinding(DIGEST) });
    assert.ok(outcome.ok, outcome.ok ? "" : outcome.reason);
    assert.equal(outcome.evidence.signer, `subject ${WORKFLOW} issuer ${ISSUER}`);
    assert.match(outcome.evidence.tlogIndex ?? "", /^\d+$/);

    const withExtension = verifyItem(item, keyless(undefined, ", additionalExtensions: {githubWorkflowTrigger: push}"), {
      trustRoot: root,
      binding: imageBinding(DIGEST),
    });
    assert.ok(withExtension.ok);
    const wrongExtension = verifyItem(item, keyless(undefined, ", additionalExtensions: {githubWorkflowTrigger: pull_request}"), {
      trustRoot: root,
      binding: imageBinding(DIGEST),
    });
    assert.deepEqual(wrongExtension, { ok: false, reason: 'certificate extension githubWorkflowTrigger is "push", not "pull_request"' });
  });

  test("keyless with another identity, or from another Sigstore, or for another digest, is refused with the reason", async () => {
    const cert = await sigstore.issueKeylessCertificate({
      subjectAltName: "https://github.com/evil/app/.github/workflows/x.yml@refs/heads/main",
      issuer: ISSUER,
    });
    const layer = await cosignSignatureLayer({ payload: simpleSigningPayload({ dockerReference: NAME, digest: DIGEST }), keyless: cert, rekor: sigstore });
    const item = cosignLayerToItem(layer.blob, layer.annotations, "layer 0");
    assert.deepEqual(verifyItem(item, keyless(), { trustRoot: root, binding: imageBinding(DIGEST) }), {
      ok: false,
      reason: 'certificate identity "https://github.com/evil/app/.github/workflows/x.yml@refs/heads/main" does not match "https://github.com/acme/app/*"',
    });
    const foreign = verifyItem(item, keyless("*"), { trustRoot: strangerRoot, binding: imageBinding(DIGEST) });
    assert.equal(foreign.ok, false);
    assert.match(foreign.ok ? "" : foreign.reason, /certificate|transparency log/i);

    const good = await sigstore.issueKeylessCertificate({ subjectAltName: WORKFLOW, issuer: ISSUER });
    const elsewhere = await cosignSignatureLayer({ payload: simpleSigningPayload({ dockerReference: NAME, digest: OTHER }), keyless: good, rekor: sigstore });
    assert.deepEqual(verifyItem(cosignLayerToItem(elsewhere.blob, elsewhere.annotations, "l"), keyless(), { trustRoot: root, binding: imageBinding(DIGEST) }), {
      ok: false,
      reason: `signs ${OTHER}, not ${DIGEST}`,
    });
  });

  test("keyless with the right identity from another OIDC issuer is refused, as a layer and as a bundle", async () => {
    const elsewhere = "https://accounts.example.org";
    const cert = await sigstore.issueKeylessCertificate({ subjectAltName: WORKFLOW, issuer: elsewhere });
    const layer = await cosignSignatureLayer({ payload: simpleSigningPayload({ dockerReference: NAME, digest: DIGEST }), keyless: cert, rekor: sigstore });
    const refusal = { ok: false, reason: `certificate issuer "${elsewhere}" does not match "${ISSUER}"` };
    assert.deepEqual(
      verifyItem(cosignLayerToItem(layer.blob, layer.annotations, "layer 0"), keyless(), { trustRoot: root, binding: imageBinding(DIGEST) }),
      refusal,
    );
    const dsse = await imageSignatureBundle({ name: NAME, digest: DIGEST, keyless: cert, rekor: sigstore, version: "0.3" });
    assert.deepEqual(verifyItem(bundleToItem(dsse.bytes, "referrer", undefined), keyless(), { trustRoot: root, binding: imageBinding(DIGEST) }), refusal);
    const message = await messageSignatureBundle({ artifact: MANIFEST, keyless: cert, rekor: sigstore, version: "0.3" });
    assert.deepEqual(verifyItem(bundleToItem(message.bytes, "referrer", MANIFEST), keyless(), { trustRoot: root, binding: imageBinding(DIGEST) }), refusal);
  });

  test("a key signature with a Rekor entry verifies without ignoreTlog; a tampered entry timestamp does not", async () => {
    const entry = leafAttestorsWith(`{staticKey: {name: release, trustRoot: mock, key: ${JSON.stringify(key.publicKeyPem)}}}`)[0]!;
    const payload = simpleSigningPayload({ dockerReference: NAME, digest: DIGEST });
    const logged = await cosignSignatureLayer({ payload, key, rekor: sigstore, hash: "sha256" });
    const ok = verifyItem(cosignLayerToItem(logged.blob, logged.annotations, "l"), entry, {
      trustRoot: root,
      key: publicKeyFromPem(key.publicKeyPem),
      binding: imageBinding(DIGEST),
    });
    assert.ok(ok.ok, ok.ok ? "" : ok.reason);
    const tampered = await cosignSignatureLayer({ payload, key, rekor: sigstore, hash: "sha256", tamper: { signedEntryTimestamp: true } });
    const bad = verifyItem(cosignLayerToItem(tampered.blob, tampered.annotations, "l"), entry, {
      trustRoot: root,
      key: publicKeyFromPem(key.publicKeyPem),
      binding: imageBinding(DIGEST),
    });
    assert.equal(bad.ok, false);
    assert.match(bad.ok ? "" : bad.reason, /transparency log|TLOG/);
  });

  test("keyless with only a timestamp-authority timestamp verifies when ignoreTlog says the log is not needed", async () => {
    const cert = await sigstore.issueKeylessCertificate({ subjectAltName: WORKFLOW, issuer: ISSUER });
    const layer = await cosignSignatureLayer({ payload: simpleSigningPayload({ dockerReference: NAME, digest: DIGEST }), keyless: cert, timestamp: sigstore });
    const item = cosignLayerToItem(layer.blob, layer.annotations, "l");
    assert.equal(verifyItem(item, keyless(), { trustRoot: root, binding: imageBinding(DIGEST) }).ok, false);
    const outcome = verifyItem(item, keyless(undefined, ", ignoreTlog: true"), { trustRoot: root, binding: imageBinding(DIGEST) });
    assert.ok(outcome.ok, outcome.ok ? "" : outcome.reason);
  });
});

describe("Sigstore bundles found as referrers", () => {
  for (const version of ["0.1", "0.2", "0.3"] as const) {
    test(`a keyless DSSE image signature, bundle v${version}, verifies for its digest only`, async () => {
      const cert = await sigstore.issueKeylessCertificate({ subjectAltName: WORKFLOW, issuer: ISSUER });
      const built = await imageSignatureBundle({ name: NAME, digest: DIGEST, keyless: cert, rekor: sigstore, version });
      const item = bundleToItem(built.bytes, "referrer", undefined);
      const outcome = verifyItem(item, keyless(), { trustRoot: root, binding: imageBinding(DIGEST) });
      assert.ok(outcome.ok, outcome.ok ? "" : outcome.reason);
      assert.equal(outcome.evidence.format, "sigstore-bundle");
      assert.deepEqual(verifyItem(item, keyless(), { trustRoot: root, binding: imageBinding(OTHER) }), {
        ok: false,
        reason: `the statement's subject is not ${OTHER}`,
      });
    });
  }

  test("an attestation is not an image signature", async () => {
    const cert = await sigstore.issueKeylessCertificate({ subjectAltName: WORKFLOW, issuer: ISSUER });
    const built = await attestationBundle({
      name: NAME,
      digest: DIGEST,
      predicateType: "https://slsa.dev/provenance/v1",
      predicate: {},
      keyless: cert,
      rekor: sigstore,
    });
    const outcome = verifyItem(bundleToItem(built.bytes, "referrer", undefined), keyless(), { trustRoot: root, binding: imageBinding(DIGEST) });
    assert.deepEqual(outcome, {
      ok: false,
      reason: 'an attestation of type "https://slsa.dev/provenance/v1", not an image signature (https://sigstore.dev/cosign/sign/v1)',
    });
  });

  test("a key-signed bundle without a log entry verifies only with ignoreTlog", async () => {
    const built = await imageSignatureBundle({ name: NAME, digest: DIGEST, key, version: "0.3" });
    const item = bundleToItem(built.bytes, "referrer", undefined);
    const cx = { trustRoot: root, key: publicKeyFromPem(key.publicKeyPem), binding: imageBinding(DIGEST) };
    const strict = leafAttestorsWith(`{staticKey: {trustRoot: mock, key: ${JSON.stringify(key.publicKeyPem)}}}`)[0]!;
    const lenient = leafAttestorsWith(`{staticKey: {ignoreTlog: true, key: ${JSON.stringify(key.publicKeyPem)}}}`)[0]!;
    assert.deepEqual(verifyItem(item, strict, cx), {
      ok: false,
      reason: "signed by this key, but without a transparency-log entry (ignoreTlog: true accepts that)",
    });
    assert.ok(verifyItem(item, lenient, cx).ok);
  });

  test("a message-signature bundle signs the image manifest itself", async () => {
    const cert = await sigstore.issueKeylessCertificate({ subjectAltName: WORKFLOW, issuer: ISSUER });
    const built = await messageSignatureBundle({ artifact: MANIFEST, keyless: cert, rekor: sigstore, version: "0.3" });
    const outcome = verifyItem(bundleToItem(built.bytes, "referrer", MANIFEST), keyless(), { trustRoot: root, binding: imageBinding(DIGEST) });
    assert.ok(outcome.ok, outcome.ok ? "" : outcome.reason);
    const other = verifyItem(bundleToItem(built.bytes, "referrer", MANIFEST), keyless(), { trustRoot: root, binding: imageBinding(OTHER) });
    assert.equal(other.ok, false);
  });

  test("a message-signature bundle whose message digest is not the image's is refused, though its signature verifies", async () => {
    const built = await messageSignatureBundle({ artifact: MANIFEST, key, version: "0.3", tamper: { payload: true } });
    const entry = leafAttestorsWith(`{staticKey: {ignoreTlog: true, key: ${JSON.stringify(key.publicKeyPem)}}}`)[0]!;
    const outcome = verifyItem(bundleToItem(built.bytes, "referrer", MANIFEST), entry, {
      trustRoot: root,
      key: publicKeyFromPem(key.publicKeyPem),
      binding: imageBinding(DIGEST),
    });
    assert.deepEqual(outcome, { ok: false, reason: `the bundle's message digest is not ${DIGEST}` });
    const honest = await messageSignatureBundle({ artifact: MANIFEST, key, version: "0.3" });
    const accepted = verifyItem(bundleToItem(honest.bytes, "referrer", MANIFEST), entry, {
      trustRoot: root,
      key: publicKeyFromPem(key.publicKeyPem),
      binding: imageBinding(DIGEST),
    });
    assert.ok(accepted.ok, accepted.ok ? "" : accepted.reason);
  });

  test("a message signature given only the artifact's sha256 verifies against it, and against no other digest", async () => {
    const cert = await sigstore.issueKeylessCertificate({ subjectAltName: WORKFLOW, issuer: ISSUER });
    const built = await messageSignatureBundle({ artifact: MANIFEST, keyless: cert, rekor: sigstore, version: "0.3" });
    const item = bundleToItem(built.bytes, "bundle", undefined);
    const digestOf = (d: string) => Buffer.from(d.slice("sha256:".length), "hex");
    const outcome = verifyItem(item, keyless(), { trustRoot: root, binding: () => undefined, artifactDigest: digestOf(DIGEST) });
    assert.ok(outcome.ok, outcome.ok ? "" : outcome.reason);
    assert.equal(outcome.evidence.signer, `subject ${WORKFLOW} issuer ${ISSUER}`);
    assert.deepEqual(verifyItem(item, keyless(), { trustRoot: root, binding: () => undefined, artifactDigest: digestOf(OTHER) }), {
      ok: false,
      reason: "the bundle's message digest is not the artifact's",
    });
    const forged = await messageSignatureBundle({ artifact: MANIFEST, keyless: cert, rekor: sigstore, version: "0.3", tamper: { signature: true } });
    const refused = verifyItem(bundleToItem(forged.bytes, "bundle", undefined), keyless(), {
      trustRoot: root,
      binding: () => undefined,
      artifactDigest: digestOf(DIGEST),
    });
    assert.equal(refused.ok, false);
  });

  test("malformed bundles are reported, not thrown past the caller", () => {
    assert.throws(() => bundleToItem(Buffer.from("{"), "referrer x", undefined), /referrer x: the bundle is not JSON/);
    assert.throws(
      () => bundleToItem(Buffer.from('{"mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json"}'), "referrer x", undefined),
      /referrer x: not a valid Sigstore bundle/,
    );
  });
});
