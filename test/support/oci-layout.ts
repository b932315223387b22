// Deterministic OCI image layouts on disk, built without any external tool, for pushing into test registries.
//
// A layout (image-spec "image-layout") is a directory with `oci-layout`, `index.json` and `blobs/sha256/<hex>`.
// index.json names each image by the `org.opencontainers.image.ref.name` annotation, which is what
// `skopeo copy oci:DIR:TAG …` looks up. Each image is one gzip'd tar layer holding a single small file whose
// content derives from `seed` (and the platform), a config, and a manifest; several platforms add an image index.
// Same seed and platforms ⇒ byte-identical blobs ⇒ same digests: tar mtimes are fixed, gzip's header has mtime 0.

import { createHash } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gzipSync } from "node:zlib";

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
    const tar = singleFileTar("imprimatur-seed.txt", Buffer.from(`seed=${opts.seed}\nplatform=${platformText}\n`));
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

// A POSIX ustar archive: 512-byte header, content padded to 512, then two zero blocks.
export const TAR_BLOCK = 512;
/** 2000-01-01T00:00:00Z: any fixed time will do; zero upsets some extractors. */
const FIXED_MTIME = 946684800;

export function singleFileTar(name: string, content: Buffer): Buffer {
  const header = tarHeader(name, { size: content.length, mode: 0o644, typeflag: "0", linkname: "" });
  const padding = (TAR_BLOCK - (content.length % TAR_BLOCK)) % TAR_BLOCK;
  return Buffer.concat([header, content, Buffer.alloc(padding, 0), Buffer.alloc(2 * TAR_BLOCK, 0)]);
}

/** One entry's ustar header: owner root, a fixed mtime; typeflag "0" file, "5" folder, "2" symlink. */
export function tarHeader(name: string, h: { size: number; mode: number; typeflag: string; linkname: string }): Buffer {
  // Longer names would need ustar's prefix field or PAX headers; the images here never have any.
  if (Buffer.byteLength(name) > 100 || Buffer.byteLength(h.linkname) > 100) throw new Error(`tar entry name longer than 100 bytes: ${name}`);
  const header = Buffer.alloc(TAR_BLOCK, 0);
  const field = (offset: number, length: number, text: string) => header.write(text, offset, length, "ascii");
  /** An octal number, zero-padded to length-1 digits, NUL-terminated. */
  const octal = (offset: number, length: number, value: number) => field(offset, length, value.toString(8).padStart(length - 1, "0") + "\0");
  field(0, 100, name);
  octal(100, 8, h.mode);
  octal(108, 8, 0); // uid
  octal(116, 8, 0); // gid
  octal(124, 12, h.size);
  octal(136, 12, FIXED_MTIME);
  field(148, 8, " ".repeat(8)); // the checksum is computed with its own field as spaces
  field(156, 1, h.typeflag);
  field(157, 100, h.linkname);
  field(257, 6, "ustar\0");
  field(263, 2, "00");
  field(265, 32, "root");
  field(297, 32, "root");
  let checksum = 0;
  for (const byte of header) checksum += byte;
  field(148, 8, checksum.toString(8).padStart(6, "0") + "\0 ");
  return header;
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
