// Test signer: cosign's legacy signature and attestation artifacts — the `sha256-<hex>.sig` and `.att` manifests
// whose layers each carry one simple-signing payload or one DSSE envelope, with cosign's layer annotations
// (signature, certificate, chain, Rekor bundle, RFC 3161 timestamp).
//
// Exists so tests can make real cosign signatures offline, signed with keys.ts keys or mock-sigstore.ts keyless
// certificates, and logged/timestamped by a mock-sigstore.ts instance. `tamper` makes the broken variants negative
// tests need; each is broken after the rest is built, so exactly one thing is wrong. In-toto statements and DSSE
// envelopes are the release signer's (src/release/in-toto.ts), re-exported here.

import { createHash } from "node:crypto";
import { IN_TOTO_PAYLOAD_TYPE, signDsseEnvelope } from "../../../src/release/in-toto.ts";
import { signBytes } from "./keys.ts";
import type { SignatureHash, SigningKey } from "./keys.ts";
import type { KeylessCertificate, MockSigstore, RekorLogEntry } from "./mock-sigstore.ts";

export { IN_TOTO_STATEMENT_V1, inTotoStatement, preAuthEncoding, signDsseEnvelope } from "../../../src/release/in-toto.ts";

export const MEDIA_TYPES = {
  manifest: "application/vnd.oci.image.manifest.v1+json",
  config: "application/vnd.oci.image.config.v1+json",
  simpleSigning: "application/vnd.dev.cosign.simplesigning.v1+json",
  dsseEnvelope: "application/vnd.dsse.envelope.v1+json",
  inToto: IN_TOTO_PAYLOAD_TYPE,
} as const;

export const ANNOTATIONS = {
  signature: "dev.cosignproject.cosign/signature",
  certificate: "dev.sigstore.cosign/certificate",
  chain: "dev.sigstore.cosign/chain",
  bundle: "dev.sigstore.cosign/bundle",
  rfc3161Timestamp: "dev.sigstore.cosign/rfc3161timestamp",
  predicateType: "predicateType",
} as const;

export interface SignatureLayer {
  blob: Buffer;
  mediaType: string;
  annotations: Record<string, string>;
  /** The full Rekor entry when logged (it has the inclusion proof, which the bundle annotation does not carry). */
  rekorEntry?: RekorLogEntry;
}

/** Who signs: a plain key, or a keyless certificate from a mock instance (its key signs). */
export interface CosignSigner {
  key?: SigningKey;
  keyless?: KeylessCertificate;
  /** Log the signature in this instance's Rekor and add the dev.sigstore.cosign/bundle annotation. */
  rekor?: MockSigstore;
  /** Add a dev.sigstore.cosign/rfc3161timestamp annotation from this instance's TSA. */
  timestamp?: MockSigstore;
  /** Digest to sign with (default: the key's; DSSE: what @sigstore/verify expects, see keys.ts). */
  hash?: SignatureHash | null;
}

/** Ways to break a layer after it is built. */
export interface CosignTamper {
  /** Change the blob (payload/envelope) after signing: the signature no longer covers it. */
  payload?: boolean;
  /** Flip a bit of the signature (annotation, or the envelope's sig) after logging and timestamping it. */
  signature?: boolean;
  /** Flip a bit of the Rekor bundle's SignedEntryTimestamp. */
  signedEntryTimestamp?: boolean;
  /** Log a different signature, so the Rekor entry body does not match the layer. */
  rekorBody?: boolean;
  /** Timestamp other bytes than the signature. */
  timestamp?: boolean;
  /** Leave out the dev.sigstore.cosign/chain annotation. */
  omitChain?: boolean;
}

export interface CosignLayerOptions extends CosignSigner {
  tamper?: CosignTamper;
}

export function simpleSigningPayload(opts: { dockerReference: string; digest: string; optional?: Record<string, unknown> | null }): Buffer {
  // Key order as cosign writes it; verifiers must not care, but the bytes are what is signed.
  return Buffer.from(
    JSON.stringify({
      critical: {
        identity: { "docker-reference": opts.dockerReference },
        image: { "docker-manifest-digest": opts.digest },
        type: "cosign container image signature",
      },
      optional: opts.optional ?? null,
    }),
  );
}

/** One `.sig` layer: the simple-signing payload as the blob, the signature and the rest as annotations. */
export async function cosignSignatureLayer(opts: CosignLayerOptions & { payload: Buffer }): Promise<SignatureLayer> {
  const signer = signerOf(opts);
  const tamper = opts.tamper ?? {};
  const signature = signBytes(signer.key, opts.payload, opts.hash === undefined ? signer.key.hash : opts.hash);
  const annotations: Record<string, string> = { [ANNOTATIONS.signature]: signature.toString("base64") };
  let rekorEntry: RekorLogEntry | undefined;
  addCertificate(annotations, opts, tamper);
  if (opts.rekor) {
    const logged = tamper.rekorBody ? flipBit(signature) : signature;
    rekorEntry = opts.rekor.logHashedRekord({ payload: opts.payload, signature: logged, verifierPem: signer.verifierPem });
    annotations[ANNOTATIONS.bundle] = rekorBundleAnnotation(rekorEntry, tamper);
  }
  // cosign timestamps the raw signature bytes of a signature.
  if (opts.timestamp) annotations[ANNOTATIONS.rfc3161Timestamp] = await timestampAnnotation(opts.timestamp, tamper.timestamp ? flipBit(signature) : signature);
  if (tamper.signature) annotations[ANNOTATIONS.signature] = flipBit(signature).toString("base64");
  const blob = tamper.payload ? tamperJson(opts.payload) : opts.payload;
  return { blob, mediaType: MEDIA_TYPES.simpleSigning, annotations, ...(rekorEntry ? { rekorEntry } : {}) };
}

/**
 * One `.att` layer: a DSSE envelope of the statement as the blob; predicateType, certificate, chain and Rekor bundle
 * (an `intoto` v0.0.2 entry, as cosign attest makes, or `dsse` v0.0.1) as annotations.
 */
export async function cosignAttestationLayer(
  opts: CosignLayerOptions & { statement: Record<string, unknown>; rekorKind?: "intoto" | "dsse" },
): Promise<SignatureLayer> {
  const signer = signerOf(opts);
  const tamper = opts.tamper ?? {};
  const { envelope, signature } = signDsseEnvelope(signer.key, Buffer.from(JSON.stringify(opts.statement)), opts.hash === undefined ? {} : { hash: opts.hash });
  const annotations: Record<string, string> = { [ANNOTATIONS.predicateType]: String(opts.statement.predicateType ?? "") };
  let rekorEntry: RekorLogEntry | undefined;
  addCertificate(annotations, opts, tamper);
  if (opts.rekor) {
    const logged = tamper.rekorBody ? { ...envelope, signatures: [{ keyid: "", sig: flipBit(signature).toString("base64") }] } : envelope;
    rekorEntry = opts.rekor.logDsse({ envelope: logged, verifierPem: signer.verifierPem, kind: opts.rekorKind ?? "intoto" });
    annotations[ANNOTATIONS.bundle] = rekorBundleAnnotation(rekorEntry, tamper);
  }
  if (tamper.signature) envelope.signatures = [{ keyid: "", sig: flipBit(signature).toString("base64") }];
  if (tamper.payload) envelope.payload = tamperJson(Buffer.from(envelope.payload, "base64")).toString("base64");
  const blob = Buffer.from(JSON.stringify(envelope));
  // cosign timestamps the whole envelope of an attestation (it has no separate signature annotation).
  if (opts.timestamp) annotations[ANNOTATIONS.rfc3161Timestamp] = await timestampAnnotation(opts.timestamp, tamper.timestamp ? tamperJson(blob) : blob);
  return { blob, mediaType: MEDIA_TYPES.dsseEnvelope, annotations, ...(rekorEntry ? { rekorEntry } : {}) };
}

export interface BuiltManifest {
  manifest: Buffer;
  mediaType: string;
  digest: string;
  /** Every blob the manifest references (config and layers), by digest. */
  blobs: Map<string, Buffer>;
}

/** An OCI image manifest with these layers (one signature each) and a small config, as cosign writes them. */
export function ociManifestWithLayers(layers: SignatureLayer[], opts: { config?: { mediaType: string; blob: Buffer } } = {}): BuiltManifest {
  const blobs = new Map<string, Buffer>();
  const layerDescriptors = layers.map((layer) => {
    const digest = sha256Digest(layer.blob);
    blobs.set(digest, layer.blob);
    return { mediaType: layer.mediaType, size: layer.blob.length, digest, annotations: layer.annotations };
  });
  const config = opts.config ?? {
    mediaType: MEDIA_TYPES.config,
    blob: Buffer.from(
      JSON.stringify({
        architecture: "",
        created: "0001-01-01T00:00:00Z",
        history: [{ created: "0001-01-01T00:00:00Z" }],
        os: "",
        rootfs: { type: "layers", diff_ids: layerDescriptors.map((layer) => layer.digest) },
        config: {},
      }),
    ),
  };
  const configDigest = sha256Digest(config.blob);
  blobs.set(configDigest, config.blob);
  const manifest = Buffer.from(
    JSON.stringify({
      schemaVersion: 2,
      mediaType: MEDIA_TYPES.manifest,
      config: { mediaType: config.mediaType, size: config.blob.length, digest: configDigest },
      layers: layerDescriptors,
    }),
  );
  return { manifest, mediaType: MEDIA_TYPES.manifest, digest: sha256Digest(manifest), blobs };
}

/** `sha256-<hex>.sig` for an image digest. */
export function signatureTag(digest: string): string {
  return `${digest.replace(":", "-")}.sig`;
}

/** `sha256-<hex>.att` for an image digest. */
export function attestationTag(digest: string): string {
  return `${digest.replace(":", "-")}.att`;
}

/** The dev.sigstore.cosign/bundle annotation: Rekor's inclusion promise for the entry. */
export function rekorBundleAnnotation(entry: RekorLogEntry, tamper: Pick<CosignTamper, "signedEntryTimestamp"> = {}): string {
  const set = Buffer.from(entry.verification.signedEntryTimestamp, "base64");
  return JSON.stringify({
    SignedEntryTimestamp: (tamper.signedEntryTimestamp ? flipBit(set) : set).toString("base64"),
    Payload: { body: entry.body, integratedTime: entry.integratedTime, logIndex: entry.logIndex, logID: entry.logID },
  });
}

export function sha256Digest(bytes: Buffer): string {
  return `sha256:${createHash("sha256").update(bytes).digest("hex")}`;
}

// ---------------------------------------------------------------------------------------------

function signerOf(opts: CosignSigner): { key: SigningKey; verifierPem: string; keyless?: KeylessCertificate } {
  if (opts.keyless) return { key: opts.keyless.key, verifierPem: opts.keyless.certificatePem, keyless: opts.keyless };
  if (opts.key) return { key: opts.key, verifierPem: opts.key.publicKeyPem };
  throw new Error("a cosign signature needs `key` or `keyless`");
}

function addCertificate(annotations: Record<string, string>, opts: CosignSigner, tamper: CosignTamper): void {
  if (!opts.keyless) return;
  annotations[ANNOTATIONS.certificate] = opts.keyless.certificatePem;
  if (!tamper.omitChain) annotations[ANNOTATIONS.chain] = opts.keyless.chainPem.join("");
}

async function timestampAnnotation(tsa: MockSigstore, bytes: Buffer): Promise<string> {
  return JSON.stringify({ SignedRFC3161Timestamp: (await tsa.timestamp(bytes)).toString("base64") });
}

function flipBit(bytes: Buffer): Buffer {
  const copy = Buffer.from(bytes);
  copy[copy.length - 1] = copy[copy.length - 1]! ^ 0x01;
  return copy;
}

/** Still valid JSON (parsers keep going), but different bytes: a trailing space. */
function tamperJson(bytes: Buffer): Buffer {
  return Buffer.concat([bytes, Buffer.from(" ")]);
}
