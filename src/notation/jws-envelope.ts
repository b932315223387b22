// A Notary Project signature envelope in JWS JSON serialisation (application/jose+json), read and its signature
// checked with the leaf certificate's key. The signature itself is checked by `jose` (the well-kept JOSE library
// for Node.js: RFC 7515 signing input, PS*/ES* with the key types each needs, critical headers); what the Notary
// Project adds on top — which headers are required and critical, the algorithm the key implies, the certificate
// chain in `x5c` — is checked here first, so that a refusal names the rule it breaks.
import { X509Certificate } from "node:crypto";
import { flattenedVerify, type FlattenedJWSInput } from "jose";
import { asObject } from "../core/primitives/json-shapes.ts";
import {
  AUTHENTIC_SIGNING_TIME,
  EXPIRY,
  JWS_ENVELOPE_MEDIA_TYPE,
  MAX_ENVELOPE_BYTES,
  NOTATION_PAYLOAD_CONTENT_TYPE,
  NotationEnvelopeError,
  SIGNING_AGENT,
  SIGNING_SCHEME,
  SIGNING_TIME,
  TIMESTAMP_SIGNATURE,
  algorithmForKey,
  checkSignedAttributes,
  type NotationAlgorithm,
  type VerifiedEnvelope,
} from "./notation-envelope.ts";

const TOP_LEVEL = new Set(["payload", "protected", "header", "signature"]);
const ALGORITHMS = new Set<string>(["PS256", "PS384", "PS512", "ES256", "ES384", "ES512"]);
/** RFC 3339 date-time (the specification's time format). */
const RFC3339 = /^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/;
const BASE64URL = /^[A-Za-z0-9_-]*$/;

/** Reads a JWS envelope and checks its signature with its leaf certificate's key; throws NotationEnvelopeError. */
export async function readJwsEnvelope(bytes: Uint8Array): Promise<VerifiedEnvelope> {
  if (bytes.length > MAX_ENVELOPE_BYTES)
    throw new NotationEnvelopeError("too-large", `the envelope is ${bytes.length} bytes, over the ${MAX_ENVELOPE_BYTES} read`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
  } catch (e) {
    throw new NotationEnvelopeError("malformed", `not a JSON envelope: ${(e as Error).message}`);
  }
  const jws = asObject(parsed);
  if (!jws) throw new NotationEnvelopeError("malformed", "the envelope is not a JSON object");
  for (const key of Object.keys(jws))
    if (!TOP_LEVEL.has(key))
      throw new NotationEnvelopeError("malformed", `unexpected member ${JSON.stringify(key)} (flattened JWS JSON has payload, protected, header, signature)`);
  for (const key of ["payload", "protected", "signature"] as const)
    if (typeof jws[key] !== "string" || !BASE64URL.test(jws[key])) throw new NotationEnvelopeError("malformed", `${key} must be a base64url string`);
  const unprotected = asObject(jws.header);
  if (!unprotected) throw new NotationEnvelopeError("missing-header", "the unprotected header (with the certificate chain, x5c) is missing");

  const protectedHeader = decodeProtected(jws.protected as string);
  const alg = protectedHeader.alg;
  if (typeof alg !== "string" || !ALGORITHMS.has(alg))
    throw new NotationEnvelopeError("algorithm", `alg ${JSON.stringify(alg)} is not one the Notary Project allows`);
  if (protectedHeader.cty !== NOTATION_PAYLOAD_CONTENT_TYPE)
    throw new NotationEnvelopeError("content-type", `cty must be ${NOTATION_PAYLOAD_CONTENT_TYPE}, got ${JSON.stringify(protectedHeader.cty)}`);
  const crit = protectedHeader.crit;
  if (!Array.isArray(crit) || crit.length === 0 || !crit.every((c) => typeof c === "string"))
    throw new NotationEnvelopeError("critical-header", "crit must be a non-empty list of header names");
  for (const name of crit)
    if (REGISTERED.has(name)) throw new NotationEnvelopeError("critical-header", `crit must not list the registered header ${JSON.stringify(name)}`);
  const signingTime = timeAttribute(protectedHeader, SIGNING_TIME);
  const authenticSigningTime = timeAttribute(protectedHeader, AUTHENTIC_SIGNING_TIME);
  const expiry = timeAttribute(protectedHeader, EXPIRY);
  const scheme = checkSignedAttributes({
    scheme: protectedHeader[SIGNING_SCHEME],
    signingTime,
    authenticSigningTime,
    expiry,
    critical: crit as string[],
    present: (name) => Object.hasOwn(protectedHeader, name),
  });

  const chain = certificateChain(unprotected.x5c);
  const leaf = parseCertificate(chain[0]!, 0);
  const expected = algorithmForKey(leaf.publicKey);
  if (!expected) throw new NotationEnvelopeError("algorithm", `the signing certificate's key (${describeKey(leaf)}) is not one the Notary Project allows`);
  if (alg !== expected)
    throw new NotationEnvelopeError("algorithm", `alg ${alg} does not match the signing certificate's key (${describeKey(leaf)}: ${expected})`);

  let payload: Uint8Array;
  try {
    const result = await flattenedVerify(jws as unknown as FlattenedJWSInput, leaf.publicKey, {
      algorithms: [expected],
      // Every critical name was checked above (checkSignedAttributes); jose then only checks their presence again.
      crit: Object.fromEntries((crit as string[]).map((name) => [name, true])),
    });
    payload = result.payload;
  } catch (e) {
    throw new NotationEnvelopeError("signature", `the signature does not verify with the signing certificate's key: ${(e as Error).message}`);
  }

  const timestamp = unprotected[TIMESTAMP_SIGNATURE];
  if (timestamp !== undefined && typeof timestamp !== "string") throw new NotationEnvelopeError("malformed", `${TIMESTAMP_SIGNATURE} must be a base64 string`);
  const signingAgent = unprotected[SIGNING_AGENT];
  return {
    mediaType: JWS_ENVELOPE_MEDIA_TYPE,
    payload,
    signingScheme: scheme,
    algorithm: expected as NotationAlgorithm,
    ...(signingTime ? { signingTime } : {}),
    ...(authenticSigningTime ? { authenticSigningTime } : {}),
    ...(expiry ? { expiry } : {}),
    certificateChain: chain,
    signature: Buffer.from(jws.signature as string, "base64url"),
    ...(timestamp ? { timestampToken: strictBase64(timestamp, TIMESTAMP_SIGNATURE) } : {}),
    ...(typeof signingAgent === "string" ? { signingAgent } : {}),
  };
}

/** RFC 7515's registered header names: crit must not list them. */
const REGISTERED = new Set(["alg", "jku", "jwk", "kid", "x5u", "x5c", "x5t", "x5t#S256", "typ", "cty", "crit"]);

function decodeProtected(text: string): Record<string, unknown> {
  let header: unknown;
  try {
    header = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(Buffer.from(text, "base64url")));
  } catch (e) {
    throw new NotationEnvelopeError("malformed", `the protected header is not base64url JSON: ${(e as Error).message}`);
  }
  const object = asObject(header);
  if (!object) throw new NotationEnvelopeError("malformed", "the protected header is not a JSON object");
  return object;
}

function timeAttribute(header: Record<string, unknown>, name: string): Date | undefined {
  const value = header[name];
  if (value === undefined) return undefined;
  if (typeof value !== "string" || !RFC3339.test(value) || Number.isNaN(Date.parse(value)))
    throw new NotationEnvelopeError("malformed", `${name} must be an RFC 3339 time, got ${JSON.stringify(value)}`);
  return new Date(value);
}

/** x5c: standard base64 DER certificates, leaf first (RFC 7515 section 4.1.6). */
function certificateChain(x5c: unknown): Uint8Array[] {
  if (x5c === undefined) throw new NotationEnvelopeError("missing-header", "the certificate chain (x5c) is missing");
  if (!Array.isArray(x5c) || x5c.length === 0 || !x5c.every((c) => typeof c === "string"))
    throw new NotationEnvelopeError("malformed", "x5c must be a non-empty list of base64 certificates");
  return x5c.map((c: string, i) => strictBase64(c, `x5c[${i}]`));
}

function strictBase64(text: string, what: string): Uint8Array {
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(text) || text.length % 4 !== 0) throw new NotationEnvelopeError("malformed", `${what} is not standard base64`);
  return new Uint8Array(Buffer.from(text, "base64"));
}

function parseCertificate(der: Uint8Array, index: number): X509Certificate {
  try {
    return new X509Certificate(der);
  } catch (e) {
    throw new NotationEnvelopeError("malformed", `certificate ${index} of the chain cannot be read: ${(e as Error).message}`);
  }
}

function describeKey(cert: X509Certificate): string {
  const key = cert.publicKey;
  const details = key.asymmetricKeyDetails ?? {};
  return key.asymmetricKeyType === "ec"
    ? `EC ${details.namedCurve ?? "?"}`
    : `${(key.asymmetricKeyType ?? "?").toUpperCase()} ${details.modulusLength ?? "?"} bits`;
}
