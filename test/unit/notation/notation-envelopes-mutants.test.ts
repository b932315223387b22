// Envelopes and payloads at the edges of src/notation/jws-envelope.ts, cose-envelope.ts, notation-envelope.ts and
// notation-payload.ts, as the mutation run of the "notation-envelopes" area found them untested: the size limit at
// its value, bytes that are not UTF-8, JSON of the wrong shape, every registered JWS header listed as critical,
// times and base64 at the edges of their formats, the keys named in algorithm refusals, COSE labels, time tags and
// ranges, what a read envelope holds (and that it does not change when the caller reuses its buffer), and the
// payload's descriptor field by field. The JWS envelopes here are written by hand over node:crypto signatures.
import assert from "node:assert/strict";
import { generateKeyPairSync } from "node:crypto";
import { before, describe, test } from "node:test";
import { encode, Tag } from "cbor2";
import "reflect-metadata";
import * as x509 from "@peculiar/x509";
import { hasErrorCode } from "../../../src/errors/imprimatur-error.ts";
import { readCoseEnvelope } from "../../../src/notation/cose-envelope.ts";
import { readJwsEnvelope } from "../../../src/notation/jws-envelope.ts";
import { MAX_ENVELOPE_BYTES, NOTATION_SIGNATURE_ARTIFACT_TYPE, algorithmForKey } from "../../../src/notation/notation-envelope.ts";
import { readPayload } from "../../../src/notation/notation-payload.ts";
import { signCoseEnvelope, type CoseSignOptions } from "../../support/notation/cose-signer.ts";
import { PAYLOAD_CONTENT_TYPE, algorithmFor, notationPayload, rfc3339, signBytes } from "../../support/notation/jws-signer.ts";
import { codeSigningChain, issue, toWebCrypto, type TestCertificate } from "../../support/notation/test-pki.ts";

const DIGEST = "sha256:" + "ab".repeat(32);
const PAYLOAD = notationPayload({ mediaType: "application/vnd.oci.image.manifest.v1+json", digest: DIGEST, size: 1234 });
const SCHEME = "io.cncf.notary.signingScheme";

let pki: Awaited<ReturnType<typeof codeSigningChain>>;
before(async () => {
  pki = await codeSigningChain();
});

interface RawJws {
  header?: Record<string, unknown>;
  /** The protected header's bytes as given (then `header` is not used). */
  protectedBytes?: Uint8Array;
  unprotected?: Record<string, unknown>;
  signer?: TestCertificate;
  chain?: Uint8Array[];
  payload?: string;
}

/** A JWS envelope written here: `header` on top of a valid notary.x509 protected header, signed by the leaf's key. */
function jws(o: RawJws = {}): Record<string, unknown> {
  const signer = o.signer ?? pki.leaf;
  const header = {
    alg: algorithmFor(signer.keyType),
    cty: PAYLOAD_CONTENT_TYPE,
    crit: [SCHEME],
    [SCHEME]: "notary.x509",
    "io.cncf.notary.signingTime": rfc3339(new Date()),
    ...o.header,
  };
  const protectedB64 = Buffer.from(o.protectedBytes ?? Buffer.from(JSON.stringify(header))).toString("base64url");
  const payloadB64 = Buffer.from(o.payload ?? PAYLOAD).toString("base64url");
  const signature = signBytes(algorithmFor(signer.keyType), signer.privateKey, Buffer.from(`${protectedB64}.${payloadB64}`));
  return {
    payload: payloadB64,
    protected: protectedB64,
    header: {
      x5c: (o.chain ?? (o.signer ? [o.signer.der, pki.intermediate.der, pki.root.der] : pki.chain)).map((d) => Buffer.from(d).toString("base64")),
      ...o.unprotected,
    },
    signature: signature.toString("base64url"),
  };
}
const bytesOf = (value: unknown) => new TextEncoder().encode(JSON.stringify(value));

async function jwsRefused(bytes: Uint8Array, code: string, message: string | RegExp): Promise<void> {
  await assert.rejects(readJwsEnvelope(bytes), (e: unknown) => {
    assert.ok(hasErrorCode(e, code), `want code ${code}, got ${String((e as { code?: string }).code)}: ${(e as Error).message}`);
    if (typeof message === "string") assert.equal((e as Error).message, message);
    else assert.match((e as Error).message, message);
    return true;
  });
}

function coseRefused(bytes: Uint8Array, code: string, message: string | RegExp): void {
  assert.throws(
    () => readCoseEnvelope(bytes),
    (e: unknown) => {
      assert.ok(hasErrorCode(e, code), `want code ${code}, got ${String((e as { code?: string }).code)}: ${(e as Error).message}`);
      if (typeof message === "string") assert.equal((e as Error).message, message);
      else assert.match((e as Error).message, message);
      return true;
    },
  );
}

const cose = (o: Partial<CoseSignOptions> = {}) => signCoseEnvelope({ payload: new TextEncoder().encode(PAYLOAD), signer: pki.leaf, chain: pki.chain, ...o });

/** `bytes` with the first occurrence of `marker` replaced by `replacement` (same length or not). */
function replaced(bytes: Uint8Array, marker: string, replacement: Uint8Array): Uint8Array {
  const b = Buffer.from(bytes);
  const i = b.indexOf(marker);
  assert.ok(i >= 0, `marker ${marker} not found`);
  return new Uint8Array(Buffer.concat([b.subarray(0, i), replacement, b.subarray(i + marker.length)]));
}

describe("the size limit, at its value", () => {
  test("an envelope of exactly the limit is read (and refused for what it is); one byte more is too large", async () => {
    const atLimit = new Uint8Array(MAX_ENVELOPE_BYTES).fill(0x20);
    await jwsRefused(atLimit, "malformed", /^not a JSON envelope: /);
    const over = new Uint8Array(MAX_ENVELOPE_BYTES + 1).fill(0x20);
    await jwsRefused(over, "too-large", `the envelope is ${MAX_ENVELOPE_BYTES + 1} bytes, over the ${MAX_ENVELOPE_BYTES} read`);
    coseRefused(atLimit, "malformed", /^the envelope is not CBOR: /);
    coseRefused(over, "too-large", `the envelope is ${MAX_ENVELOPE_BYTES + 1} bytes, more than the ${MAX_ENVELOPE_BYTES} read`);
  });
});

describe("JWS envelopes of the wrong shape", () => {
  test("bytes that are not UTF-8, even in a member nothing signs", async () => {
    const envelope = jws({ unprotected: { "io.cncf.notary.signingAgent": "AGENT" } });
    await jwsRefused(replaced(bytesOf(envelope), "AGENT", Uint8Array.of(0xff)), "malformed", /^not a JSON envelope: /);
  });
  test("JSON that is not an object", async () => {
    await jwsRefused(new TextEncoder().encode("1"), "malformed", "the envelope is not a JSON object");
    await jwsRefused(new TextEncoder().encode("{"), "malformed", /^not a JSON envelope: /);
  });
  test("a payload that is not a string, and no unprotected header", async () => {
    await jwsRefused(bytesOf({ ...jws(), payload: 123 }), "malformed", "payload must be a base64url string");
    const { header: _, ...withoutHeader } = jws();
    await jwsRefused(bytesOf(withoutHeader), "missing-header", "the unprotected header (with the certificate chain, x5c) is missing");
  });
  test("an algorithm the Notary Project does not allow, and a content type it does not define, are named", async () => {
    await jwsRefused(bytesOf(jws({ header: { alg: "HS256" } })), "algorithm", 'alg "HS256" is not one the Notary Project allows');
    await jwsRefused(bytesOf(jws({ header: { cty: "application/json" } })), "content-type", `cty must be ${PAYLOAD_CONTENT_TYPE}, got "application/json"`);
  });
  test("crit that is not a list, an empty list, or a list with a non-name", async () => {
    for (const crit of [SCHEME, [], [SCHEME, 1]])
      await jwsRefused(bytesOf(jws({ header: { crit } })), "critical-header", "crit must be a non-empty list of header names");
  });
  test("crit listing a registered header, each by its name", async () => {
    for (const name of ["jku", "jwk", "kid", "x5u", "x5c", "x5t", "x5t#S256", "typ", "cty", "crit"])
      await jwsRefused(
        bytesOf(jws({ header: { ...(name === "crit" || name === "cty" ? {} : { [name]: "x" }), crit: [SCHEME, name] } })),
        "critical-header",
        `crit must not list the registered header ${JSON.stringify(name)}`,
      );
  });
  test("a protected header that is not UTF-8 JSON, or not an object", async () => {
    const header = Buffer.from(
      JSON.stringify({
        alg: "ES256",
        cty: PAYLOAD_CONTENT_TYPE,
        crit: [SCHEME],
        [SCHEME]: "notary.x509",
        "io.cncf.notary.signingTime": rfc3339(new Date()),
        note: "NOTE",
      }),
    );
    await jwsRefused(
      bytesOf(jws({ protectedBytes: replaced(header, "NOTE", Uint8Array.of(0xc3, 0x28)) })),
      "malformed",
      /^the protected header is not base64url JSON: /,
    );
    await jwsRefused(bytesOf(jws({ protectedBytes: new TextEncoder().encode("{") })), "malformed", /^the protected header is not base64url JSON: /);
    await jwsRefused(bytesOf(jws({ protectedBytes: new TextEncoder().encode("[1]") })), "malformed", "the protected header is not a JSON object");
  });
  test("times: RFC 3339 only, with or without a fraction", async () => {
    for (const time of ["+002026-11-30T21:00:00Z", "2026-11-30 21:00:00", ["2026-11-30T21:00:00Z"]])
      await jwsRefused(
        bytesOf(jws({ header: { "io.cncf.notary.signingTime": time } })),
        "malformed",
        `io.cncf.notary.signingTime must be an RFC 3339 time, got ${JSON.stringify(time)}`,
      );
    const read = await readJwsEnvelope(bytesOf(jws({ header: { "io.cncf.notary.signingTime": "2026-11-30T21:00:00.123Z" } })));
    assert.equal(read.signingTime?.toISOString(), "2026-11-30T21:00:00.123Z");
  });
  test("x5c that is not a non-empty list of base64 texts", async () => {
    for (const x5c of ["abc", [], [Buffer.from(pki.leaf.der).toString("base64"), 1]])
      await jwsRefused(bytesOf(jws({ unprotected: { x5c } })), "malformed", "x5c must be a non-empty list of base64 certificates");
  });
  test("certificates in standard base64 only, padded, each named by its place", async () => {
    const leaf = Buffer.from(pki.leaf.der).toString("base64");
    for (const bad of ["*AAA", "AAA*", "AAAAA", "AA-_"])
      await jwsRefused(bytesOf(jws({ unprotected: { x5c: [leaf, bad] } })), "malformed", "x5c[1] is not standard base64");
  });
  test("a timestamp that is not a string, and a signing agent that is not one is left out", async () => {
    await jwsRefused(
      bytesOf(jws({ unprotected: { "io.cncf.notary.timestampSignature": 5 } })),
      "malformed",
      "io.cncf.notary.timestampSignature must be a base64 string",
    );
    const read = await readJwsEnvelope(bytesOf(jws({ unprotected: { "io.cncf.notary.signingAgent": 5 } })));
    assert.equal(Object.hasOwn(read, "signingAgent"), false);
    const plain = await readJwsEnvelope(bytesOf(jws()));
    assert.equal(Object.hasOwn(plain, "signingAgent"), false);
  });
  test("a key that does not match alg, or that no algorithm allows, is described", async () => {
    await jwsRefused(bytesOf(jws({ header: { alg: "ES384" } })), "algorithm", "alg ES384 does not match the signing certificate's key (EC prime256v1: ES256)");
    const rsa = await issue(pki.intermediate, { subject: "C=US, ST=WA, O=X, CN=RSA", keyType: "rsa-2048" });
    await jwsRefused(
      bytesOf(jws({ signer: rsa, header: { alg: "PS384" } })),
      "algorithm",
      "alg PS384 does not match the signing certificate's key (RSA 2048 bits: PS256)",
    );
    const ed = generateKeyPairSync("ed25519");
    const edLeaf = await x509.X509CertificateGenerator.create({
      serialNumber: "0e0e",
      subject: "C=US, ST=WA, O=X, CN=Ed",
      issuer: pki.intermediate.cert.subjectName,
      publicKey: new x509.PublicKey(new Uint8Array(ed.publicKey.export({ type: "spki", format: "der" }))),
      signingKey: await toWebCrypto(pki.intermediate.privateKey, pki.intermediate.keyType, "sign"),
      signingAlgorithm: { name: "ECDSA", hash: "SHA-256" } as EcdsaParams,
    });
    const envelope = jws({ chain: [new Uint8Array(edLeaf.rawData), pki.intermediate.der, pki.root.der] });
    await jwsRefused(bytesOf(envelope), "algorithm", "the signing certificate's key (ED25519 ? bits) is not one the Notary Project allows");
  });
  test("a verification plugin's minimum version alone asks for a plugin", async () =>
    jwsRefused(bytesOf(jws({ header: { "io.cncf.notary.verificationPluginMinVersion": "1.0.0" } })), "critical-header", /requires a verification plugin/));
  test("a signing scheme that is not one of the two is named, or its type", async () => {
    await jwsRefused(
      bytesOf(jws({ header: { [SCHEME]: "notary.other" } })),
      "missing-header",
      `${SCHEME} must be notary.x509 or notary.x509.signingAuthority, got "notary.other"`,
    );
    await jwsRefused(bytesOf(jws({ header: { [SCHEME]: 5 } })), "missing-header", `${SCHEME} must be notary.x509 or notary.x509.signingAuthority, got number`);
  });
});

describe("COSE envelopes at their edges", () => {
  test("bytes that are not CBOR are named as the envelope, and keep the decoder's error", () => {
    assert.throws(
      () => readCoseEnvelope(Uint8Array.of(0xff)),
      (e: unknown) => hasErrorCode(e, "malformed") && /^the envelope is not CBOR: /.test((e as Error).message) && (e as Error).cause !== undefined,
    );
  });
  test("a zero-length protected header is the empty map: no algorithm", () => {
    const raw = new Tag(18, [new Uint8Array(0), new Map(), new TextEncoder().encode(PAYLOAD), new Uint8Array(64)]);
    coseRefused(encode(raw), "algorithm", "the protected header's alg (none) is not PS256/384/512 or ES256/384/512");
  });
  test("labels that are neither integers nor text name their bucket", () => {
    coseRefused(
      cose({ protectedHeaders: [[new Uint8Array([1]) as never, 1]] }),
      "malformed",
      "the protected header has a label that is neither an integer nor text",
    );
    coseRefused(
      cose({ unprotectedHeaders: [[new Uint8Array([1]) as never, 1]] }),
      "malformed",
      "the unprotected header has a label that is neither an integer nor text",
    );
  });
  test("crit in the unprotected header", () =>
    coseRefused(cose({ crit: null, unprotectedHeaders: [[2, [SCHEME]]] }), "critical-header", "crit must be in the protected header"));
  test("an algorithm COSE has but Notary does not, and values of other types, are described", () => {
    coseRefused(cose({ alg: -8 }), "algorithm", "the protected header's alg (-8) is not PS256/384/512 or ES256/384/512");
    coseRefused(cose({ alg: "ES256" }), "algorithm", 'the protected header\'s alg ("ES256") is not PS256/384/512 or ES256/384/512');
    coseRefused(cose({ contentType: new Uint8Array([1]) }), "content-type", `the content type must be ${PAYLOAD_CONTENT_TYPE}, got a byte string`);
    coseRefused(cose({ contentType: new Tag(5, 1) }), "content-type", `the content type must be ${PAYLOAD_CONTENT_TYPE}, got tag 5`);
    coseRefused(cose({ contentType: true }), "content-type", `the content type must be ${PAYLOAD_CONTENT_TYPE}, got boolean`);
  });
  test("crit entries: COSE's common labels 0 to 8, other integers unknown", () => {
    coseRefused(cose({ crit: [SCHEME, 8] }), "critical-header", "crit must not list COSE's common header 8");
    coseRefused(cose({ crit: [SCHEME, -5] }), "critical-header", "unknown critical header -5");
  });
  test("a time of another tag, and times at the ends of the range a Date holds", () => {
    coseRefused(
      cose({ signingTime: null, protectedHeaders: [["io.cncf.notary.signingTime", new Tag(0, 1_700_000_000n)]] }),
      "malformed",
      "io.cncf.notary.signingTime must be CBOR tag 1 around integer seconds, got tag 0",
    );
    const read = readCoseEnvelope(
      cose({
        signingTime: null,
        protectedHeaders: [
          ["io.cncf.notary.signingTime", new Tag(1, -8_640_000_000_000n)],
          ["io.cncf.notary.expiry", new Tag(1, 8_640_000_000_000n)],
        ],
        crit: [SCHEME, "io.cncf.notary.expiry"],
      }),
    );
    assert.equal(read.signingTime?.getTime(), -8_640_000_000_000_000);
    assert.equal(read.expiry?.getTime(), 8_640_000_000_000_000);
    coseRefused(
      cose({ signingTime: null, protectedHeaders: [["io.cncf.notary.signingTime", new Tag(1, -8_640_000_000_001n)]] }),
      "malformed",
      "io.cncf.notary.signingTime is out of range",
    );
  });
  test("x5chain as one byte string is refused as notation refuses it", () =>
    coseRefused(cose({ chain: null, unprotectedHeaders: [[33, pki.leaf.der]] }), "malformed", "x5chain is not an array of certificates"));
  test("a leaf that is not a certificate keeps the parser's error", () => {
    assert.throws(
      () => readCoseEnvelope(cose({ chain: null, unprotectedHeaders: [[33, [new Uint8Array([0x30, 0x00])]]] })),
      (e: unknown) => hasErrorCode(e, "malformed") && (e as Error).cause !== undefined,
    );
  });
  test("a signature node:crypto cannot parse does not verify", () =>
    coseRefused(replaceSignature(cose(), new Uint8Array(1)), "signature", "the signature does not verify with the leaf certificate's key"));
  test("a scheme that is absent is named as absent", () =>
    coseRefused(cose({ scheme: null }), "missing-header", `${SCHEME} must be notary.x509 or notary.x509.signingAuthority, got undefined`));
  test("what a read envelope holds: only the times it has, and copies the caller's buffer cannot change", async () => {
    const token = new Uint8Array([1, 2, 3, 4]);
    const bytes = cose({ timestampToken: token });
    const read = readCoseEnvelope(bytes);
    const signature = Buffer.from(read.signature);
    for (const key of ["authenticSigningTime", "expiry"]) assert.equal(Object.hasOwn(read, key), false, key);
    bytes.fill(0);
    assert.deepEqual(Buffer.from(read.certificateChain[0]!), Buffer.from(pki.leaf.der));
    assert.deepEqual(Buffer.from(read.signature), signature);
    assert.deepEqual(Buffer.from(read.timestampToken!), Buffer.from(token));
    const authority = readCoseEnvelope(
      cose({
        scheme: "notary.x509.signingAuthority",
        signingTime: null,
        authenticSigningTime: new Date(),
        crit: [SCHEME, "io.cncf.notary.authenticSigningTime"],
      }),
    );
    assert.equal(Object.hasOwn(authority, "signingTime"), false);
  });
});

/** The COSE_Sign1 with its signature replaced. */
function replaceSignature(bytes: Uint8Array, signature: Uint8Array): Uint8Array {
  const b = Buffer.from(bytes);
  // The signature is the last element: a byte string header (0x58 len, or 0x59 len16) and the bytes.
  for (const [prefix, size] of [
    [0x58, 1],
    [0x59, 2],
  ] as const) {
    for (let i = b.length - 1; i >= 0; i--) {
      if (b[i] !== prefix) continue;
      const len = size === 1 ? b[i + 1]! : b.readUInt16BE(i + 1);
      if (i + 1 + size + len === b.length) return new Uint8Array(Buffer.concat([b.subarray(0, i), Buffer.from(encode(signature))]));
    }
  }
  throw new Error("no signature found");
}

describe("what notation-envelope.ts states", () => {
  test("the artifact type of a Notary Project signature", () => assert.equal(NOTATION_SIGNATURE_ARTIFACT_TYPE, "application/vnd.cncf.notary.signature"));
  test("an EC key on another curve implies no algorithm", () => {
    assert.equal(algorithmForKey(generateKeyPairSync("ec", { namedCurve: "secp256k1" }).publicKey), undefined);
  });
});

describe("the signed payload", () => {
  const payload = (target: unknown) => new TextEncoder().encode(JSON.stringify({ targetArtifact: target }));
  const good = { mediaType: "application/vnd.oci.image.manifest.v1+json", digest: DIGEST, size: 1234 };
  function payloadRefused(bytes: Uint8Array, message: string | RegExp): void {
    assert.throws(
      () => readPayload(bytes),
      (e: unknown) => {
        assert.ok(hasErrorCode(e, "malformed"), String(e));
        if (typeof message === "string") assert.equal((e as Error).message, message);
        else assert.match((e as Error).message, message);
        return true;
      },
    );
  }
  test("bytes that are not UTF-8 JSON, JSON that is not an object, no targetArtifact", () => {
    payloadRefused(replaced(payload({ ...good, annotations: { k: "VALUE" } }), "VALUE", Uint8Array.of(0xff)), /^the signed payload is not JSON: /);
    payloadRefused(new TextEncoder().encode("{"), /^the signed payload is not JSON: /);
    payloadRefused(new TextEncoder().encode("1"), "the signed payload has no targetArtifact");
  });
  test("digests: a text of algorithm and encoded hash, nothing before or after", () => {
    for (const digest of [["sha256:" + "ab".repeat(32)], "-sha256:abc", "sha256:abc!"])
      payloadRefused(payload({ ...good, digest }), `targetArtifact.digest is not a digest: ${JSON.stringify(digest)}`);
    assert.equal(readPayload(payload({ ...good, digest: "sha256+b64u:abc" })).digest, "sha256+b64u:abc");
  });
  test("an empty media type, and sizes that are not whole numbers of bytes", () => {
    payloadRefused(payload({ ...good, mediaType: "" }), "targetArtifact.mediaType is missing");
    for (const size of [1.5, -1]) payloadRefused(payload({ ...good, size }), `targetArtifact.size is not a size: ${size}`);
    assert.equal(readPayload(payload({ ...good, size: 0 })).size, 0);
  });
  test("annotations that are not an object of strings", () => {
    payloadRefused(payload({ ...good, annotations: "x" }), "targetArtifact.annotations is not an object");
    payloadRefused(payload({ ...good, annotations: { k: 1 } }), 'targetArtifact.annotations["k"] is not a string');
  });
});
