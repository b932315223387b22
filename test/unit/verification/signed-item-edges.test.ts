// Turning what a registry holds into the one form the verifier takes: cosign `.sig` and `.att` layers and
// referrer bundles. What each annotation becomes in the bundle, and the error (code malformed-signature, with
// the layer's location) for each way an annotation can be malformed.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { test } from "node:test";
import { BUNDLE_MEDIA_TYPES, bundleToItem, cosignAttestationToItem, cosignLayerToItem, SignatureFormatError } from "../../../src/verification/signed-item.ts";

const LOC = "r.example/app:sha256-ab.sig layer 0";
const SIG = "dev.cosignproject.cosign/signature";
const CERT = "dev.sigstore.cosign/certificate";
const CHAIN = "dev.sigstore.cosign/chain";
const REKOR = "dev.sigstore.cosign/bundle";
const TSA = "dev.sigstore.cosign/rfc3161timestamp";
const payload = Buffer.from('{"critical":{}}');
const signature = Buffer.from("a signature").toString("base64");

/** A PEM block around these DER bytes, wrapped the way PEM files are. */
const pem = (der: Buffer) => `-----BEGIN CERTIFICATE-----\n${der.toString("base64").replace(/(.{8})/g, "$1\n")}\n-----END CERTIFICATE-----\n`;
const leafDer = Buffer.from("leaf certificate bytes");
const intermediateDer = Buffer.from("intermediate certificate bytes");
const rootDer = Buffer.from("root certificate bytes");

function malformed(fn: () => unknown, message: string) {
  assert.throws(fn, (e: unknown) => {
    assert.ok(e instanceof SignatureFormatError);
    assert.equal(e.code, "malformed-signature");
    assert.equal(e.message, message);
    return true;
  });
}

const entryBody = Buffer.from(JSON.stringify({ kind: "hashedrekord", apiVersion: "0.0.1", spec: {} })).toString("base64");
const rekor = (over: { SignedEntryTimestamp?: unknown; Payload?: Record<string, unknown> | null } = {}) =>
  JSON.stringify({
    SignedEntryTimestamp: "SETSET==",
    ...over,
    Payload: over.Payload === null ? undefined : { body: entryBody, integratedTime: 1_700_000_000, logIndex: 42, logID: "c0ffee", ...over.Payload },
  });

test("a key-signed .sig layer becomes a message-signature bundle over its payload", () => {
  const item = cosignLayerToItem(payload, { [SIG]: signature }, LOC);
  assert.equal(item.format, "cosign-signature");
  assert.equal(item.location, LOC);
  assert.deepEqual(item.artifact, payload);
  assert.equal(item.bundle.mediaType, "application/vnd.dev.sigstore.bundle+json;version=0.1");
  assert.deepEqual(item.bundle.verificationMaterial.content, { $case: "publicKey", publicKey: { hint: "" } });
  assert.deepEqual(item.bundle.verificationMaterial.tlogEntries, []);
  assert.deepEqual(item.bundle.verificationMaterial.timestampVerificationData, { rfc3161Timestamps: [] });
  assert.ok(item.bundle.content.$case === "messageSignature");
  assert.deepEqual(item.bundle.content.messageSignature.messageDigest!.digest, createHash("sha256").update(payload).digest());
  assert.deepEqual(item.bundle.content.messageSignature.signature, Buffer.from("a signature"));
});

test("a .sig layer without a signature, or with one that is not base64, is malformed", () => {
  malformed(() => cosignLayerToItem(payload, {}, LOC), `${LOC}: no ${SIG} annotation`);
  malformed(() => cosignLayerToItem(payload, { [SIG]: "" }, LOC), `${LOC}: no ${SIG} annotation`);
  malformed(() => cosignLayerToItem(payload, { [SIG]: "not base64!" }, LOC), `${LOC}: ${SIG} is not base64`);
});

test("a keyless .sig layer carries its certificate then every certificate of its chain, in order", () => {
  const item = cosignLayerToItem(payload, { [SIG]: signature, [CERT]: pem(leafDer), [CHAIN]: `${pem(intermediateDer)}${pem(rootDer)}` }, LOC);
  const content = item.bundle.verificationMaterial.content;
  assert.ok(content?.$case === "x509CertificateChain");
  assert.deepEqual(
    content.x509CertificateChain.certificates.map((c) => c.rawBytes),
    [leafDer, intermediateDer, rootDer],
  );
  const alone = cosignLayerToItem(payload, { [SIG]: signature, [CERT]: pem(leafDer) }, LOC).bundle.verificationMaterial.content;
  assert.ok(alone?.$case === "x509CertificateChain");
  assert.deepEqual(
    alone.x509CertificateChain.certificates.map((c) => c.rawBytes),
    [leafDer],
  );
});

test("a certificate annotation that is not PEM, or whose PEM body is not base64, is malformed", () => {
  malformed(() => cosignLayerToItem(payload, { [SIG]: signature, [CERT]: "MIIB" }, LOC), `${LOC}: ${CERT} is not a PEM certificate`);
  malformed(
    () => cosignLayerToItem(payload, { [SIG]: signature, [CERT]: "-----BEGIN CERTIFICATE-----\n!!\n-----END CERTIFICATE-----" }, LOC),
    `${LOC}: certificate is not base64`,
  );
});

test("cosign's Rekor bundle annotation becomes the bundle's tlog entry with its inclusion promise", () => {
  const item = cosignLayerToItem(payload, { [SIG]: signature, [REKOR]: rekor() }, LOC);
  const [entry, ...more] = item.bundle.verificationMaterial.tlogEntries;
  assert.equal(more.length, 0);
  assert.equal(entry!.logIndex, "42");
  assert.equal(entry!.integratedTime, "1700000000");
  assert.deepEqual(entry!.logId, { keyId: Buffer.from("c0ffee", "hex") });
  assert.deepEqual(entry!.kindVersion, { kind: "hashedrekord", version: "0.0.1" });
  assert.deepEqual(entry!.inclusionPromise, { signedEntryTimestamp: Buffer.from("SETSET==", "base64") });
  assert.equal(entry!.inclusionProof, undefined);
  assert.deepEqual(entry!.canonicalizedBody, Buffer.from(entryBody, "base64"));
});

test("each way a Rekor bundle annotation can be malformed is named", () => {
  const what = `${LOC}: ${REKOR}`;
  const lacks = `${what} lacks SignedEntryTimestamp, Payload.body or Payload.logID`;
  const withRekor = (raw: string) => () => cosignLayerToItem(payload, { [SIG]: signature, [REKOR]: raw }, LOC);
  assert.throws(withRekor("{"), (e: unknown) => e instanceof SignatureFormatError && e.message.startsWith(`${what} is not JSON: `));
  malformed(withRekor(rekor({ SignedEntryTimestamp: 7 })), lacks);
  malformed(withRekor(rekor({ Payload: null })), lacks);
  malformed(withRekor(rekor({ Payload: { body: 1 } })), lacks);
  malformed(withRekor(rekor({ Payload: { logID: 1 } })), lacks);
  malformed(withRekor(rekor({ Payload: { integratedTime: "1700000000" } })), `${what}: integratedTime and logIndex must be integers`);
  malformed(withRekor(rekor({ Payload: { logIndex: 1.5 } })), `${what}: integratedTime and logIndex must be integers`);
  for (const logID of ["zz", "zzc0ffee", "c0ffeezz"]) malformed(withRekor(rekor({ Payload: { logID } })), `${what}: logID must be hex`);
  malformed(withRekor(rekor({ Payload: { body: "not base64!" } })), `${what} is not base64`);
  malformed(withRekor(rekor({ Payload: { body: Buffer.from("{").toString("base64") } })), `${what}: the log entry body is not JSON`);
  for (const body of [{ apiVersion: "0.0.1" }, { kind: "hashedrekord" }, { kind: 1, apiVersion: "0.0.1" }])
    malformed(
      withRekor(rekor({ Payload: { body: Buffer.from(JSON.stringify(body)).toString("base64") } })),
      `${what}: the log entry body has no kind and apiVersion`,
    );
});

test("a Rekor bundle annotation that is JSON but not an object is malformed, said so, not a TypeError", () => {
  // null has no fields to read (a TypeError unless refused first); a number, a string or a list would only be
  // said to lack the fields, which hides what is wrong.
  for (const raw of ["null", "7", '"text"', "[]"])
    malformed(() => cosignLayerToItem(payload, { [SIG]: signature, [REKOR]: raw }, LOC), `${LOC}: ${REKOR} is not a JSON object`);
});

test("an RFC 3161 timestamp annotation is the bundle's signed timestamp; anything else is malformed", () => {
  const token = Buffer.from("a timestamp token");
  const item = cosignLayerToItem(payload, { [SIG]: signature, [TSA]: JSON.stringify({ SignedRFC3161Timestamp: token.toString("base64") }) }, LOC);
  assert.deepEqual(item.bundle.verificationMaterial.timestampVerificationData, { rfc3161Timestamps: [{ signedTimestamp: token }] });
  const message = `${LOC}: ${TSA} must be JSON with SignedRFC3161Timestamp (base64)`;
  for (const raw of ["{", "{}", JSON.stringify({ SignedRFC3161Timestamp: 5 })])
    malformed(() => cosignLayerToItem(payload, { [SIG]: signature, [TSA]: raw }, LOC), message);
});

const envelope = (signatures: Array<{ keyid: string; sig: string }>) =>
  Buffer.from(JSON.stringify({ payloadType: "application/vnd.in-toto+json", payload: Buffer.from("{}").toString("base64"), signatures }));

test("a .att layer becomes a DSSE bundle without an artifact; only single-signature envelopes are taken", () => {
  const item = cosignAttestationToItem(envelope([{ keyid: "", sig: signature }]), {}, LOC);
  assert.equal(item.format, "cosign-attestation");
  assert.equal(item.artifact, undefined);
  assert.equal(item.bundle.mediaType, "application/vnd.dev.sigstore.bundle+json;version=0.1");
  assert.ok(item.bundle.content.$case === "dsseEnvelope");
  assert.equal(item.bundle.content.dsseEnvelope.signatures.length, 1);
  malformed(
    () =>
      cosignAttestationToItem(
        envelope([
          { keyid: "", sig: signature },
          { keyid: "", sig: signature },
        ]),
        {},
        LOC,
      ),
    `${LOC}: the DSSE envelope has 2 signatures; one is supported`,
  );
  assert.throws(
    () => cosignAttestationToItem(Buffer.from("{"), {}, LOC),
    (e: unknown) => e instanceof SignatureFormatError && e.message.startsWith(`${LOC}: the DSSE envelope is not JSON: `),
  );
  assert.throws(
    () => cosignAttestationToItem(Buffer.from("null"), {}, LOC),
    (e: unknown) => e instanceof SignatureFormatError && e.message.startsWith(`${LOC}: not a DSSE envelope: `),
  );
  malformed(() => cosignAttestationToItem(Buffer.from("{}"), {}, LOC), `${LOC}: the DSSE envelope has 0 signatures; one is supported`);
});

test("a referrer bundle's message signature signs the image manifest; a DSSE bundle has no artifact", () => {
  const manifest = Buffer.from('{"schemaVersion":2}');
  const material = { publicKey: { hint: "a-key" }, tlogEntries: [], timestampVerificationData: { rfc3161Timestamps: [] } };
  const message = Buffer.from(
    JSON.stringify({
      mediaType: "application/vnd.dev.sigstore.bundle.v0.3+json",
      verificationMaterial: material,
      messageSignature: { messageDigest: { algorithm: "SHA2_256", digest: createHash("sha256").update(manifest).digest("base64") }, signature },
    }),
  );
  const dsse = Buffer.from(
    JSON.stringify({
      mediaType: "application/vnd.dev.sigstore.bundle.v0.3+json",
      verificationMaterial: material,
      dsseEnvelope: JSON.parse(envelope([{ keyid: "", sig: signature }]).toString()),
    }),
  );
  const where = "referrer r.example/app@sha256:cd";
  const signed = bundleToItem(message, where, manifest);
  assert.equal(signed.format, "sigstore-bundle");
  assert.equal(signed.location, where);
  assert.deepEqual(signed.artifact, manifest);
  assert.equal("artifact" in bundleToItem(message, where, undefined), false);
  assert.equal("artifact" in bundleToItem(dsse, where, manifest), false);
  assert.throws(
    () => bundleToItem(Buffer.from("{"), where, manifest),
    (e: unknown) => e instanceof SignatureFormatError && e.message.startsWith(`${where}: the bundle is not JSON: `),
  );
  assert.throws(
    () => bundleToItem(Buffer.from("{}"), where, manifest),
    (e: unknown) => e instanceof SignatureFormatError && e.message.startsWith(`${where}: not a valid Sigstore bundle: `),
  );
});

test("bundle layers are recognised in every media type spelling cosign has written", () => {
  for (const type of [
    "application/vnd.dev.sigstore.bundle.v0.3+json",
    "application/vnd.dev.sigstore.bundle+json;version=0.3",
    "application/vnd.dev.sigstore.bundle+json;version=0.2",
    "application/vnd.dev.sigstore.bundle+json;version=0.1",
  ])
    assert.ok(BUNDLE_MEDIA_TYPES.has(type), type);
});
