// A signature found in a registry, in the one form the verifier takes: a Sigstore bundle, the bytes it signs
// (for message signatures), and what the signed content must say to be about the admitted image. Cosign's
// legacy `.sig` layers are turned into bundles here, so they go through the same Sigstore verifier as
// bundles found as OCI referrers (nothing cryptographic is written by hand).
import { createHash } from "node:crypto";
import { bundleFromJSON, envelopeFromJSON, type Bundle, type TransparencyLogEntry } from "@sigstore/bundle";
import { HashAlgorithm } from "@sigstore/protobuf-specs";
import { ImprimaturError } from "../errors/imprimatur-error.ts";

export const COSIGN_SIMPLE_SIGNING = "application/vnd.dev.cosign.simplesigning.v1+json";
/** A cosign `.att` layer: a DSSE envelope holding an in-toto statement. */
export const DSSE_ENVELOPE = "application/vnd.dsse.envelope.v1+json";
export const ANNOTATION_SIGNATURE = "dev.cosignproject.cosign/signature";
export const ANNOTATION_CERTIFICATE = "dev.sigstore.cosign/certificate";
export const ANNOTATION_CHAIN = "dev.sigstore.cosign/chain";
export const ANNOTATION_REKOR_BUNDLE = "dev.sigstore.cosign/bundle";
export const ANNOTATION_RFC3161 = "dev.sigstore.cosign/rfc3161timestamp";
/** The media type of a bundle's manifest layer, v0.3 (cosign v3) and the older spellings. */
export const BUNDLE_MEDIA_TYPES: ReadonlySet<string> = new Set([
  "application/vnd.dev.sigstore.bundle.v0.3+json",
  "application/vnd.dev.sigstore.bundle+json;version=0.3",
  "application/vnd.dev.sigstore.bundle+json;version=0.2",
  "application/vnd.dev.sigstore.bundle+json;version=0.1",
]);
/** The in-toto predicate type of an image signature made as a DSSE bundle (cosign v3). */
export const COSIGN_SIGN_PREDICATE = "https://sigstore.dev/cosign/sign/v1";

export type SignedItemFormat = "cosign-signature" | "cosign-attestation" | "sigstore-bundle";

export interface SignedItem {
  format: SignedItemFormat;
  /** For messages: "tag sha256-….sig, layer 0", "referrer sha256:…". */
  location: string;
  bundle: Bundle;
  /** What a message signature signs (the cosign payload, or the image manifest); absent for DSSE. */
  artifact?: Buffer;
}

/** A signature that cannot even be read: reported with its location, never a crash. */
export class SignatureFormatError extends ImprimaturError<"malformed-signature"> {
  constructor(message: string) {
    super("malformed-signature", message);
  }
}

/** One layer of a cosign `.sig` manifest as a message-signature bundle over its payload. */
export function cosignLayerToItem(payload: Buffer, annotations: Readonly<Record<string, string>>, location: string): SignedItem {
  const signature = annotations[ANNOTATION_SIGNATURE];
  if (signature === undefined || signature === "") throw new SignatureFormatError(`${location}: no ${ANNOTATION_SIGNATURE} annotation`);
  const timestamp = annotations[ANNOTATION_RFC3161] ? rfc3161Of(annotations[ANNOTATION_RFC3161], location) : undefined;
  const bundle: Bundle = {
    mediaType: LEGACY_BUNDLE_MEDIA_TYPE,
    verificationMaterial: materialOf(annotations, location, timestamp),
    content: {
      $case: "messageSignature",
      messageSignature: {
        messageDigest: { algorithm: HashAlgorithm.SHA2_256, digest: createHash("sha256").update(payload).digest() },
        signature: base64(signature, `${location}: ${ANNOTATION_SIGNATURE}`),
      },
    },
  };
  return { format: "cosign-signature", location, bundle, artifact: payload };
}

/**
 * One layer of a cosign `.att` manifest (a DSSE envelope) as a DSSE bundle. cosign's RFC 3161 timestamp of an
 * attestation covers the whole envelope, which Sigstore's verifier does not model, so it is not used: keyless
 * attestations are timed by their Rekor entry.
 */
export function cosignAttestationToItem(envelope: Buffer, annotations: Readonly<Record<string, string>>, location: string): SignedItem {
  let parsed: unknown;
  try {
    parsed = JSON.parse(envelope.toString("utf8"));
  } catch (e) {
    throw new SignatureFormatError(`${location}: the DSSE envelope is not JSON: ${(e as Error).message}`);
  }
  let dsse;
  try {
    dsse = envelopeFromJSON(parsed);
  } catch (e) {
    throw new SignatureFormatError(`${location}: not a DSSE envelope: ${(e as Error).message}`);
  }
  if (dsse.signatures.length !== 1) throw new SignatureFormatError(`${location}: the DSSE envelope has ${dsse.signatures.length} signatures; one is supported`);
  const bundle: Bundle = {
    mediaType: LEGACY_BUNDLE_MEDIA_TYPE,
    verificationMaterial: materialOf(annotations, location, undefined),
    content: { $case: "dsseEnvelope", dsseEnvelope: dsse },
  };
  return { format: "cosign-attestation", location, bundle };
}

/** A bundle blob found as a referrer; `manifest` is the image manifest, what a message signature would sign. */
export function bundleToItem(json: Buffer, location: string, manifest: Buffer | undefined): SignedItem {
  let parsed: unknown;
  try {
    parsed = JSON.parse(json.toString("utf8"));
  } catch (e) {
    throw new SignatureFormatError(`${location}: the bundle is not JSON: ${(e as Error).message}`);
  }
  let bundle: Bundle;
  try {
    bundle = bundleFromJSON(parsed);
  } catch (e) {
    throw new SignatureFormatError(`${location}: not a valid Sigstore bundle: ${(e as Error).message}`);
  }
  return { format: "sigstore-bundle", location, bundle, ...(bundle.content.$case === "messageSignature" && manifest ? { artifact: manifest } : {}) };
}

/** v0.1: cosign's annotations carry Rekor's inclusion promise, not an inclusion proof. */
const LEGACY_BUNDLE_MEDIA_TYPE = "application/vnd.dev.sigstore.bundle+json;version=0.1";

/** A cosign layer's verification material: its certificate and chain (or a key), Rekor entry and timestamp. */
function materialOf(
  annotations: Readonly<Record<string, string>>,
  location: string,
  timestamp: Buffer | undefined,
): NonNullable<Bundle["verificationMaterial"]> {
  const certificate = annotations[ANNOTATION_CERTIFICATE];
  return {
    content: certificate
      ? {
          $case: "x509CertificateChain",
          x509CertificateChain: {
            certificates: [certificate, ...pemBlocks(annotations[ANNOTATION_CHAIN] ?? "")].map((pem) => ({ rawBytes: pemToDer(pem, location) })),
          },
        }
      : { $case: "publicKey", publicKey: { hint: "" } },
    tlogEntries: annotations[ANNOTATION_REKOR_BUNDLE] ? [rekorBundleToEntry(annotations[ANNOTATION_REKOR_BUNDLE], location)] : [],
    timestampVerificationData: { rfc3161Timestamps: timestamp ? [{ signedTimestamp: timestamp }] : [] },
  };
}

/** cosign's `dev.sigstore.cosign/bundle` (Rekor's SignedEntryTimestamp and entry) as a bundle's tlog entry. */
function rekorBundleToEntry(raw: string, location: string): TransparencyLogEntry {
  const what = `${location}: ${ANNOTATION_REKOR_BUNDLE}`;
  let doc: { SignedEntryTimestamp?: unknown; Payload?: { body?: unknown; integratedTime?: unknown; logIndex?: unknown; logID?: unknown } };
  try {
    doc = JSON.parse(raw) as typeof doc;
  } catch (e) {
    throw new SignatureFormatError(`${what} is not JSON: ${(e as Error).message}`);
  }
  if (typeof doc !== "object" || doc === null || Array.isArray(doc)) throw new SignatureFormatError(`${what} is not a JSON object`);
  const p = doc.Payload;
  if (typeof doc.SignedEntryTimestamp !== "string" || !p || typeof p.body !== "string" || typeof p.logID !== "string")
    throw new SignatureFormatError(`${what} lacks SignedEntryTimestamp, Payload.body or Payload.logID`);
  if (!Number.isSafeInteger(p.integratedTime) || !Number.isSafeInteger(p.logIndex))
    throw new SignatureFormatError(`${what}: integratedTime and logIndex must be integers`);
  if (!/^[0-9a-f]+$/i.test(p.logID)) throw new SignatureFormatError(`${what}: logID must be hex`);
  const body = base64(p.body, what);
  let kind: unknown, version: unknown;
  try {
    ({ kind, apiVersion: version } = JSON.parse(body.toString("utf8")) as { kind?: unknown; apiVersion?: unknown });
  } catch {
    throw new SignatureFormatError(`${what}: the log entry body is not JSON`);
  }
  if (typeof kind !== "string" || typeof version !== "string") throw new SignatureFormatError(`${what}: the log entry body has no kind and apiVersion`);
  return {
    logIndex: String(p.logIndex),
    logId: { keyId: Buffer.from(p.logID, "hex") },
    kindVersion: { kind, version },
    integratedTime: String(p.integratedTime),
    inclusionPromise: { signedEntryTimestamp: base64(doc.SignedEntryTimestamp, what) },
    inclusionProof: undefined,
    canonicalizedBody: body,
  };
}

function rfc3161Of(raw: string, location: string): Buffer {
  const what = `${location}: ${ANNOTATION_RFC3161}`;
  try {
    const doc = JSON.parse(raw) as { SignedRFC3161Timestamp?: unknown };
    if (typeof doc.SignedRFC3161Timestamp === "string") return base64(doc.SignedRFC3161Timestamp, what);
  } catch {
    // reported below
  }
  throw new SignatureFormatError(`${what} must be JSON with SignedRFC3161Timestamp (base64)`);
}

function base64(value: string, what: string): Buffer {
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(value.replace(/\s/g, ""))) throw new SignatureFormatError(`${what} is not base64`);
  return Buffer.from(value, "base64");
}

function pemBlocks(text: string): string[] {
  return text.match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g) ?? [];
}

function pemToDer(pem: string, location: string): Buffer {
  const m = /-----BEGIN CERTIFICATE-----([\s\S]*?)-----END CERTIFICATE-----/.exec(pem);
  if (!m) throw new SignatureFormatError(`${location}: ${ANNOTATION_CERTIFICATE} is not a PEM certificate`);
  return base64(m[1]!.replace(/\s/g, ""), `${location}: certificate`);
}
