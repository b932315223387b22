// A Notary Project signature envelope, read (the image-verification design's Notation attestor; the Notary Project
// signature specification v1.1). Two encodings carry the same signed attributes: JWS JSON serialisation
// (application/jose+json, jws-envelope.ts) and COSE_Sign1 (application/cose, cose-envelope.ts). Both readers check
// the envelope's own rules (required and critical headers, the algorithm the signing key implies, the signature
// over the signed bytes) and hand back what the later steps judge: the chain against trust stores and identities
// (notation-certificates.ts), the times, the payload against the admitted image (notation-payload.ts).
import { ImprimaturError } from "../errors/imprimatur-error.ts";

/** The artifact type of a Notary Project signature manifest (OCI 1.1 referrers, or its config media type). */
export const NOTATION_SIGNATURE_ARTIFACT_TYPE = "application/vnd.cncf.notary.signature";
export const JWS_ENVELOPE_MEDIA_TYPE = "application/jose+json";
export const COSE_ENVELOPE_MEDIA_TYPE = "application/cose";
/** The only payload content type the specification defines: a JSON object naming the signed artifact. */
export const NOTATION_PAYLOAD_CONTENT_TYPE = "application/vnd.cncf.notary.payload.v1+json";

export const SIGNING_SCHEME = "io.cncf.notary.signingScheme";
export const SIGNING_TIME = "io.cncf.notary.signingTime";
export const AUTHENTIC_SIGNING_TIME = "io.cncf.notary.authenticSigningTime";
export const EXPIRY = "io.cncf.notary.expiry";
export const VERIFICATION_PLUGIN = "io.cncf.notary.verificationPlugin";
export const VERIFICATION_PLUGIN_MIN_VERSION = "io.cncf.notary.verificationPluginMinVersion";
export const TIMESTAMP_SIGNATURE = "io.cncf.notary.timestampSignature";
export const SIGNING_AGENT = "io.cncf.notary.signingAgent";

/** notary.x509: a signer's own certificate; notary.x509.signingAuthority: a signing service's, with an authentic time. */
export type SigningScheme = "notary.x509" | "notary.x509.signingAuthority";

/** The algorithms the specification allows, by their JWS names (COSE's integers map onto them). */
export type NotationAlgorithm = "PS256" | "PS384" | "PS512" | "ES256" | "ES384" | "ES512";

export type NotationEnvelopeErrorCode =
  /** Not an envelope of its media type at all (not JSON, not CBOR, a field of the wrong type). */
  | "malformed"
  /** A required header is missing, or one is present that the scheme forbids. */
  | "missing-header"
  /** A header marked critical that this verifier does not understand, or a required one not marked critical. */
  | "critical-header"
  /** The algorithm is not allowed, or is not the one the signing key implies. */
  | "algorithm"
  /** The signature does not verify with the leaf certificate's key. */
  | "signature"
  /** The payload's content type is not the Notary payload's. */
  | "content-type"
  /** The envelope is larger than verification reads. */
  | "too-large";

export class NotationEnvelopeError extends ImprimaturError<NotationEnvelopeErrorCode> {}

/** What a read envelope says, once its signature verified with its leaf certificate's key. */
export interface VerifiedEnvelope {
  mediaType: typeof JWS_ENVELOPE_MEDIA_TYPE | typeof COSE_ENVELOPE_MEDIA_TYPE;
  /** The signed payload's bytes (JSON: notation-payload.ts reads them). */
  payload: Uint8Array;
  signingScheme: SigningScheme;
  algorithm: NotationAlgorithm;
  /** notary.x509's signingTime: the signer's claim, not authentic (used only to order it before the expiry). */
  signingTime?: Date;
  /** notary.x509.signingAuthority's authenticSigningTime: the time the chain must be valid at. */
  authenticSigningTime?: Date;
  expiry?: Date;
  /** The certificate chain as the envelope carries it, leaf first, DER. */
  certificateChain: Uint8Array[];
  /** The signature bytes: what an RFC 3161 countersignature's message imprint is computed over. */
  signature: Uint8Array;
  /** The RFC 3161 TimeStampToken (DER), when the envelope carries one. */
  timestampToken?: Uint8Array;
  /** The signing tool, as the envelope names it (informational). */
  signingAgent?: string;
}

/** The most an envelope may be: notation itself refuses envelopes over 32 MiB; one is a few KiB. */
export const MAX_ENVELOPE_BYTES = 4 * 1024 * 1024;

/** The hash each algorithm signs with (and an RFC 3161 request for its signature uses). */
export function hashOf(algorithm: NotationAlgorithm): "sha256" | "sha384" | "sha512" {
  return algorithm.endsWith("256") ? "sha256" : algorithm.endsWith("384") ? "sha384" : "sha512";
}

/**
 * The algorithm a leaf key implies (the specification ties one to each key, so a signature cannot choose a weaker
 * one): RSA 2048/3072/4096 bits → PS256/384/512, EC P-256/384/521 → ES256/384/512. Undefined: no allowed algorithm.
 */
export function algorithmForKey(key: {
  asymmetricKeyType?: string;
  asymmetricKeyDetails?: { modulusLength?: number; namedCurve?: string };
}): NotationAlgorithm | undefined {
  const details = key.asymmetricKeyDetails ?? {};
  // Only plain RSA keys: an RSASSA-PSS key may carry parameters of its own that the fixed salt length would not meet.
  if (key.asymmetricKeyType === "rsa") {
    return details.modulusLength === 2048 ? "PS256" : details.modulusLength === 3072 ? "PS384" : details.modulusLength === 4096 ? "PS512" : undefined;
  }
  if (key.asymmetricKeyType === "ec") {
    return details.namedCurve === "prime256v1"
      ? "ES256"
      : details.namedCurve === "secp384r1"
        ? "ES384"
        : details.namedCurve === "secp521r1"
          ? "ES512"
          : undefined;
  }
  return undefined;
}

/**
 * The signed attributes' rules, the same for both encodings: the scheme is one of the two, its time attribute is
 * present (and the other one absent), the required ones are marked critical, an expiry comes after the signing time,
 * and every critical attribute is one this verifier understands. `critical` holds the names the envelope marks
 * critical; `present` says whether a protected attribute exists.
 */
export function checkSignedAttributes(attrs: {
  scheme: unknown;
  signingTime: Date | undefined;
  authenticSigningTime: Date | undefined;
  expiry: Date | undefined;
  critical: readonly string[];
  present: (name: string) => boolean;
}): SigningScheme {
  const { scheme, critical } = attrs;
  if (scheme !== "notary.x509" && scheme !== "notary.x509.signingAuthority")
    throw new NotationEnvelopeError(
      "missing-header",
      `${SIGNING_SCHEME} must be notary.x509 or notary.x509.signingAuthority, got ${typeof scheme === "string" ? JSON.stringify(scheme) : typeof scheme}`,
    );
  const mustBeCritical = [SIGNING_SCHEME, ...(attrs.expiry ? [EXPIRY] : []), ...(scheme === "notary.x509.signingAuthority" ? [AUTHENTIC_SIGNING_TIME] : [])];
  for (const name of mustBeCritical) if (!critical.includes(name)) throw new NotationEnvelopeError("critical-header", `${name} must be marked critical`);
  if (scheme === "notary.x509") {
    if (!attrs.signingTime) throw new NotationEnvelopeError("missing-header", `notary.x509 requires ${SIGNING_TIME}`);
    if (attrs.present(AUTHENTIC_SIGNING_TIME)) throw new NotationEnvelopeError("missing-header", `notary.x509 must not carry ${AUTHENTIC_SIGNING_TIME}`);
  } else {
    if (!attrs.authenticSigningTime) throw new NotationEnvelopeError("missing-header", `notary.x509.signingAuthority requires ${AUTHENTIC_SIGNING_TIME}`);
    if (attrs.present(SIGNING_TIME)) throw new NotationEnvelopeError("missing-header", `notary.x509.signingAuthority must not carry ${SIGNING_TIME}`);
  }
  const signedAt = attrs.signingTime ?? attrs.authenticSigningTime!;
  if (attrs.expiry && attrs.expiry.getTime() <= signedAt.getTime())
    throw new NotationEnvelopeError("malformed", `${EXPIRY} (${attrs.expiry.toISOString()}) is not after the signing time (${signedAt.toISOString()})`);
  // A verification plugin is a program the signer names and the verifier runs: not something an admission server
  // runs. The specification says a verifier that cannot honour it fails.
  if (attrs.present(VERIFICATION_PLUGIN) || attrs.present(VERIFICATION_PLUGIN_MIN_VERSION))
    throw new NotationEnvelopeError("critical-header", `the signature requires a verification plugin (${VERIFICATION_PLUGIN}); plugins are not supported`);
  for (const name of critical) {
    if (!attrs.present(name)) throw new NotationEnvelopeError("critical-header", `${JSON.stringify(name)} is marked critical but is not a protected header`);
    if (!UNDERSTOOD_CRITICAL.has(name)) throw new NotationEnvelopeError("critical-header", `unknown critical header ${JSON.stringify(name)}`);
  }
  return scheme;
}

const UNDERSTOOD_CRITICAL = new Set([SIGNING_SCHEME, AUTHENTIC_SIGNING_TIME, EXPIRY]);
