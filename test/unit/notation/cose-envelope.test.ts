// COSE_Sign1 Notary envelopes (src/notation/cose-envelope.ts): a valid one reads back for every key the
// specification allows, and each broken rule is refused with its code. One envelope is put together by hand here,
// apart from the test signer, so that the signer and the reader cannot agree on a mistake.
import { test } from "node:test";
import assert from "node:assert/strict";
import { constants, sign } from "node:crypto";
import { encode, encodedNumber, Tag } from "cbor2";
import { readCoseEnvelope } from "../../../src/notation/cose-envelope.ts";
import {
  AUTHENTIC_SIGNING_TIME,
  EXPIRY,
  MAX_ENVELOPE_BYTES,
  NotationEnvelopeError,
  SIGNING_TIME,
  VERIFICATION_PLUGIN,
  type NotationAlgorithm,
  type NotationEnvelopeErrorCode,
} from "../../../src/notation/notation-envelope.ts";
import { COSE_ALG, epochTime, signCoseEnvelope, type CoseSignOptions } from "../../support/notation/cose-signer.ts";
import { codeSigningChain, type TestKeyType } from "../../support/notation/test-pki.ts";

const SCHEME = "io.cncf.notary.signingScheme";
const PAYLOAD = new TextEncoder().encode(
  JSON.stringify({ targetArtifact: { mediaType: "application/vnd.oci.image.manifest.v1+json", digest: `sha256:${"ab".repeat(32)}`, size: 1234 } }),
);

const chains = new Map<TestKeyType, ReturnType<typeof codeSigningChain>>();
/** One chain per key type for the whole file (RSA-4096 keys take a while to make). */
function chainFor(keyType: TestKeyType = "ec-p256"): ReturnType<typeof codeSigningChain> {
  let chain = chains.get(keyType);
  if (!chain) chains.set(keyType, (chain = codeSigningChain(undefined, keyType)));
  return chain;
}

/** An envelope signed by the key type's leaf, with its whole chain, and `opts` on top. */
async function envelope(opts: Partial<CoseSignOptions> = {}, keyType: TestKeyType = "ec-p256"): Promise<Uint8Array> {
  const { leaf, chain } = await chainFor(keyType);
  return signCoseEnvelope({ payload: PAYLOAD, signer: leaf, chain, ...opts });
}

function seconds(date: Date): Date {
  return new Date(Math.floor(date.getTime() / 1000) * 1000);
}

function refused(bytes: Uint8Array, code: NotationEnvelopeErrorCode, message?: RegExp): void {
  assert.throws(
    () => readCoseEnvelope(bytes),
    (e: unknown) => {
      assert.ok(e instanceof NotationEnvelopeError, `expected a NotationEnvelopeError, got ${String(e)}`);
      assert.equal(e.code, code, e.message);
      if (message) assert.match(e.message, message);
      return true;
    },
  );
}

const ALLOWED: [TestKeyType, NotationAlgorithm, number][] = [
  ["ec-p256", "ES256", 64],
  ["ec-p384", "ES384", 96],
  ["ec-p521", "ES512", 132],
  ["rsa-2048", "PS256", 256],
  ["rsa-3072", "PS384", 384],
  ["rsa-4096", "PS512", 512],
];

for (const [keyType, algorithm, signatureBytes] of ALLOWED) {
  test(`a notary.x509 envelope signed with a ${keyType} key reads back as ${algorithm}`, async () => {
    const { chain } = await chainFor(keyType);
    const signingTime = new Date(Date.now() - 60_000);
    const read = readCoseEnvelope(await envelope({ signingTime, signingAgent: "notation-go/1.3.0" }, keyType));
    assert.equal(read.mediaType, "application/cose");
    assert.deepEqual(read.payload, PAYLOAD);
    assert.equal(read.signingScheme, "notary.x509");
    assert.equal(read.algorithm, algorithm);
    assert.deepEqual(read.signingTime, seconds(signingTime));
    assert.equal(read.authenticSigningTime, undefined);
    assert.equal(read.expiry, undefined);
    assert.deepEqual(read.certificateChain, chain);
    assert.equal(read.signature.byteLength, signatureBytes);
    assert.equal(read.timestampToken, undefined);
    assert.equal(read.signingAgent, "notation-go/1.3.0");
  });
}

test("a signingAuthority envelope reads back its authentic time, expiry and timestamp token", async () => {
  const authenticSigningTime = new Date(Date.now() - 60_000);
  const expiry = new Date(Date.now() + 86_400_000);
  const timestampToken = new Uint8Array([0x30, 0x03, 0x02, 0x01, 0x01]);
  const read = readCoseEnvelope(await envelope({ scheme: "notary.x509.signingAuthority", authenticSigningTime, expiry, timestampToken }));
  assert.equal(read.signingScheme, "notary.x509.signingAuthority");
  assert.deepEqual(read.authenticSigningTime, seconds(authenticSigningTime));
  assert.deepEqual(read.expiry, seconds(expiry));
  assert.equal(read.signingTime, undefined);
  assert.deepEqual(read.timestampToken, timestampToken);
  assert.equal(read.signingAgent, undefined);
});

test("a Buffer reads as the same bytes, and what is returned does not share the caller's buffer", async () => {
  const bytes = Buffer.from(await envelope());
  const read = readCoseEnvelope(bytes);
  assert.deepEqual(read.payload, PAYLOAD);
  bytes.fill(0);
  assert.deepEqual(read.payload, PAYLOAD);
});

test("a signing agent that is not text is ignored, not refused", async () => {
  const read = readCoseEnvelope(await envelope({ unprotectedHeaders: [["io.cncf.notary.signingAgent", 7]] }));
  assert.equal(read.signingAgent, undefined);
});

// Written here from RFC 9052 and the Notary COSE envelope specification, apart from cose-signer.ts. The protected
// header is deliberately not how cbor2 would write it (text labels first, alg in a longer integer form than needed),
// so a reader that re-encoded the header instead of signing over the bytes received would fail.
for (const [keyType, alg, hash] of [
  ["ec-p256", COSE_ALG.ES256, "sha256"],
  ["rsa-2048", COSE_ALG.PS256, "sha256"],
] as const) {
  test(`an envelope put together by hand (${keyType}) verifies`, async () => {
    const { leaf, chain } = await chainFor(keyType);
    const signedAt = Math.floor(Date.now() / 1000) - 30;
    const time = new Uint8Array([0xc1, 0x1a, (signedAt >>> 24) & 0xff, (signedAt >>> 16) & 0xff, (signedAt >>> 8) & 0xff, signedAt & 0xff]);
    const protectedBytes = Buffer.concat([
      new Uint8Array([0xa5]), // a map of 5 pairs
      encode(SCHEME),
      encode("notary.x509"),
      encode(SIGNING_TIME),
      time,
      new Uint8Array([0x03]), // content type
      encode("application/vnd.cncf.notary.payload.v1+json"),
      new Uint8Array([0x02, 0x81]), // crit: an array of 1
      encode(SCHEME),
      new Uint8Array([0x01, 0x38, -alg - 1]), // alg, as a negative integer in its 1-byte form
    ]);
    // Sig_structure: ["Signature1", protected, external_aad h'', payload].
    const toBeSigned = Buffer.concat([
      new Uint8Array([0x84]),
      encode("Signature1"),
      encode(new Uint8Array(protectedBytes)),
      new Uint8Array([0x40]),
      encode(PAYLOAD),
    ]);
    const signature =
      keyType === "ec-p256"
        ? sign(hash, toBeSigned, { key: leaf.privateKey, dsaEncoding: "ieee-p1363" })
        : sign(hash, toBeSigned, { key: leaf.privateKey, padding: constants.RSA_PKCS1_PSS_PADDING, saltLength: 32 });
    const bytes = Buffer.concat([
      new Uint8Array([0xd2, 0x84]), // tag 18, an array of 4
      encode(new Uint8Array(protectedBytes)),
      encode(new Map([[33, chain]])),
      encode(PAYLOAD),
      encode(new Uint8Array(signature)),
    ]);
    const read = readCoseEnvelope(bytes);
    assert.equal(read.algorithm, keyType === "ec-p256" ? "ES256" : "PS256");
    assert.deepEqual(read.signingTime, new Date(signedAt * 1000));
    assert.deepEqual(read.payload, PAYLOAD);
    assert.deepEqual(read.signature, new Uint8Array(signature));
  });
}

// ---- not a COSE_Sign1 ----

test("the wrong tag is refused: COSE_Sign (98), and no tag at all", async () => {
  refused(await envelope({ tag: 98 }), "malformed", /tag 18/);
  refused(await envelope({ tag: null }), "malformed", /tag 18/);
});

test("bytes that are not CBOR, or CBOR with bytes after it, are refused", async () => {
  refused(new TextEncoder().encode('{"payload":"e30"}'), "malformed");
  refused(new Uint8Array(0), "malformed");
  const bytes = await envelope();
  refused(bytes.subarray(0, bytes.length - 10), "malformed", /not CBOR/);
  refused(Buffer.concat([bytes, new Uint8Array([0])]), "malformed", /not CBOR/);
});

test("a COSE_Sign1 of the wrong shape is refused", async () => {
  const { chain } = await chainFor();
  const x5 = new Map([[33, chain]]);
  const protectedBytes = encode(new Map<number | string, unknown>([[1, -7]]));
  const sig = new Uint8Array(64);
  refused(encode(new Tag(18, [protectedBytes, x5, PAYLOAD])), "malformed", /4 elements/);
  refused(encode(new Tag(18, { a: 1 })), "malformed", /4 elements/);
  refused(encode(new Tag(18, [new Map([[1, -7]]), x5, PAYLOAD, sig])), "malformed", /protected header is not a byte string/);
  refused(encode(new Tag(18, [protectedBytes, [], PAYLOAD, sig])), "malformed", /unprotected header is not a map/);
  refused(encode(new Tag(18, [protectedBytes, x5, null, sig])), "malformed", /payload/);
  refused(encode(new Tag(18, [protectedBytes, x5, PAYLOAD, "sig"])), "malformed", /signature/);
  refused(encode(new Tag(18, [encode([1, 2]), x5, PAYLOAD, sig])), "malformed", /protected header is not a map/);
  refused(encode(new Tag(18, [new Uint8Array([0xa1, 0x01]), x5, PAYLOAD, sig])), "malformed", /protected header is not CBOR/);
});

test("a protected header with a label twice is refused", async () => {
  // {1: -7, 1: -35}: one reader could take either.
  const protectedBytes = new Uint8Array([0xa2, 0x01, 0x26, 0x01, 0x38, 0x22]);
  const { chain } = await chainFor();
  refused(encode(new Tag(18, [protectedBytes, new Map([[33, chain]]), PAYLOAD, new Uint8Array(64)])), "malformed", /not CBOR/);
});

test("a label in both the protected and the unprotected header is refused", async () => {
  refused(await envelope({ unprotectedHeaders: [[SCHEME, "notary.x509"]] }), "malformed", /both/);
  refused(await envelope({ unprotectedHeaders: [[1, COSE_ALG.ES256]] }), "malformed", /both/);
});

test("a header label that is neither an integer nor text is refused", async () => {
  refused(await envelope({ protectedHeaders: [[1.5 as number, "x"]] }), "malformed", /label/);
});

// ---- the signature ----

test("a payload changed after signing does not verify", async () => {
  refused(await envelope({ tamperPayload: true }), "signature");
  refused(await envelope({ tamperPayload: true }, "rsa-2048"), "signature");
});

test("a changed or truncated signature does not verify", async () => {
  refused(await envelope({ tamperSignature: true }), "signature");
  refused(await envelope({ tamperSignature: true }, "rsa-3072"), "signature");
  const { leaf, chain } = await chainFor();
  const valid = signCoseEnvelope({ payload: PAYLOAD, signer: leaf, chain });
  const read = readCoseEnvelope(valid);
  // The same r‖s in DER form (what node:crypto writes by default) is not a COSE ECDSA signature.
  const der = sign("sha256", Buffer.from("x"), leaf.privateKey);
  refused(replaceSignature(valid, read.signature.subarray(0, 63)), "signature");
  refused(replaceSignature(valid, new Uint8Array(0)), "signature");
  refused(replaceSignature(valid, new Uint8Array(der)), "signature");
});

/** The envelope with its last element (the signature) replaced. */
function replaceSignature(bytes: Uint8Array, signature: Uint8Array): Uint8Array {
  const { signature: old } = readCoseEnvelope(bytes);
  // The signature bstr is the envelope's last item: its head, then its bytes.
  const head = encode(old).byteLength - old.byteLength;
  return Buffer.concat([bytes.subarray(0, bytes.byteLength - old.byteLength - head), encode(signature)]);
}

test("a signature by another key than the leaf's does not verify", async () => {
  const { chain } = await chainFor();
  // Signed with the P-256 key of another chain, carrying this chain's P-256 leaf.
  const other = await codeSigningChain(undefined, "ec-p256");
  refused(signCoseEnvelope({ payload: PAYLOAD, signer: other.leaf, chain }), "signature");
});

// ---- the algorithm ----

test("an algorithm other than the leaf key's is refused", async () => {
  refused(await envelope({ alg: COSE_ALG.ES384 }), "algorithm", /ES384.*ES256/);
  refused(await envelope({ alg: COSE_ALG.PS256 }, "rsa-3072"), "algorithm", /PS256.*PS384/);
  refused(await envelope({ alg: COSE_ALG.PS256 }), "algorithm");
  refused(await envelope({ alg: COSE_ALG.ES256 }, "rsa-2048"), "algorithm");
});

test("a leaf key no algorithm is allowed for (RSA-1024) is refused", async () => {
  refused(await envelope({}, "rsa-1024"), "algorithm", /none allowed/);
});

test("an alg that is absent, not allowed, text or a float is refused", async () => {
  refused(await envelope({ alg: null }), "algorithm");
  refused(await envelope({ alg: -8 }), "algorithm"); // EdDSA
  refused(await envelope({ alg: -257 }), "algorithm"); // RS256
  refused(await envelope({ alg: "ES256" }), "algorithm");
  refused(await envelope({ alg: encodedNumber(-7, "f32") }), "algorithm");
});

// ---- critical headers ----

test("an unknown critical header is refused", async () => {
  refused(await envelope({ protectedHeaders: [["com.example.policy", "strict"]], crit: [SCHEME, "com.example.policy"] }), "critical-header", /unknown/);
});

test("a critical header that is not in the protected header is refused", async () => {
  refused(await envelope({ crit: [SCHEME, "com.example.policy"] }), "critical-header", /not a protected header/);
  // signingTime is understood, but crit naming it where it is absent is still wrong.
  refused(await envelope({ scheme: "notary.x509.signingAuthority", crit: [SCHEME, AUTHENTIC_SIGNING_TIME, SIGNING_TIME] }), "critical-header");
});

test("signingScheme missing from crit is refused", async () => {
  const expiry = new Date(Date.now() + 86_400_000);
  refused(await envelope({ expiry, crit: [EXPIRY] }), "critical-header", /signingScheme must be marked critical/);
});

test("crit absent, empty, or listing integer labels is refused", async () => {
  refused(await envelope({ crit: null }), "critical-header", /no crit/);
  refused(await envelope({ crit: [] }), "critical-header", /empty/);
  refused(await envelope({ crit: [SCHEME, 3] }), "critical-header", /common header 3/);
  refused(await envelope({ crit: [SCHEME, 0] }), "critical-header", /common header 0/);
  refused(await envelope({ crit: [SCHEME, 99], protectedHeaders: [[99, "x"]] }), "critical-header", /unknown critical header 99/);
  refused(await envelope({ crit: SCHEME as unknown as unknown[] }), "malformed", /crit is not an array/);
  refused(await envelope({ crit: [SCHEME, new Uint8Array([1])] }), "malformed", /crit entry/);
});

test("crit in the unprotected header is refused", async () => {
  refused(await envelope({ crit: null, unprotectedHeaders: [[2, [SCHEME]]] }), "critical-header", /protected header/);
});

test("an expiry that is not critical is refused", async () => {
  refused(await envelope({ expiry: new Date(Date.now() + 86_400_000), crit: [SCHEME] }), "critical-header", /expiry must be marked critical/);
});

test("an authenticSigningTime that is not critical is refused", async () => {
  refused(await envelope({ scheme: "notary.x509.signingAuthority", crit: [SCHEME] }), "critical-header", /authenticSigningTime must be marked critical/);
});

test("a verification plugin header is refused", async () => {
  refused(
    await envelope({ protectedHeaders: [[VERIFICATION_PLUGIN, "com.example.plugin"]], crit: [SCHEME, VERIFICATION_PLUGIN] }),
    "critical-header",
    /plugin/,
  );
});

// ---- signed attributes ----

test("an expiry not after the signing time is refused", async () => {
  const signingTime = new Date(Date.now() - 60_000);
  refused(await envelope({ signingTime, expiry: new Date(signingTime.getTime() - 3_600_000) }), "malformed", /expiry/);
  refused(await envelope({ signingTime, expiry: signingTime }), "malformed", /expiry/);
});

test("signingAuthority without authenticSigningTime is refused", async () => {
  refused(
    await envelope({ scheme: "notary.x509.signingAuthority", authenticSigningTime: null, crit: [SCHEME, AUTHENTIC_SIGNING_TIME] }),
    "missing-header",
    /requires .*authenticSigningTime/,
  );
});

test("signingAuthority with a signingTime is refused", async () => {
  refused(await envelope({ scheme: "notary.x509.signingAuthority", signingTime: new Date() }), "missing-header", /must not carry .*signingTime/);
});

test("notary.x509 with authenticSigningTime is refused", async () => {
  refused(await envelope({ authenticSigningTime: new Date() }), "missing-header", /must not carry .*authenticSigningTime/);
});

test("notary.x509 without signingTime is refused", async () => {
  refused(await envelope({ signingTime: null }), "missing-header", /requires .*signingTime/);
});

test("a signing scheme that is absent, unknown or not text is refused", async () => {
  refused(await envelope({ scheme: null, crit: [SCHEME] }), "missing-header");
  refused(await envelope({ scheme: "notary.default.x509" }), "missing-header");
  refused(await envelope({ scheme: 1 as unknown as string }), "missing-header", /must be text, got 1/);
  refused(await envelope({ scheme: ["notary.x509"] as unknown as string }), "missing-header", /must be text/);
});

// ---- content type ----

test("a content type other than the Notary payload's is refused", async () => {
  refused(await envelope({ contentType: "application/json" }), "content-type");
  refused(await envelope({ contentType: null }), "content-type", /none/);
});

test("an integer content type is refused", async () => {
  refused(await envelope({ contentType: 50 }), "content-type", /50/); // CoAP's application/json
});

// ---- times ----

test("a time that is not tag 1 around an integer is refused", async () => {
  const seconds = Math.floor(Date.now() / 1000);
  refused(await envelope({ protectedHeaders: [[SIGNING_TIME, seconds]] }), "malformed", /tag 1/);
  refused(await envelope({ protectedHeaders: [[SIGNING_TIME, new Tag(1, encodedNumber(seconds, "f64"))]] }), "malformed", /tag 1/);
  refused(await envelope({ protectedHeaders: [[SIGNING_TIME, new Tag(0, new Date().toISOString())]] }), "malformed", /tag 1/);
  refused(await envelope({ protectedHeaders: [[SIGNING_TIME, new Tag(1, String(seconds))]] }), "malformed", /tag 1/);
  const expiry = new Date(Date.now() + 86_400_000);
  refused(await envelope({ expiry, protectedHeaders: [[EXPIRY, Math.floor(expiry.getTime() / 1000)]] }), "malformed", /expiry/);
  refused(await envelope({ scheme: "notary.x509.signingAuthority", protectedHeaders: [[AUTHENTIC_SIGNING_TIME, new Date().toISOString()]] }), "malformed");
});

test("a time beyond what a Date holds is refused", async () => {
  refused(await envelope({ protectedHeaders: [[SIGNING_TIME, new Tag(1, 2n ** 60n)]] }), "malformed", /out of range/);
});

test("the signer's epochTime writes tag 1 around integer seconds", () => {
  assert.deepEqual(encode(epochTime(new Date(1_700_000_000_500))), new Uint8Array([0xc1, 0x1a, 0x65, 0x53, 0xf1, 0x00]));
});

// ---- x5chain ----

test("an envelope without x5chain is refused", async () => {
  refused(await envelope({ chain: null }), "missing-header", /x5chain/);
  refused(await envelope({ chain: [] }), "missing-header", /x5chain/);
});

test("x5chain in the protected header only is refused (notation reads the unprotected one)", async () => {
  const { chain } = await chainFor();
  refused(await envelope({ chain: null, protectedHeaders: [[33, chain]] }), "missing-header", /x5chain/);
});

test("x5chain that is not an array of certificates is refused", async () => {
  const { leaf } = await chainFor();
  refused(await envelope({ chain: null, unprotectedHeaders: [[33, leaf.der]] }), "malformed", /x5chain/);
  refused(await envelope({ chain: [leaf.der, "intermediate" as unknown as Uint8Array] }), "malformed", /x5chain/);
  refused(await envelope({ chain: [new Uint8Array([0x30, 0x00])] }), "malformed", /leaf certificate/);
});

test("a timestamp token that is not a byte string is refused", async () => {
  refused(await envelope({ unprotectedHeaders: [["io.cncf.notary.timestampSignature", "MIIB"]] }), "malformed", /timestampSignature/);
});

// ---- size ----

test("an envelope larger than the limit is refused before it is read", async () => {
  const bytes = await envelope({ payload: new Uint8Array(MAX_ENVELOPE_BYTES) });
  assert.ok(bytes.byteLength > MAX_ENVELOPE_BYTES);
  refused(bytes, "too-large");
  refused(new Uint8Array(MAX_ENVELOPE_BYTES + 1), "too-large");
});
