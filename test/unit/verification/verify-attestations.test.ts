// Attestations as the verifier sees them (the building blocks of attestation policies): cosign `.att` layers
// and DSSE bundles, signed by the test signer, accepted only for their predicate type and the admitted digest.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { before, test } from "node:test";
import type { SigstoreTrust } from "../../../src/core/trust-root/trust-root-kind.ts";
import { bundleToItem, cosignAttestationToItem, SignatureFormatError } from "../../../src/verification/signed-item.ts";
import { attestationBinding, imageBinding, inTotoStatement, publicKeyFromPem, verifyItem } from "../../../src/verification/verify-entry.ts";
import { cosignAttestationLayer, inTotoStatement as statementFor, signDsseEnvelope } from "../../support/signer/cosign-signatures.ts";
import { generateSigningKey, type SigningKey } from "../../support/signer/keys.ts";
import { createMockSigstore, type MockSigstore } from "../../support/signer/mock-sigstore.ts";
import { attestationBundle } from "../../support/signer/sigstore-bundles.ts";
import { leafAttestorsWith, mockTrustRoot } from "../../support/verification-fixtures.ts";

const SLSA = "https://slsa.dev/provenance/v1";
const ISSUER = "https://token.actions.githubusercontent.com";
const WORKFLOW = "https://github.com/acme/app/.github/workflows/release.yml@refs/tags/v1";
const DIGEST = `sha256:${createHash("sha256").update("image").digest("hex")}`;
const OTHER = `sha256:${createHash("sha256").update("other").digest("hex")}`;
let sigstore: MockSigstore;
let root: SigstoreTrust;
let key: SigningKey;

before(async () => {
  sigstore = await createMockSigstore({ name: "att" });
  root = mockTrustRoot(sigstore, "att").sigstore!;
  key = generateSigningKey("ecdsa-p256");
});

test("a key-signed cosign .att layer logged in Rekor verifies for its predicate type and digest; its statement is readable", async () => {
  const statement = statementFor({ subjectName: "r.example/app", digest: DIGEST, predicateType: SLSA, predicate: { buildDefinition: { buildType: "x" } } });
  const layer = await cosignAttestationLayer({ statement, key, rekor: sigstore });
  const item = cosignAttestationToItem(layer.blob, layer.annotations, "att layer 0");
  const keyEntry = leafAttestorsWith(`{staticKey: {trustRoot: att, key: ${JSON.stringify(key.publicKeyPem)}}}`)[0]!;
  const cx = { trustRoot: root, key: publicKeyFromPem(key.publicKeyPem) };
  const ok = verifyItem(item, keyEntry, { ...cx, binding: attestationBinding(DIGEST, SLSA) });
  assert.ok(ok.ok, ok.ok ? "" : ok.reason);
  assert.equal(ok.evidence.format, "cosign-attestation");
  const read = inTotoStatement(item);
  assert.ok("statement" in read);
  assert.deepEqual(read.statement.predicate, { buildDefinition: { buildType: "x" } });

  assert.deepEqual(verifyItem(item, keyEntry, { ...cx, binding: attestationBinding(OTHER, SLSA) }), {
    ok: false,
    reason: `the statement's subject is not ${OTHER}`,
  });
  assert.deepEqual(verifyItem(item, keyEntry, { ...cx, binding: attestationBinding(DIGEST, "https://example.com/other/v1") }), {
    ok: false,
    reason: `a statement of type "${SLSA}", not https://example.com/other/v1`,
  });
  assert.equal(verifyItem(item, keyEntry, { ...cx, binding: imageBinding(DIGEST) }).ok, false, "an attestation is not an image signature");
  const otherKey = generateSigningKey("ecdsa-p256");
  const foreign = verifyItem(item, leafAttestorsWith(`{staticKey: {trustRoot: att, key: ${JSON.stringify(otherKey.publicKeyPem)}}}`)[0]!, {
    trustRoot: root,
    key: publicKeyFromPem(otherKey.publicKeyPem),
    binding: attestationBinding(DIGEST, SLSA),
  });
  assert.equal(foreign.ok, false);
});

test("a keyless attestation bundle (referrer) verifies for the identity; a tampered payload does not", async () => {
  const cert = await sigstore.issueKeylessCertificate({ subjectAltName: WORKFLOW, issuer: ISSUER });
  const built = await attestationBundle({ name: "r.example/app", digest: DIGEST, predicateType: SLSA, predicate: {}, keyless: cert, rekor: sigstore });
  const keyless = leafAttestorsWith(`{keyless: {subject: "https://github.com/acme/*", issuer: "${ISSUER}", trustRoot: att}}`)[0]!;
  const ok = verifyItem(bundleToItem(built.bytes, "referrer", undefined), keyless, { trustRoot: root, binding: attestationBinding(DIGEST, SLSA) });
  assert.ok(ok.ok, ok.ok ? "" : ok.reason);
  const tampered = await attestationBundle({
    name: "r.example/app",
    digest: DIGEST,
    predicateType: SLSA,
    predicate: {},
    keyless: cert,
    rekor: sigstore,
    tamper: { payload: true },
  });
  assert.equal(
    verifyItem(bundleToItem(tampered.bytes, "referrer", undefined), keyless, { trustRoot: root, binding: attestationBinding(DIGEST, SLSA) }).ok,
    false,
  );
});

test("malformed .att layers are SignatureFormatErrors naming the layer", () => {
  assert.throws(
    () => cosignAttestationToItem(Buffer.from("{"), {}, "L"),
    (e: unknown) => e instanceof SignatureFormatError && /L: the DSSE envelope is not JSON/.test(e.message),
  );
  assert.throws(() => cosignAttestationToItem(Buffer.from('{"payload": 1}'), {}, "L"), /L: not a DSSE envelope/);
});

test("a correctly signed envelope whose payload is not an in-toto statement is refused with the reason", () => {
  const keyEntry = leafAttestorsWith(`{staticKey: {ignoreTlog: true, key: ${JSON.stringify(key.publicKeyPem)}}}`)[0]!;
  const cx = { trustRoot: root, key: publicKeyFromPem(key.publicKeyPem), binding: attestationBinding(DIGEST, SLSA) };
  const payloads: Array<[Buffer, string | undefined, RegExp]> = [
    [Buffer.from("<xml>not json</xml>"), undefined, /the in-toto statement is not JSON/],
    [Buffer.from("[1, 2]"), undefined, /unknown in-toto statement type null|not an object/],
    [Buffer.from('{"_type": "https://example.com/Statement/v9"}'), undefined, /unknown in-toto statement type/],
    [Buffer.from("{}"), "text/plain", /DSSE payload type "text\/plain" is not an in-toto statement/],
  ];
  for (const [payload, payloadType, reason] of payloads) {
    const { envelope } = signDsseEnvelope(key, payload, payloadType ? { payloadType } : {});
    const item = cosignAttestationToItem(Buffer.from(JSON.stringify(envelope)), {}, "L");
    const outcome = verifyItem(item, keyEntry, cx);
    assert.equal(outcome.ok, false);
    assert.match(outcome.ok ? "" : outcome.reason, reason);
  }
});
