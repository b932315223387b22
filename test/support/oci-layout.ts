// Deterministic OCI image layouts on disk, built without any external tool, for pushing into test registries.
//
// A layout (image-spec "image-layout") is a directory with `oci-layout`, `index.json` and `blobs/sha256/<hex>`.
// index.json names each image by the `org.opencontainers.image.ref.name` annotation, which is what
// `skopeo copy oci:DIR:TAG …` looks up. Each image is one gzip'd tar layer holding a single small file whose
// content derives from `seed` (and the platform), a config, and a manifest; several platforms add an image index.
// Same seed and platforms ⇒ byte-identical blobs ⇒ same digests: the layer is src/image-build/reproducible-tar.ts's
// (mtime 0, numeric owners), gzip's header has mtime 0.

import { createHash } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import { tarChunks } from "../../src/image-build/reproducible-tar.ts";

export const MEDIA_TYPES = {
  index: "application/vnd.oci.image.index.v1+json",
  manifest: "application/vnd.oci.image.manifest.v1+json",
  config: "application/vnd.oci.image.config.v1+json",
  layerTarGzip: "application/vnd.oci.image.layer.v1.tar+gzip",
} as const;

const REF_NAME_ANNOTATION = "org.opencontainers.image.ref.name";

export interface OciPlatform {
  os: string;
  architecture: string;
  variant?: string;
}

export interface OciLayoutOptions {
  /** The tag (ref.name) the image gets in the layout's index.json. */
  tag: string;
  /** Everything variable in the image derives from this string. */
  seed: string;
  /** Default: one linux/amd64 image. More than one: an image index over one manifest per platform. */
  platforms?: OciPlatform[];
  /** Build an image index even for a single platform. */
  index?: boolean;
  /**
   * The layout directory. Default: a fresh temp dir (the caller removes it). An existing layout gains the image
   * (an image already tagged `tag` there is replaced), so one layout can hold several tags.
   */
  dir?: string;
}

export interface OciManifestInfo {
  digest: string;
  size: number;
  platform: OciPlatform;
  configDigest: string;
  layerDigest: string;
  /** sha256 of the uncompressed layer tar (the config's rootfs.diff_ids entry). */
  diffId: string;
}

export interface OciLayout {
  layoutDir: string;
  tag: string;
  /** What the tag points to: the image manifest, or the image index when there is one. */
  digest: string;
  mediaType: string;
  size: number;
  /** One per platform, in the order given. */
  manifests: OciManifestInfo[];
}

/** A content-addressed blob. */
export interface Blob {
  digest: string;
  bytes: Buffer;
}

/** The blobs of one image (pure: no I/O), and the descriptor the layout's index.json gets for it. */
export interface BuiltImage {
  blobs: Blob[];
  top: { digest: string; size: number; mediaType: string };
  manifests: OciManifestInfo[];
}

export function sha256Digest(bytes: Buffer | string): string {
  return `sha256:${createHash("sha256").update(bytes).digest("hex")}`;
}

/** Builds the layout on disk; see OciLayoutOptions. */
export function buildOciLayout(opts: OciLayoutOptions): OciLayout {
  const image = buildImage(opts);
  const layoutDir = opts.dir ?? mkdtempSync(join(tmpdir(), "imprimatur-oci-"));
  writeImage(layoutDir, opts.tag, image);
  return {
    layoutDir,
    tag: opts.tag,
    digest: image.top.digest,
    mediaType: image.top.mediaType,
    size: image.top.size,
    manifests: image.manifests,
  };
}

// ---------------------------------------------------------------------------------------------
// Pure construction

export function buildImage(opts: Pick<OciLayoutOptions, "seed" | "platforms" | "index">): BuiltImage {
  const platforms = opts.platforms ?? [{ os: "linux", architecture: "amd64" }];
  if (platforms.length === 0) throw new Error("buildOciLayout: platforms must not be empty (omit it for linux/amd64)");
  const blobs: Blob[] = [];
  const manifests: OciManifestInfo[] = [];
  const manifestBlobs: Blob[] = [];

  for (const platform of platforms) {
    const platformText = [platform.os, platform.architecture, platform.variant].filter(Boolean).join("/");
    const content = Buffer.from(`seed=${opts.seed}\nplatform=${platformText}\n`);
    const tar = Buffer.concat(tarChunks([{ type: "file", path: "imprimatur-seed.txt", content, mode: 0o644 }]));
    const layer = blob(gzipDeterministic(tar));
    const diffId = sha256Digest(tar);
    const config = blob(
      canonicalJson({
        architecture: platform.architecture,
        os: platform.os,
        ...(platform.variant !== undefined ? { variant: platform.variant } : {}),
        config: { Labels: { "org.imprimatur.test.seed": opts.seed } },
        rootfs: { type: "layers", diff_ids: [diffId] },
      }),
    );
    const manifest = blob(
      canonicalJson({
        schemaVersion: 2,
        mediaType: MEDIA_TYPES.manifest,
        config: { mediaType: MEDIA_TYPES.config, digest: config.digest, size: config.bytes.length },
        layers: [{ mediaType: MEDIA_TYPES.layerTarGzip, digest: layer.digest, size: layer.bytes.length }],
      }),
    );
    blobs.push(layer, config, manifest);
    manifestBlobs.push(manifest);
    manifests.push({
      digest: manifest.digest,
      size: manifest.bytes.length,
      platform: { ...platform },
      configDigest: config.digest,
      layerDigest: layer.digest,
      diffId,
    });
  }

  if (platforms.length === 1 && opts.index !== true) {
    const only = manifests[0]!;
    return { blobs, top: { digest: only.digest, size: only.size, mediaType: MEDIA_TYPES.manifest }, manifests };
  }
  const index = blob(
    canonicalJson({
      schemaVersion: 2,
      mediaType: MEDIA_TYPES.index,
      manifests: manifests.map((m) => ({
        mediaType: MEDIA_TYPES.manifest,
        digest: m.digest,
        size: m.size,
        platform: {
          architecture: m.platform.architecture,
          os: m.platform.os,
          ...(m.platform.variant !== undefined ? { variant: m.platform.variant } : {}),
        },
      })),
    }),
  );
  blobs.push(index);
  return { blobs, top: { digest: index.digest, size: index.bytes.length, mediaType: MEDIA_TYPES.index }, manifests };
}

function blob(bytes: Buffer): Blob {
  return { digest: sha256Digest(bytes), bytes };
}

/** JSON bytes; key order is the insertion order above, which is fixed, so the bytes are too. */
function canonicalJson(value: unknown): Buffer {
  return Buffer.from(JSON.stringify(value));
}

/** gzip with no name, mtime 0 and a fixed level: the same input always gives the same bytes (with one zlib). */
function gzipDeterministic(data: Buffer): Buffer {
  return gzipSync(data, { level: 6 });
}

// ---------------------------------------------------------------------------------------------
// I/O

interface LayoutIndex {
  schemaVersion: 2;
  mediaType?: string;
  manifests: Array<{ mediaType: string; digest: string; size: number; annotations?: Record<string, string> }>;
}

function writeImage(layoutDir: string, tag: string, image: BuiltImage): void {
  const blobDir = join(layoutDir, "blobs", "sha256");
  mkdirSync(blobDir, { recursive: true });
  writeFileSync(join(layoutDir, "oci-layout"), JSON.stringify({ imageLayoutVersion: "1.0.0" }));
  for (const { digest, bytes } of image.blobs) {
    const path = join(blobDir, digest.slice("sha256:".length));
    if (!existsSync(path)) writeFileSync(path, bytes);
  }

  const indexPath = join(layoutDir, "index.json");
  let index: LayoutIndex = { schemaVersion: 2, mediaType: MEDIA_TYPES.index, manifests: [] };
  if (existsSync(indexPath)) {
    try {
      index = JSON.parse(readFileSync(indexPath, "utf8")) as LayoutIndex;
    } catch (err) {
      throw new Error(`${indexPath} is not valid JSON (${(err as Error).message}); use an empty or fresh layout directory`, { cause: err });
    }
  }
  index.manifests = index.manifests.filter((m) => m.annotations?.[REF_NAME_ANNOTATION] !== tag);
  index.manifests.push({ ...image.top, annotations: { [REF_NAME_ANNOTATION]: tag } });
  writeFileSync(indexPath, JSON.stringify(index));
}
