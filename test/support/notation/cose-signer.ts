// Notary Project signature envelopes in COSE form (COSE_Sign1, application/cose) for tests: a valid one by default,
// with a knob for each way a test needs one broken (a header missing or of the wrong type, a crit list that says
// something else, a payload changed after signing). It keeps its own algorithm table rather than the reader's, so
// that a wrong entry in one does not hide behind the same entry in the other.
import { constants, sign } from "node:crypto";
import { encode, Tag } from "cbor2";
import type { TestCertificate, TestKeyType } from "./test-pki.ts";

export const COSE_ALG = { PS256: -37, PS384: -38, PS512: -39, ES256: -7, ES384: -35, ES512: -36 } as const;

const NOTARY_PAYLOAD = "application/vnd.cncf.notary.payload.v1+json";
const SCHEME = "io.cncf.notary.signingScheme";
const SIGNING_TIME = "io.cncf.notary.signingTime";
const AUTHENTIC_SIGNING_TIME = "io.cncf.notary.authenticSigningTime";
const EXPIRY = "io.cncf.notary.expiry";

/** The algorithm notation picks for each key (RSA-1024 has none: it gets PS256, which a verifier must refuse). */
const ALG_FOR_KEY: Record<TestKeyType, number> = {
  "ec-p256": COSE_ALG.ES256,
  "ec-p384": COSE_ALG.ES384,
  "ec-p521": COSE_ALG.ES512,
  "rsa-1024": COSE_ALG.PS256,
  "rsa-2048": COSE_ALG.PS256,
  "rsa-3072": COSE_ALG.PS384,
  "rsa-4096": COSE_ALG.PS512,
};

const HASH_FOR_ALG = new Map<number, "sha256" | "sha384" | "sha512">([
  [COSE_ALG.PS256, "sha256"],
  [COSE_ALG.ES256, "sha256"],
  [COSE_ALG.PS384, "sha384"],
  [COSE_ALG.ES384, "sha384"],
  [COSE_ALG.PS512, "sha512"],
  [COSE_ALG.ES512, "sha512"],
]);

type Label = string | number;

export interface CoseSignOptions {
  payload: Uint8Array;
  /** The leaf: its private key signs, its key type picks the algorithm. */
  signer: TestCertificate;
  /** x5chain, leaf first (DER). Default: the signer's certificate alone. null: no x5chain. */
  chain?: Uint8Array[] | null;
  /** io.cncf.notary.signingScheme. Default notary.x509; null: absent. */
  scheme?: string | null;
  /** Default: now for notary.x509, absent for signingAuthority. null: absent. */
  signingTime?: Date | null;
  /** Default: now for notary.x509.signingAuthority, absent for notary.x509. null: absent. */
  authenticSigningTime?: Date | null;
  expiry?: Date;
  /** crit. Default: the scheme, plus authenticSigningTime and expiry when present. null: absent. */
  crit?: unknown[] | null;
  /** alg (label 1). Default: the one the signer's key implies. null: absent. */
  alg?: unknown;
  /** Content type (label 3). Default: the Notary payload's. null: absent. */
  contentType?: unknown;
  /** More protected headers, set last: they may replace any of the above with a value of the wrong type. */
  protectedHeaders?: Iterable<[Label, unknown]>;
  /** More unprotected headers, set last as well. */
  unprotectedHeaders?: Iterable<[Label, unknown]>;
  /** io.cncf.notary.timestampSignature (unprotected). */
  timestampToken?: Uint8Array;
  /** io.cncf.notary.signingAgent (unprotected). */
  signingAgent?: string;
  /** The outer tag. Default 18 (COSE_Sign1); null: no tag. */
  tag?: number | null;
  /** Change a payload byte after signing. */
  tamperPayload?: boolean;
  /** Change a signature byte after signing. */
  tamperSignature?: boolean;
}

/** Epoch seconds under tag 1, as the Notary COSE envelope writes its times. */
export function epochTime(date: Date): Tag {
  return new Tag(1, Math.floor(date.getTime() / 1000));
}

/** A COSE_Sign1 Notary envelope over `payload`, signed with `signer`'s key, with the given headers. */
export function signCoseEnvelope(opts: CoseSignOptions): Uint8Array {
  const scheme = opts.scheme === undefined ? "notary.x509" : opts.scheme;
  const now = new Date();
  const signingTime = opts.signingTime === undefined ? (scheme === "notary.x509" ? now : null) : opts.signingTime;
  const authenticSigningTime = opts.authenticSigningTime === undefined ? (scheme === "notary.x509.signingAuthority" ? now : null) : opts.authenticSigningTime;
  const crit = opts.crit === undefined ? [SCHEME, ...(authenticSigningTime ? [AUTHENTIC_SIGNING_TIME] : []), ...(opts.expiry ? [EXPIRY] : [])] : opts.crit;
  const alg = opts.alg === undefined ? ALG_FOR_KEY[opts.signer.keyType] : opts.alg;
  const contentType = opts.contentType === undefined ? NOTARY_PAYLOAD : opts.contentType;

  const protectedHeader = new Map<Label, unknown>();
  if (alg !== null) protectedHeader.set(1, alg);
  if (crit !== null) protectedHeader.set(2, crit);
  if (contentType !== null) protectedHeader.set(3, contentType);
  if (scheme !== null) protectedHeader.set(SCHEME, scheme);
  if (signingTime) protectedHeader.set(SIGNING_TIME, epochTime(signingTime));
  if (authenticSigningTime) protectedHeader.set(AUTHENTIC_SIGNING_TIME, epochTime(authenticSigningTime));
  if (opts.expiry) protectedHeader.set(EXPIRY, epochTime(opts.expiry));
  for (const [label, value] of opts.protectedHeaders ?? []) protectedHeader.set(label, value);

  const unprotectedHeader = new Map<Label, unknown>();
  const chain = opts.chain === undefined ? [opts.signer.der] : opts.chain;
  if (chain !== null) unprotectedHeader.set(33, chain);
  if (opts.timestampToken) unprotectedHeader.set("io.cncf.notary.timestampSignature", opts.timestampToken);
  if (opts.signingAgent !== undefined) unprotectedHeader.set("io.cncf.notary.signingAgent", opts.signingAgent);
  for (const [label, value] of opts.unprotectedHeaders ?? []) unprotectedHeader.set(label, value);

  const protectedBytes = encode(protectedHeader);
  const payload = Uint8Array.from(opts.payload);
  const hash = (typeof alg === "number" ? HASH_FOR_ALG.get(alg) : undefined) ?? HASH_FOR_ALG.get(ALG_FOR_KEY[opts.signer.keyType])!;
  const signature = signWith(opts.signer, hash, encode(["Signature1", protectedBytes, new Uint8Array(0), payload]));
  if (opts.tamperPayload) payload[0] = (payload[0] ?? 0) ^ 1;
  if (opts.tamperSignature) signature[signature.length - 1] = (signature.at(-1) ?? 0) ^ 1;

  const sign1 = [protectedBytes, unprotectedHeader, payload, signature];
  return encode(opts.tag === null ? sign1 : new Tag(opts.tag ?? 18, sign1));
}

/** ECDSA as r‖s at the curve's size; RSA as PSS with a salt as long as the hash (what notation writes). */
function signWith(signer: TestCertificate, hash: "sha256" | "sha384" | "sha512", data: Uint8Array): Uint8Array {
  const key = signer.privateKey;
  const signature =
    key.asymmetricKeyType === "ec"
      ? sign(hash, data, { key, dsaEncoding: "ieee-p1363" })
      : sign(hash, data, { key, padding: constants.RSA_PKCS1_PSS_PADDING, saltLength: { sha256: 32, sha384: 48, sha512: 64 }[hash] });
  return new Uint8Array(signature);
}
