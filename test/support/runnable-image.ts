// Runnable OCI images for the real-node tests, built from the host's static busybox (Debian's busybox-static).
//
// One gzip'd layer holds `bin/busybox`, `bin/sh` and a few applets as symlinks to it, a minimal /etc (passwd,
// group, and a seed file that makes images with different seeds differ in digest) and /tmp. The config sets
// `PATH=/bin`, Entrypoint/Cmd and optionally `User`. The result is an OCI image layout directory (what
// registry.ts's push, i.e. `skopeo copy oci:DIR:TAG`, reads) and, on request, the same layout as one tar
// archive (what `ctr images import` reads, e.g. for the pause image). Same inputs ⇒ same digests.

import { readFileSync, existsSync, mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import { tarChunks } from "../../src/image-build/reproducible-tar.ts";
import { MEDIA_TYPES, sha256Digest } from "./oci-layout.ts";
import type { Blob } from "./oci-layout.ts";

/** Where busybox-static installs its binary (scripts/provision-node.sh installs the package). */
export const STATIC_BUSYBOX = "/bin/busybox";

/** Applets linked into every image's /bin (more with `applets`). */
const DEFAULT_APPLETS = ["sh", "sleep", "cat", "echo", "env", "id", "ls", "true", "false", "hostname", "ps", "wget"];

/** Keeps running until SIGTERM, and then exits at once (a shell as PID 1 ignores signals it does not trap). */
export const SLEEP_UNTIL_TERM = ["/bin/sh", "-c", "trap 'exit 0' TERM; sleep 2147483647 & wait"];

const REF_NAME_ANNOTATION = "org.opencontainers.image.ref.name";
/** The name `ctr images import` gives the image (containerd prefers it to ref.name). */
const CONTAINERD_NAME_ANNOTATION = "io.containerd.image.name";

export interface RunnableImageOptions {
  /** The tag (ref.name) in the layout's index.json: what `registry.push(layoutDir, tag, …)` names. */
  tag: string;
  /** Written to /etc/imprimatur-seed and a config label: different seeds, different digests. */
  seed: string;
  /** Default SLEEP_UNTIL_TERM. */
  entrypoint?: string[];
  /** Default none. */
  cmd?: string[];
  /** The config's User, e.g. "1000" for runAsNonRoot pods. Default: none (root). */
  user?: string;
  /** More busybox applets to link into /bin. */
  applets?: string[];
  /** The layout directory. Default: a fresh temp dir (the caller removes it). An existing layout gains the image. */
  dir?: string;
  /** Also write the layout as one tar archive at this path, for `ctr images import`; the image is named `importName`. */
  archive?: { path: string; importName: string };
}

export interface RunnableImage {
  layoutDir: string;
  tag: string;
  /** The manifest's digest: what a pod's image resolves to. */
  digest: string;
  configDigest: string;
  layerDigest: string;
  /** The archive's path, when one was asked for. */
  archivePath?: string;
}

/** Builds the image (see RunnableImageOptions) and writes its layout (and archive). */
export function buildRunnableImage(opts: RunnableImageOptions): RunnableImage {
  const busybox = readBusybox();
  const applets = [...new Set([...DEFAULT_APPLETS, ...(opts.applets ?? [])])].filter((a) => a !== "busybox");
  const entries: TarEntry[] = [
    { type: "dir", path: "bin/" },
    { type: "file", path: "bin/busybox", content: busybox, mode: 0o755 },
    ...applets.map((a): TarEntry => ({ type: "symlink", path: `bin/${a}`, target: "busybox" })),
    { type: "dir", path: "etc/" },
    { type: "file", path: "etc/passwd", content: Buffer.from("root:x:0:0:root:/:/bin/sh\nuser:x:1000:1000:user:/tmp:/bin/sh\n") },
    { type: "file", path: "etc/group", content: Buffer.from("root:x:0:\nuser:x:1000:\n") },
    { type: "file", path: "etc/imprimatur-seed", content: Buffer.from(`${opts.seed}\n`) },
    { type: "dir", path: "tmp/", mode: 0o1777 },
  ];
  const tar = writeTar(entries);
  const layer = blob(gzipSync(tar, { level: 6 }));
  const config = blob(
    Buffer.from(
      JSON.stringify({
        architecture: ociArchitecture(),
        os: "linux",
        config: {
          Env: ["PATH=/bin"],
          Entrypoint: opts.entrypoint ?? SLEEP_UNTIL_TERM,
          ...(opts.cmd !== undefined ? { Cmd: opts.cmd } : {}),
          ...(opts.user !== undefined ? { User: opts.user } : {}),
          WorkingDir: "/",
          Labels: { "org.imprimatur.test.seed": opts.seed },
        },
        rootfs: { type: "layers", diff_ids: [sha256Digest(tar)] },
      }),
    ),
  );
  const manifest = blob(
    Buffer.from(
      JSON.stringify({
        schemaVersion: 2,
        mediaType: MEDIA_TYPES.manifest,
        config: { mediaType: MEDIA_TYPES.config, digest: config.digest, size: config.bytes.length },
        layers: [{ mediaType: MEDIA_TYPES.layerTarGzip, digest: layer.digest, size: layer.bytes.length }],
      }),
    ),
  );

  const layoutDir = opts.dir ?? mkdtempSync(join(tmpdir(), "imprimatur-runnable-"));
  const descriptor = { mediaType: MEDIA_TYPES.manifest, digest: manifest.digest, size: manifest.bytes.length };
  writeLayout(layoutDir, opts.tag, descriptor, [layer, config, manifest]);
  const image: RunnableImage = { layoutDir, tag: opts.tag, digest: manifest.digest, configDigest: config.digest, layerDigest: layer.digest };

  if (opts.archive) {
    // A layout of its own holding just this image, so the archive imports exactly one name.
    const index = {
      schemaVersion: 2,
      mediaType: MEDIA_TYPES.index,
      manifests: [{ ...descriptor, annotations: { [CONTAINERD_NAME_ANNOTATION]: opts.archive.importName, [REF_NAME_ANNOTATION]: opts.tag } }],
    };
    writeFileSync(
      opts.archive.path,
      writeTar([
        { type: "file", path: "oci-layout", content: Buffer.from(JSON.stringify({ imageLayoutVersion: "1.0.0" })) },
        { type: "file", path: "index.json", content: Buffer.from(JSON.stringify(index)) },
        { type: "dir", path: "blobs/" },
        { type: "dir", path: "blobs/sha256/" },
        ...[layer, config, manifest].map((b): TarEntry => ({ type: "file", path: `blobs/sha256/${b.digest.slice("sha256:".length)}`, content: b.bytes })),
      ]),
    );
    image.archivePath = opts.archive.path;
  }
  return image;
}

let busyboxBytes: Buffer | undefined;
function readBusybox(): Buffer {
  if (busyboxBytes) return busyboxBytes;
  let bytes: Buffer;
  try {
    bytes = readFileSync(STATIC_BUSYBOX);
  } catch (err) {
    throw new Error(`${STATIC_BUSYBOX} not found: run scripts/provision-node.sh (it installs busybox-static)`, { cause: err });
  }
  // A dynamically linked busybox would fail inside an image without libc.
  if (hasInterpreter(bytes)) throw new Error(`${STATIC_BUSYBOX} is dynamically linked; the images need busybox-static's binary`);
  busyboxBytes = bytes;
  return bytes;
}

/** Whether a 64-bit little-endian ELF asks for a dynamic loader (a PT_INTERP program header). */
function hasInterpreter(elf: Buffer): boolean {
  if (elf.length < 64 || elf.readUInt32BE(0) !== 0x7f454c46 || elf[4] !== 2 || elf[5] !== 1) return false;
  const phoff = Number(elf.readBigUInt64LE(0x20));
  const phentsize = elf.readUInt16LE(0x36);
  const phnum = elf.readUInt16LE(0x38);
  for (let i = 0; i < phnum; i++) {
    const at = phoff + i * phentsize;
    if (at + 4 <= elf.length && elf.readUInt32LE(at) === 3) return true;
  }
  return false;
}

function ociArchitecture(): string {
  const map: Record<string, string> = { x64: "amd64", arm64: "arm64", arm: "arm", ppc64: "ppc64le", s390x: "s390x", riscv64: "riscv64" };
  return map[process.arch] ?? process.arch;
}

function blob(bytes: Buffer): Blob {
  return { digest: sha256Digest(bytes), bytes };
}

// ---------------------------------------------------------------------------------------------
// Layout I/O

interface LayoutIndex {
  schemaVersion: 2;
  mediaType?: string;
  manifests: Array<{ mediaType: string; digest: string; size: number; annotations?: Record<string, string> }>;
}

function writeLayout(layoutDir: string, tag: string, top: { mediaType: string; digest: string; size: number }, blobs: Blob[]): void {
  const blobDir = join(layoutDir, "blobs", "sha256");
  mkdirSync(blobDir, { recursive: true });
  writeFileSync(join(layoutDir, "oci-layout"), JSON.stringify({ imageLayoutVersion: "1.0.0" }));
  for (const { digest, bytes } of blobs) {
    const path = join(blobDir, digest.slice("sha256:".length));
    if (!existsSync(path)) writeFileSync(path, bytes);
  }
  const indexPath = join(layoutDir, "index.json");
  let index: LayoutIndex = { schemaVersion: 2, mediaType: MEDIA_TYPES.index, manifests: [] };
  if (existsSync(indexPath)) index = JSON.parse(readFileSync(indexPath, "utf8")) as LayoutIndex;
  index.manifests = index.manifests.filter((m) => m.annotations?.[REF_NAME_ANNOTATION] !== tag);
  index.manifests.push({ ...top, annotations: { [REF_NAME_ANNOTATION]: tag } });
  writeFileSync(indexPath, JSON.stringify(index));
}

// ---------------------------------------------------------------------------------------------
// The layer's entries: directories, regular files and symlinks (a symlink's mode is 0777).

type TarEntry =
  | { type: "file"; path: string; content: Buffer; mode?: number }
  | { type: "dir"; path: string; mode?: number }
  | { type: "symlink"; path: string; target: string };

/** src/image-build/reproducible-tar.ts's archive, with a folder's mode 0755 and a file's 0644 unless given. */
function writeTar(entries: TarEntry[]): Buffer {
  return Buffer.concat(tarChunks(entries.map((e) => (e.type === "symlink" ? e : { ...e, mode: e.mode ?? (e.type === "dir" ? 0o755 : 0o644) }))));
}
