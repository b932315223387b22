// A Notary Project signature envelope in COSE form (application/cose; the Notary Project's COSE envelope
// specification over RFC 9052's COSE_Sign1): read it, check its headers, verify its signature with the leaf
// certificate's key, and hand back the same VerifiedEnvelope the JWS reader does (notation-envelope.ts holds the
// rules both share).
//
// Why cbor2 and no COSE library: cbor2 is a well-kept CBOR library (RFC 8949) that keeps byte strings as bytes, hands
// unknown tags back as tags, and can tell integers from floats (preferBigInt). No well-kept COSE library for Node
// exists (the few there are are unmaintained), and verifying one COSE_Sign1 is a few lines over CBOR: rebuild the
// Sig_structure around the protected header's bytes as received and verify it with node:crypto.
import { constants, verify, X509Certificate, type KeyObject } from "node:crypto";
import { decode, encode, Tag, type DecodeOptions } from "cbor2";
import {
  AUTHENTIC_SIGNING_TIME,
  COSE_ENVELOPE_MEDIA_TYPE,
  EXPIRY,
  MAX_ENVELOPE_BYTES,
  NOTATION_PAYLOAD_CONTENT_TYPE,
  NotationEnvelopeError,
  SIGNING_AGENT,
  SIGNING_SCHEME,
  SIGNING_TIME,
  TIMESTAMP_SIGNATURE,
  algorithmForKey,
  checkSignedAttributes,
  hashOf,
  type NotationAlgorithm,
  type VerifiedEnvelope,
} from "./notation-envelope.ts";

/** COSE_Sign1_Tagged (RFC 9052 §4.2). */
const COSE_SIGN1_TAG = 18;
/** Epoch-based date/time (RFC 8949 §3.4.2): the only time encoding the Notary COSE envelope uses. */
const EPOCH_TIME_TAG = 1;

// Header labels (RFC 9052 §3.1; x5chain: RFC 9360). Integers decode as bigint (see DECODE_OPTIONS).
const LABEL_ALG = 1n;
const LABEL_CRIT = 2n;
const LABEL_CONTENT_TYPE = 3n;
const LABEL_X5CHAIN = 33n;
/** Labels 0..8 are COSE's own common parameters: RFC 9052 says crit must not list them. */
const LAST_COMMON_LABEL = 8n;

/** The COSE algorithm identifiers the Notary specification allows, and their JWS names. */
const COSE_ALGORITHMS: ReadonlyMap<bigint, NotationAlgorithm> = new Map([
  [-37n, "PS256"],
  [-38n, "PS384"],
  [-39n, "PS512"],
  [-7n, "ES256"],
  [-35n, "ES384"],
  [-36n, "ES512"],
]);

const HASH_BYTES = { sha256: 32, sha384: 48, sha512: 64 } as const;

const DECODE_OPTIONS: DecodeOptions = {
  // Tags come back as Tag objects (tag 1 would otherwise become a Date, losing what it wrapped).
  ignoreGlobalTags: true,
  // Header maps mix integer and text labels: a Map keeps both, and the same type whatever the labels.
  preferMap: true,
  // CBOR integers come back as bigint, floats as number: alg and times must be integers, so that is a type check.
  preferBigInt: true,
  // RFC 9052 §3: a label appears once; two values for one label are a way to show each reader a different one.
  rejectDuplicateKeys: true,
};

type HeaderMap = Map<unknown, unknown>;

/** Read a COSE_Sign1 Notary envelope and verify its signature with its leaf certificate's key. */
export function readCoseEnvelope(bytes: Uint8Array): VerifiedEnvelope {
  if (bytes.byteLength > MAX_ENVELOPE_BYTES)
    throw new NotationEnvelopeError("too-large", `the envelope is ${bytes.byteLength} bytes, more than the ${MAX_ENVELOPE_BYTES} read`);
  // A plain Uint8Array view: cbor2 hands back byte strings of the input's class, and encodes a Buffer as an object.
  const input = new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const message = decodeCbor(input, "the envelope");
  if (!(message instanceof Tag) || Number(message.tag) !== COSE_SIGN1_TAG) throw malformed("the envelope is not a COSE_Sign1 (CBOR tag 18)");
  const parts = message.contents;
  if (!Array.isArray(parts) || parts.length !== 4) throw malformed("a COSE_Sign1 is an array of 4 elements");
  const [protectedBytes, unprotectedValue, payload, signature] = parts as unknown[];
  if (!(protectedBytes instanceof Uint8Array)) throw malformed("the protected header is not a byte string");
  if (!(unprotectedValue instanceof Map)) throw malformed("the unprotected header is not a map");
  const unprotected: HeaderMap = unprotectedValue;
  // A null payload is a detached one: the Notary envelope always embeds it.
  if (!(payload instanceof Uint8Array)) throw malformed("the payload is not an embedded byte string");
  if (!(signature instanceof Uint8Array)) throw malformed("the signature is not a byte string");

  // RFC 9052 §3: a zero-length protected header stands for the empty map.
  const protectedValue = protectedBytes.byteLength === 0 ? new Map() : decodeCbor(protectedBytes, "the protected header");
  if (!(protectedValue instanceof Map)) throw malformed("the protected header is not a map");
  const protectedHeader: HeaderMap = protectedValue;
  checkLabels(protectedHeader, "protected");
  checkLabels(unprotected, "unprotected");
  for (const label of unprotected.keys()) {
    // RFC 9052 §3: a label is in one bucket only, so an unsigned copy cannot stand in for a signed one.
    if (protectedHeader.has(label)) throw malformed(`header ${String(label)} is in both the protected and the unprotected header`);
  }
  if (unprotected.has(LABEL_CRIT)) throw new NotationEnvelopeError("critical-header", "crit must be in the protected header");

  const algorithm = algorithmOf(protectedHeader.get(LABEL_ALG));
  const critical = criticalOf(protectedHeader);
  const contentType = protectedHeader.get(LABEL_CONTENT_TYPE);
  // A text content type only: the integer form (a CoAP Content-Format) names no Notary payload.
  if (contentType !== NOTATION_PAYLOAD_CONTENT_TYPE)
    throw new NotationEnvelopeError("content-type", `the content type must be ${NOTATION_PAYLOAD_CONTENT_TYPE}, got ${describe(contentType)}`);
  const signingTime = timeOf(protectedHeader, SIGNING_TIME);
  const authenticSigningTime = timeOf(protectedHeader, AUTHENTIC_SIGNING_TIME);
  const expiry = timeOf(protectedHeader, EXPIRY);

  const certificateChain = chainOf(unprotected.get(LABEL_X5CHAIN));
  const leaf = parseCertificate(certificateChain[0]!);
  // The leaf key decides the algorithm, so an envelope cannot name a weaker one than its key implies.
  const keyAlgorithm = algorithmForKey(leaf.publicKey);
  if (keyAlgorithm !== algorithm)
    throw new NotationEnvelopeError(
      "algorithm",
      `the envelope's algorithm ${algorithm} is not the one its leaf key implies (${keyAlgorithm ?? "none allowed"})`,
    );
  // RFC 9052 §4.4: the protected header goes in as the bytes received, never re-encoded; no external data.
  const toBeSigned = encode(["Signature1", protectedBytes, new Uint8Array(0), payload]);
  if (!verifySignature(algorithm, leaf.publicKey, toBeSigned, signature))
    throw new NotationEnvelopeError("signature", "the signature does not verify with the leaf certificate's key");

  const scheme = protectedHeader.get(SIGNING_SCHEME);
  // A scheme that is not text (an integer decodes as a bigint) is named here for what it is.
  if (scheme !== undefined && typeof scheme !== "string")
    throw new NotationEnvelopeError("missing-header", `${SIGNING_SCHEME} must be text, got ${describe(scheme)}`);
  const signingScheme = checkSignedAttributes({
    scheme,
    signingTime,
    authenticSigningTime,
    expiry,
    critical,
    present: (name) => protectedHeader.has(name),
  });

  const timestampToken = unprotected.get(TIMESTAMP_SIGNATURE);
  if (timestampToken !== undefined && !(timestampToken instanceof Uint8Array)) throw malformed(`${TIMESTAMP_SIGNATURE} is not a byte string`);
  // Informational only: the specification says never to fail on it, so a non-text one is dropped.
  const signingAgent = unprotected.get(SIGNING_AGENT);

  const envelope: VerifiedEnvelope = {
    mediaType: COSE_ENVELOPE_MEDIA_TYPE,
    // Copies: what is returned must not change when the caller reuses its buffer.
    payload: payload.slice(),
    signingScheme,
    algorithm,
    certificateChain: certificateChain.map((der) => der.slice()),
    signature: signature.slice(),
  };
  if (signingTime) envelope.signingTime = signingTime;
  if (authenticSigningTime) envelope.authenticSigningTime = authenticSigningTime;
  if (expiry) envelope.expiry = expiry;
  if (timestampToken) envelope.timestampToken = timestampToken.slice();
  if (typeof signingAgent === "string") envelope.signingAgent = signingAgent;
  return envelope;
}

function malformed(message: string): NotationEnvelopeError {
  return new NotationEnvelopeError("malformed", message);
}

function decodeCbor(bytes: Uint8Array, what: string): unknown {
  try {
    return decode(bytes, DECODE_OPTIONS);
  } catch (e) {
    throw new NotationEnvelopeError("malformed", `${what} is not CBOR: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
  }
}

function describe(value: unknown): string {
  if (typeof value === "bigint") return value.toString();
  if (value instanceof Uint8Array) return "a byte string";
  if (value instanceof Tag) return `tag ${String(value.tag)}`;
  return value === undefined ? "none" : typeof value === "string" ? JSON.stringify(value) : typeof value;
}

/** RFC 9052 §3: header labels are integers or text strings. */
function checkLabels(header: HeaderMap, bucket: string): void {
  for (const label of header.keys()) {
    if (typeof label !== "bigint" && typeof label !== "string") throw malformed(`the ${bucket} header has a label that is neither an integer nor text`);
  }
}

function algorithmOf(value: unknown): NotationAlgorithm {
  const algorithm = typeof value === "bigint" ? COSE_ALGORITHMS.get(value) : undefined;
  if (!algorithm) throw new NotationEnvelopeError("algorithm", `the protected header's alg (${describe(value)}) is not PS256/384/512 or ES256/384/512`);
  return algorithm;
}

/** The critical headers' names: text labels only, since every header this verifier understands has one. */
function criticalOf(protectedHeader: HeaderMap): string[] {
  const crit = protectedHeader.get(LABEL_CRIT);
  if (crit === undefined) throw new NotationEnvelopeError("critical-header", `the protected header has no crit (${SIGNING_SCHEME} must be marked critical)`);
  if (!Array.isArray(crit)) throw malformed("crit is not an array");
  if (crit.length === 0) throw new NotationEnvelopeError("critical-header", "crit is empty");
  const names: string[] = [];
  for (const entry of crit as unknown[]) {
    if (typeof entry === "bigint") {
      throw new NotationEnvelopeError(
        "critical-header",
        entry >= 0n && entry <= LAST_COMMON_LABEL ? `crit must not list COSE's common header ${entry}` : `unknown critical header ${entry}`,
      );
    }
    if (typeof entry !== "string") throw malformed("a crit entry is neither an integer nor text");
    names.push(entry);
  }
  return names;
}

/** A Notary time attribute: tag 1 around integer seconds since the epoch, nothing else. */
function timeOf(protectedHeader: HeaderMap, name: string): Date | undefined {
  const value = protectedHeader.get(name);
  if (value === undefined) return undefined;
  if (!(value instanceof Tag) || Number(value.tag) !== EPOCH_TIME_TAG || typeof value.contents !== "bigint")
    throw malformed(`${name} must be CBOR tag 1 around integer seconds, got ${describe(value)}`);
  const millis = value.contents * 1000n;
  // The range a Date holds (±10^8 days).
  if (millis > 8_640_000_000_000_000n || millis < -8_640_000_000_000_000n) throw malformed(`${name} is out of range`);
  return new Date(Number(millis));
}

/** x5chain: an array of DER certificates, leaf first. The specification's one-certificate bstr form is refused, as notation does. */
function chainOf(value: unknown): Uint8Array[] {
  if (value === undefined) throw new NotationEnvelopeError("missing-header", "the unprotected header has no x5chain (label 33)");
  if (!Array.isArray(value)) throw malformed("x5chain is not an array of certificates");
  if (value.length === 0) throw new NotationEnvelopeError("missing-header", "x5chain holds no certificate");
  const chain: Uint8Array[] = [];
  for (const der of value as unknown[]) {
    if (!(der instanceof Uint8Array)) throw malformed("an x5chain entry is not a byte string");
    chain.push(der);
  }
  return chain;
}

function parseCertificate(der: Uint8Array): X509Certificate {
  try {
    return new X509Certificate(der);
  } catch (e) {
    throw new NotationEnvelopeError("malformed", "the leaf certificate in x5chain is not an X.509 certificate", { cause: e });
  }
}

function verifySignature(algorithm: NotationAlgorithm, key: KeyObject, data: Uint8Array, signature: Uint8Array): boolean {
  const hash = hashOf(algorithm);
  try {
    return algorithm.startsWith("ES")
      ? // COSE's ECDSA signatures are r‖s at the curve's size (RFC 9053 §2.1), not DER.
        verify(hash, data, { key, dsaEncoding: "ieee-p1363" }, signature)
      : // PSS with MGF1 over the same hash and a salt as long as the hash (RFC 8230; what notation signs with).
        verify(hash, data, { key, padding: constants.RSA_PKCS1_PSS_PADDING, saltLength: HASH_BYTES[hash] }, signature);
  } catch {
    // A signature node:crypto cannot even parse is one that does not verify.
    return false;
  }
}
