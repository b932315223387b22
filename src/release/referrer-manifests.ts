// The OCI 1.1 artifacts cosign v3 stores a Sigstore bundle in: a manifest with the empty config, the bundle as its
// only layer, `subject` the signed image and `artifactType` the bundle's media type, annotated with what the
// bundle holds (dev.sigstore.bundle.content, dev.sigstore.bundle.predicateType) and when it was made; and, for
// registries without the Referrers API, the referrers tag schema's index listing such manifests. The verifier
// (src/verification/signature-discovery.ts) picks referrers by exactly these artifact types and annotations.
import { computeDigest } from "../registry/content-digest.ts";
import { OCI_IMAGE_INDEX, OCI_IMAGE_MANIFEST } from "../registry/media-types.ts";
import type { ReferrerDescriptor as ListedDescriptor } from "../registry/referrers.ts";
import { BUNDLE_MEDIA_TYPE } from "./sigstore-bundle.ts";

/** The empty JSON object `{}`: the config of an artifact manifest (OCI image spec 1.1). */
export const OCI_EMPTY = {
  mediaType: "application/vnd.oci.empty.v1+json",
  digest: "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a",
  size: 2,
  blob: Buffer.from("{}"),
} as const;

export const REFERRER_ANNOTATIONS = {
  content: "dev.sigstore.bundle.content",
  predicateType: "dev.sigstore.bundle.predicateType",
  created: "org.opencontainers.image.created",
} as const;

/** A manifest and every blob it references (config and layers), by digest. */
export interface Artifact {
  manifest: Buffer;
  mediaType: string;
  digest: string;
  blobs: Map<string, Buffer>;
}

export interface ReferrerDescriptor {
  mediaType: string;
  digest: string;
  size: number;
  artifactType: string;
  annotations: Record<string, string>;
}

export interface BuiltReferrer extends Artifact {
  /** The manifest's descriptor, as the Referrers API and the referrers tag's index list it. */
  descriptor: ReferrerDescriptor;
}

/** cosign v3's referrer manifest for one bundle: empty config, the bundle as the only layer, `subject` = the image. */
export function referrerManifest(opts: {
  bundleBytes: Buffer;
  /** The layer's media type and the artifactType; default v0.3's. */
  bundleMediaType?: string;
  subject: { mediaType: string; digest: string; size: number };
  predicateType: string;
  content: "dsse-envelope" | "message-signature";
  /** org.opencontainers.image.created, RFC 3339. */
  created: string;
}): BuiltReferrer {
  const artifactType = opts.bundleMediaType ?? BUNDLE_MEDIA_TYPE;
  const bundleDigest = computeDigest(opts.bundleBytes, "sha256");
  const annotations = {
    [REFERRER_ANNOTATIONS.content]: opts.content,
    [REFERRER_ANNOTATIONS.predicateType]: opts.predicateType,
    [REFERRER_ANNOTATIONS.created]: opts.created,
  };
  const manifest = Buffer.from(
    JSON.stringify({
      schemaVersion: 2,
      mediaType: OCI_IMAGE_MANIFEST,
      artifactType,
      config: { mediaType: OCI_EMPTY.mediaType, digest: OCI_EMPTY.digest, size: OCI_EMPTY.size },
      layers: [{ mediaType: artifactType, digest: bundleDigest, size: opts.bundleBytes.length }],
      subject: { mediaType: opts.subject.mediaType, digest: opts.subject.digest, size: opts.subject.size },
      annotations,
    }),
  );
  const digest = computeDigest(manifest, "sha256");
  const blobs = new Map<string, Buffer>([
    [OCI_EMPTY.digest, OCI_EMPTY.blob],
    [bundleDigest, opts.bundleBytes],
  ]);
  return {
    manifest,
    mediaType: OCI_IMAGE_MANIFEST,
    digest,
    blobs,
    descriptor: { mediaType: OCI_IMAGE_MANIFEST, digest, size: manifest.length, artifactType, annotations },
  };
}

/** The referrers tag schema's index (pushed at the subject's referrers tag) listing these referrers. */
export function referrersTagIndex(descriptors: ReadonlyArray<ReferrerDescriptor | ListedDescriptor>): Artifact {
  const manifest = Buffer.from(JSON.stringify({ schemaVersion: 2, mediaType: OCI_IMAGE_INDEX, manifests: descriptors }));
  return { manifest, mediaType: OCI_IMAGE_INDEX, digest: computeDigest(manifest, "sha256"), blobs: new Map() };
}
