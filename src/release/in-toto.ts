// In-toto statements and the DSSE envelopes that sign them, as cosign writes them: Statement v1 about one
// subject (an image: its name and digest), cosign v3's image signature statement (predicate type
// https://sigstore.dev/cosign/sign/v1, empty predicate), and a single-signature DSSE envelope over the statement's
// JSON with payload type application/vnd.in-toto+json. What src/verification/ accepts; the test signer
// (test/support/signer/) builds its statements and envelopes with these too.
import { COSIGN_SIGN_PREDICATE } from "../verification/signed-item.ts";
import { dsseHash, signBytes, type SignatureHash, type SignerKey } from "./signing-key.ts";

export const IN_TOTO_STATEMENT_V1 = "https://in-toto.io/Statement/v1";
/** The DSSE payload type of an in-toto statement. */
export const IN_TOTO_PAYLOAD_TYPE = "application/vnd.in-toto+json";
export { COSIGN_SIGN_PREDICATE };

export interface DsseEnvelopeJson {
  payloadType: string;
  /** base64 */
  payload: string;
  signatures: Array<{ keyid: string; sig: string }>;
}

/** An in-toto Statement v1 about one subject; `digest` is "sha256:<hex>" (or another algorithm's). */
export function inTotoStatement(opts: { subjectName: string; digest: string; predicateType: string; predicate?: unknown }): Record<string, unknown> {
  const colon = opts.digest.indexOf(":");
  const algorithm = colon > 0 ? opts.digest.slice(0, colon) : "sha256";
  return {
    _type: IN_TOTO_STATEMENT_V1,
    subject: [{ name: opts.subjectName, digest: { [algorithm]: opts.digest.slice(colon + 1) } }],
    predicateType: opts.predicateType,
    predicate: opts.predicate ?? {},
  };
}

/** cosign's image signature statement (cosign sign --new-bundle-format): predicate sign/v1, empty predicate. */
export function imageSignatureStatement(opts: { name: string; digest: string }): Record<string, unknown> {
  return inTotoStatement({ subjectName: opts.name, digest: opts.digest, predicateType: COSIGN_SIGN_PREDICATE, predicate: {} });
}

/** DSSE pre-authentication encoding (DSSE v1 protocol): what a DSSE signature covers. */
export function preAuthEncoding(payloadType: string, payload: Buffer): Buffer {
  const type = Buffer.from(payloadType, "utf8");
  return Buffer.concat([Buffer.from(`DSSEv1 ${type.length} `), type, Buffer.from(` ${payload.length} `), payload]);
}

/** A single-signature DSSE envelope over `payload`; returns the signature too (for logging and timestamps). */
export function signDsseEnvelope(
  key: SignerKey,
  payload: Buffer,
  opts: { payloadType?: string; keyid?: string; hash?: SignatureHash | null } = {},
): { envelope: DsseEnvelopeJson; signature: Buffer } {
  const payloadType = opts.payloadType ?? IN_TOTO_PAYLOAD_TYPE;
  const signature = signBytes(key, preAuthEncoding(payloadType, payload), opts.hash === undefined ? dsseHash(key) : opts.hash);
  return {
    envelope: { payloadType, payload: payload.toString("base64"), signatures: [{ keyid: opts.keyid ?? "", sig: signature.toString("base64") }] },
    signature,
  };
}
