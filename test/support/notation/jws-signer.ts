// Writes Notary Project JWS envelopes (application/jose+json) for tests, with node:crypto rather than a JOSE library,
// so that the reader (src/notation/jws-envelope.ts, which uses jose) is checked against an independent writer.
// Every rule the reader enforces can be broken on purpose.
import { constants, sign, type KeyObject } from "node:crypto";
import type { TestCertificate, TestKeyType } from "./test-pki.ts";

export const PAYLOAD_CONTENT_TYPE = "application/vnd.cncf.notary.payload.v1+json";

export interface NotationSignOptions {
  payload: Uint8Array | string;
  /** The signing certificate (its private key signs). */
  signer: TestCertificate;
  /** DER certificates, leaf first (default: the signer's alone). */
  chain?: Uint8Array[];
  scheme?: string;
  signingTime?: Date;
  authenticSigningTime?: Date;
  expiry?: Date;
  /** More protected headers (extended attributes). */
  extra?: Record<string, unknown>;
  /** crit as written (default: what the scheme and expiry require). */
  crit?: string[];
  /** alg as written (default: what the signer's key implies). */
  alg?: string;
  contentType?: string;
  timestampToken?: Uint8Array;
  signingAgent?: string;
  /** Change the payload after signing. */
  tamperPayload?: boolean;
}

export function algorithmFor(keyType: TestKeyType): string {
  switch (keyType) {
    case "ec-p256":
      return "ES256";
    case "ec-p384":
      return "ES384";
    case "ec-p521":
      return "ES512";
    case "rsa-3072":
      return "PS384";
    case "rsa-4096":
      return "PS512";
    default:
      return "PS256";
  }
}

/** Signs `data` as the algorithm says: ECDSA as raw r||s, RSASSA-PSS with the salt as long as the hash. */
export function signBytes(alg: string, key: KeyObject, data: Uint8Array): Buffer {
  const hash = alg.endsWith("256") ? "sha256" : alg.endsWith("384") ? "sha384" : "sha512";
  if (alg.startsWith("ES")) return sign(hash, data, { key, dsaEncoding: "ieee-p1363" });
  return sign(hash, data, { key, padding: constants.RSA_PKCS1_PSS_PADDING, saltLength: Number(hash.slice(3)) / 8 });
}

/** RFC 3339 without fractional seconds, as notation writes it. */
export function rfc3339(date: Date): string {
  return date.toISOString().replace(/\.\d{3}Z$/, "Z");
}

export function defaultCrit(o: Pick<NotationSignOptions, "scheme" | "expiry">): string[] {
  const scheme = o.scheme ?? "notary.x509";
  return [
    "io.cncf.notary.signingScheme",
    ...(o.expiry ? ["io.cncf.notary.expiry"] : []),
    ...(scheme === "notary.x509.signingAuthority" ? ["io.cncf.notary.authenticSigningTime"] : []),
  ];
}

export function signJwsEnvelope(o: NotationSignOptions): Uint8Array {
  const scheme = o.scheme ?? "notary.x509";
  const alg = o.alg ?? algorithmFor(o.signer.keyType);
  const header: Record<string, unknown> = {
    alg,
    cty: o.contentType ?? PAYLOAD_CONTENT_TYPE,
    crit: o.crit ?? defaultCrit(o),
    "io.cncf.notary.signingScheme": scheme,
  };
  if (o.signingTime ?? (scheme === "notary.x509" && o.authenticSigningTime === undefined ? new Date() : undefined))
    header["io.cncf.notary.signingTime"] = rfc3339(o.signingTime ?? new Date());
  if (o.authenticSigningTime ?? (scheme === "notary.x509.signingAuthority" ? new Date() : undefined))
    header["io.cncf.notary.authenticSigningTime"] = rfc3339(o.authenticSigningTime ?? new Date());
  if (o.expiry) header["io.cncf.notary.expiry"] = rfc3339(o.expiry);
  Object.assign(header, o.extra ?? {});
  const protectedB64 = Buffer.from(JSON.stringify(header)).toString("base64url");
  const payload = typeof o.payload === "string" ? Buffer.from(o.payload) : Buffer.from(o.payload);
  const payloadB64 = payload.toString("base64url");
  // The key signs as its own algorithm implies, whatever alg the header claims (a mismatch is the reader's to find).
  const signature = signBytes(algorithmFor(o.signer.keyType), o.signer.privateKey, Buffer.from(`${protectedB64}.${payloadB64}`));
  const unprotected: Record<string, unknown> = {
    x5c: (o.chain ?? [o.signer.der]).map((der) => Buffer.from(der).toString("base64")),
    ...(o.signingAgent ? { "io.cncf.notary.signingAgent": o.signingAgent } : {}),
    ...(o.timestampToken ? { "io.cncf.notary.timestampSignature": Buffer.from(o.timestampToken).toString("base64") } : {}),
  };
  // A trailing space: the same JSON to a reader, other bytes to the signature.
  const finalPayload = o.tamperPayload ? Buffer.concat([payload, Buffer.from(" ")]).toString("base64url") : payloadB64;
  return Buffer.from(JSON.stringify({ payload: finalPayload, protected: protectedB64, header: unprotected, signature: signature.toString("base64url") }));
}

/** The Notary payload naming a manifest. */
export function notationPayload(target: { mediaType: string; digest: string; size: number; annotations?: Record<string, string> }): string {
  return JSON.stringify({ targetArtifact: target });
}
