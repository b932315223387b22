// Test signer: Sigstore bundles (v0.1, v0.2, v0.3) — DSSE bundles of in-toto statements (cosign's image signature
// statement, or any attestation) and message-signature bundles — and the OCI 1.1 referrer manifests and
// referrers-tag-schema indexes cosign v3 stores them in.
//
// Exists so tests can make real Sigstore bundles offline: @sigstore/bundle's toDSSEBundle/toMessageSignatureBundle
// build the bundle, keys.ts or a mock-sigstore.ts keyless certificate sign it, and a mock instance's log and TSA
// supply tlog entries and RFC 3161 timestamps. The statements, the completion of a bundle's verification material
// and the referrer manifests are the release signer's (src/release/), which attaches Imprimatur's own image's
// bundles the same way; what is only for tests (other bundle versions, keyless, logs, timestamps, tampering) is here.

import { createHash } from "node:crypto";
import { bundleFromJSON, bundleToJSON, toDSSEBundle, toMessageSignatureBundle } from "@sigstore/bundle";
import type { SerializedBundle } from "@sigstore/bundle";
import { imageSignatureStatement, inTotoStatement } from "../../../src/release/in-toto.ts";
import { referrerManifest as releaseReferrerManifest, type BuiltReferrer } from "../../../src/release/referrer-manifests.ts";
import { BUNDLE_MEDIA_TYPE, completeBundle } from "../../../src/release/sigstore-bundle.ts";
import { MEDIA_TYPES as COSIGN_MEDIA_TYPES, signDsseEnvelope } from "./cosign-signatures.ts";
import type { CosignSigner } from "./cosign-signatures.ts";
import { signBytes } from "./keys.ts";
import type { SigningKey } from "./keys.ts";
import { rekorEntryToTlogEntry } from "./mock-sigstore.ts";
import type { KeylessCertificate, RekorLogEntry, TlogEntryJson } from "./mock-sigstore.ts";

export type BundleVersion = "0.1" | "0.2" | "0.3";

export const BUNDLE_MEDIA_TYPES: Record<BundleVersion, string> = {
  "0.1": "application/vnd.dev.sigstore.bundle+json;version=0.1",
  "0.2": "application/vnd.dev.sigstore.bundle+json;version=0.2",
  "0.3": BUNDLE_MEDIA_TYPE,
};

export { COSIGN_SIGN_PREDICATE as COSIGN_SIGN_PREDICATE_TYPE, imageSignatureStatement } from "../../../src/release/in-toto.ts";
export { OCI_EMPTY, REFERRER_ANNOTATIONS, referrersTagIndex } from "../../../src/release/referrer-manifests.ts";
export type { BuiltReferrer, ReferrerDescriptor } from "../../../src/release/referrer-manifests.ts";
export { OCI_IMAGE_INDEX as OCI_INDEX_MEDIA_TYPE } from "../../../src/registry/media-types.ts";
export { referrersTag } from "../../../src/registry/referrers.ts";

export interface BundleOptions extends CosignSigner {
  /** Default "0.3". v0.1 carries inclusion promises only; v0.2 and v0.3 inclusion proofs and promises. */
  version?: BundleVersion;
  /** Key-signed bundles: the verificationMaterial publicKey hint (default the key's: base64 sha256 of its SPKI). */
  keyHint?: string;
  /** Rekor entry kind for DSSE bundles (default "dsse"). */
  rekorKind?: "dsse" | "intoto";
  /** Override which inclusion evidence the tlog entry carries. */
  inclusionPromise?: boolean;
  inclusionProof?: boolean;
  /** v0.1/v0.2 keyless: put the intermediate and root after the leaf in x509CertificateChain. */
  includeChain?: boolean;
  tamper?: { signature?: boolean; payload?: boolean };
}

export interface BuiltBundle {
  /** The serialized bundle, as stored in a referrer layer or a .sigstore.json file. */
  bytes: Buffer;
  json: SerializedBundle;
  mediaType: string;
  /** The Rekor entry, when the signature was logged. */
  rekorEntry?: RekorLogEntry;
}

/** A DSSE bundle of an in-toto statement (or of any payload with its payloadType). */
export async function dsseBundle(
  opts: BundleOptions & ({ statement: Record<string, unknown> } | { payload: Buffer; payloadType: string }),
): Promise<BuiltBundle> {
  const signer = signerOf(opts);
  const payload = "statement" in opts ? Buffer.from(JSON.stringify(opts.statement)) : opts.payload;
  const payloadType = "statement" in opts ? COSIGN_MEDIA_TYPES.inToto : opts.payloadType;
  const { envelope, signature } = signDsseEnvelope(signer.key, payload, { payloadType, ...(opts.hash !== undefined ? { hash: opts.hash } : {}) });
  const rekorEntry = opts.rekor?.logDsse({ envelope, verifierPem: signer.verifierPem, kind: opts.rekorKind ?? "dsse" });
  const bundle = toDSSEBundle({
    artifact: opts.tamper?.payload ? Buffer.concat([payload, Buffer.from(" ")]) : payload,
    artifactType: payloadType,
    signature: opts.tamper?.signature ? flipBit(signature) : signature,
    ...keyMaterial(opts, signer),
  });
  return finish(bundleToJSON(bundle), opts, signer, signature, rekorEntry);
}

/** The bundle cosign v3 attaches as an image signature: a DSSE bundle of imageSignatureStatement. */
export function imageSignatureBundle(opts: BundleOptions & { name: string; digest: string }): Promise<BuiltBundle> {
  return dsseBundle({ ...opts, statement: imageSignatureStatement(opts) });
}

/** An attestation bundle: a DSSE bundle of a statement with this predicate about the image. */
export function attestationBundle(opts: BundleOptions & { name: string; digest: string; predicateType: string; predicate: unknown }): Promise<BuiltBundle> {
  return dsseBundle({
    ...opts,
    statement: inTotoStatement({ subjectName: opts.name, digest: opts.digest, predicateType: opts.predicateType, predicate: opts.predicate }),
  });
}

/** A message-signature bundle over `artifact` (messageDigest algorithm follows the signing hash). */
export async function messageSignatureBundle(opts: BundleOptions & { artifact: Buffer }): Promise<BuiltBundle> {
  const signer = signerOf(opts);
  const hash = opts.hash === undefined ? signer.key.hash : opts.hash;
  const digestAlgorithm = hash ?? "sha256";
  const signature = signBytes(signer.key, opts.artifact, hash);
  const digest = createHash(digestAlgorithm).update(opts.artifact).digest();
  const rekorEntry = opts.rekor?.logHashedRekord({
    digest: { algorithm: digestAlgorithm, hex: digest.toString("hex") },
    signature,
    verifierPem: signer.verifierPem,
  });
  const bundle = toMessageSignatureBundle({
    digest: opts.tamper?.payload ? flipBit(digest) : digest,
    signature: opts.tamper?.signature ? flipBit(signature) : signature,
    ...keyMaterial(opts, signer),
  });
  const json = bundleToJSON(bundle) as SerializedBundle & { messageSignature: { messageDigest: { algorithm: string } } };
  json.messageSignature.messageDigest.algorithm = { sha256: "SHA2_256", sha384: "SHA2_384", sha512: "SHA2_512" }[digestAlgorithm];
  return finish(json, opts, signer, signature, rekorEntry);
}

// ---------------------------------------------------------------------------------------------
// OCI referrers

/** The release signer's referrer manifest (src/release/referrer-manifests.ts), created at a fixed time unless told. */
export function referrerManifest(opts: Omit<Parameters<typeof releaseReferrerManifest>[0], "created"> & { created?: string }): BuiltReferrer {
  return releaseReferrerManifest({ ...opts, created: opts.created ?? "2025-01-01T00:00:00Z" });
}

// ---------------------------------------------------------------------------------------------

interface Signer {
  key: SigningKey;
  verifierPem: string;
  keyless?: KeylessCertificate;
}

function signerOf(opts: CosignSigner): Signer {
  if (opts.keyless) return { key: opts.keyless.key, verifierPem: opts.keyless.certificatePem, keyless: opts.keyless };
  if (opts.key) return { key: opts.key, verifierPem: opts.key.publicKeyPem };
  throw new Error("a bundle needs `key` or `keyless`");
}

function keyMaterial(opts: BundleOptions, signer: Signer): { certificate?: Buffer; keyHint?: string; certificateChain?: boolean } {
  // certificateChain selects x509CertificateChain (v0.1/v0.2); v0.3 has a single `certificate`.
  const chain = (opts.version ?? "0.3") !== "0.3";
  if (signer.keyless) return { certificate: signer.keyless.certificateDer, certificateChain: chain };
  return { keyHint: opts.keyHint ?? signer.key.hint, certificateChain: chain };
}

async function finish(
  json: SerializedBundle,
  opts: BundleOptions,
  signer: Signer,
  signature: Buffer,
  rekorEntry: RekorLogEntry | undefined,
): Promise<BuiltBundle> {
  const version = opts.version ?? "0.3";
  // @sigstore/bundle's builders leave tlog entries and timestamps empty: the log's entry and the TSA's timestamp
  // (over the signature bytes) go in here.
  const tlogEntries: TlogEntryJson[] = rekorEntry
    ? [rekorEntryToTlogEntry(rekorEntry, { inclusionPromise: opts.inclusionPromise ?? true, inclusionProof: opts.inclusionProof ?? version !== "0.1" })]
    : [];
  const rfc3161Timestamps = opts.timestamp ? [await opts.timestamp.timestamp(signature)] : [];
  completeBundle(json, { mediaType: BUNDLE_MEDIA_TYPES[version], tlogEntries, rfc3161Timestamps });
  const out = json as unknown as { mediaType: string; verificationMaterial: { x509CertificateChain?: { certificates: Array<{ rawBytes: string }> } } };
  if (opts.includeChain && signer.keyless && out.verificationMaterial.x509CertificateChain) {
    for (const pem of signer.keyless.chainPem) out.verificationMaterial.x509CertificateChain.certificates.push({ rawBytes: pemToDer(pem).toString("base64") });
  }
  // Round-trip through @sigstore/bundle's validation (per version: v0.1 needs promises, v0.2+ proofs) so a malformed
  // bundle fails here, not in the test using it; unless the caller asked for non-default inclusion evidence.
  if (opts.inclusionPromise === undefined && opts.inclusionProof === undefined) bundleFromJSON(out);
  return { bytes: Buffer.from(JSON.stringify(out)), json, mediaType: out.mediaType, ...(rekorEntry ? { rekorEntry } : {}) };
}

function pemToDer(pem: string): Buffer {
  return Buffer.from(pem.replace(/-----(BEGIN|END) [A-Z ]+-----/g, "").replace(/\s+/g, ""), "base64");
}

function flipBit(bytes: Buffer): Buffer {
  const copy = Buffer.from(bytes);
  copy[copy.length - 1] = copy[copy.length - 1]! ^ 0x01;
  return copy;
}
