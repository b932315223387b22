// The container image of `imprimatur serve`, built without Docker, as an OCI image layout.
//
// Three layers, each a reproducible tar (reproducible-tar.ts) compressed with Node's own zlib:
//   runtime       /usr/local/bin/node from the `node` package, the glibc libraries ldd lists for it and the
//                 dynamic loader, /etc/passwd and /etc/group with the user nonroot (65532), /tmp, and the state
//                 folder /var/lib/imprimatur owned by that user. No shell, no package manager.
//   dependencies  /app/node_modules: the production dependencies only (production-dependencies.ts)
//   app           /app/package.json, bin/, src/, policies/, with src/ as JavaScript compiled from its TypeScript
//                 (compiled-source.ts: Node.js's type stripping would cost the server memory) and no .ts files
// The entrypoint runs node on bin/imprimatur.js directly, so `serve` is PID 1 and gets SIGTERM itself (it installs
// its own handler, which is what makes PID 1 act on the signal). Every timestamp is the epoch and owners are
// numeric, so the same inputs give the same digest; gzip output is cached by the layer's uncompressed digest, and
// the compiled JavaScript by its source (in the same cache folder).
//
// Pushed by push-layout.ts (`imprimatur install`), or with skopeo: skopeo copy --preserve-digests oci:LAYOUT:TAG docker://HOST/REPOSITORY:TAG
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, readlinkSync, realpathSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, join, posix, relative, resolve } from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { fileURLToPath } from "node:url";
import { createGzip } from "node:zlib";
import { keepCached, readCached } from "./build-cache.ts";
import { compiledSourceEntries, projectCompiler } from "./compiled-source.ts";
import { ImageBuildError } from "./image-build-error.ts";
import { lockedVersion, productionPackages, readLockfile } from "./production-dependencies.ts";
import { ociArchitecture, readRuntimeFile, sharedLibraries } from "./runtime-files.ts";
import { tarChunks, type TarEntry } from "./reproducible-tar.ts";

export const NONROOT_UID = 65532;
export const APP_DIR = "/app";
export const STATE_DIR = "/var/lib/imprimatur";
export const NODE_PATH = "/usr/local/bin/node";
/** The project this script belongs to. */
export const PROJECT_DIR = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");

const MEDIA_TYPES = {
  manifest: "application/vnd.oci.image.manifest.v1+json",
  index: "application/vnd.oci.image.index.v1+json",
  config: "application/vnd.oci.image.config.v1+json",
  layer: "application/vnd.oci.image.layer.v1.tar+gzip",
} as const;
const REF_NAME = "org.opencontainers.image.ref.name";
const EPOCH = "1970-01-01T00:00:00Z";
const GZIP_LEVEL = 6;
/** What the app layer takes from the project folder. */
const APP_PATHS = ["package.json", "bin", "src", "policies"];

export interface ImageBuildOptions {
  /** The OCI layout folder to write (created if missing; an existing layout gains the tag). */
  outputDir: string;
  /** The tag in the layout's index.json (what `skopeo copy oci:DIR:TAG` names). Default: the package version. */
  tag?: string;
  /** The project folder: package.json, package-lock.json, node_modules, bin, src, policies. Default: this one. */
  projectDir?: string;
  /** org.opencontainers.image.revision and IMPRIMATUR_COMMIT. Default: $IMPRIMATUR_COMMIT, else git HEAD. */
  commit?: string;
  /** Folder caching compressed layers by uncompressed digest, and the compiled JavaScript; false for none. Default: the imprimatur cache. */
  layerCache?: string | false;
  /** The Node.js binary. Default: the `node` package's, node_modules/node/bin/node. */
  nodeBinary?: string;
  /** Progress lines (default: none). */
  log?: (line: string) => void;
}

export interface LayerInfo {
  name: string;
  digest: string;
  diffId: string;
  size: number;
  entries: number;
}

export interface BuiltImage {
  layoutDir: string;
  tag: string;
  /** The manifest digest: what a registry and a pod's imageID show. */
  digest: string;
  size: number;
  configDigest: string;
  layers: LayerInfo[];
  version: string;
  revision: string;
  architecture: string;
}

/** Where compressed layers and compiled JavaScript are kept between builds: $IMPRIMATUR_CACHE or ~/.cache/imprimatur. */
export function defaultLayerCache(): string {
  return join(process.env.IMPRIMATUR_CACHE || join(homedir(), ".cache", "imprimatur"), "image-layers");
}

/** Builds the image and writes it into the layout; see ImageBuildOptions. */
export async function buildImage(opts: ImageBuildOptions): Promise<BuiltImage> {
  const projectDir = resolve(opts.projectDir ?? PROJECT_DIR);
  const log = opts.log ?? (() => {});
  const pkg = readJson(join(projectDir, "package.json")) as { name?: string; version?: string; license?: string; description?: string };
  const version = pkg.version ?? "0.0.0";
  const tag = opts.tag ?? version;
  const revision = opts.commit ?? (process.env.IMPRIMATUR_COMMIT?.trim() || gitRevision(projectDir));
  const architecture = ociArchitecture();
  const cacheDir = opts.layerCache === false ? undefined : (opts.layerCache ?? defaultLayerCache());

  const layerEntries: Array<{ name: string; entries: TarEntry[] }> = [
    { name: "runtime", entries: runtimeEntries(opts.nodeBinary ?? join(projectDir, "node_modules", "node", "bin", "node")) },
    { name: "dependencies", entries: dependencyEntries(projectDir) },
    { name: "app", entries: appEntries(projectDir, cacheDir) },
  ];
  const layers: LayerInfo[] = [];
  const layerBlobs: Buffer[] = [];
  for (const { name, entries } of layerEntries) {
    const { info, bytes } = await compressLayer(name, entries, cacheDir);
    log(`layer ${name}: ${entries.length} entries, ${(info.size / 1e6).toFixed(1)} MB compressed, ${info.digest}`);
    layers.push(info);
    layerBlobs.push(bytes);
  }

  const annotations = {
    "org.opencontainers.image.title": "imprimatur",
    ...(pkg.description ? { "org.opencontainers.image.description": pkg.description } : {}),
    "org.opencontainers.image.version": version,
    "org.opencontainers.image.revision": revision,
    ...(pkg.license ? { "org.opencontainers.image.licenses": pkg.license } : {}),
  };
  const config = json({
    created: EPOCH,
    architecture,
    os: "linux",
    config: {
      User: `${NONROOT_UID}:${NONROOT_UID}`,
      Env: [`PATH=${posix.dirname(NODE_PATH)}`, "NODE_ENV=production", "HOME=/home/nonroot", `IMPRIMATUR_COMMIT=${revision}`],
      Entrypoint: [NODE_PATH, `${APP_DIR}/bin/imprimatur.js`],
      Cmd: ["serve", "--state-dir", STATE_DIR],
      WorkingDir: APP_DIR,
      ExposedPorts: { "8443/tcp": {} },
      // No Volumes: runtimes would make anonymous ones; the Deployment mounts an emptyDir on the state folder.
      StopSignal: "SIGTERM",
      Labels: annotations,
    },
    rootfs: { type: "layers", diff_ids: layers.map((l) => l.diffId) },
    history: layers.map((l) => ({ created: EPOCH, created_by: `imprimatur scripts/build-image.ts: ${l.name} layer` })),
  });
  const manifest = json({
    schemaVersion: 2,
    mediaType: MEDIA_TYPES.manifest,
    config: { mediaType: MEDIA_TYPES.config, digest: sha256(config), size: config.length },
    layers: layers.map((l) => ({ mediaType: MEDIA_TYPES.layer, digest: l.digest, size: l.size })),
    annotations,
  });
  const digest = sha256(manifest);
  writeLayout(resolve(opts.outputDir), tag, { mediaType: MEDIA_TYPES.manifest, digest, size: manifest.length, annotations }, [...layerBlobs, config, manifest]);
  return { layoutDir: resolve(opts.outputDir), tag, digest, size: manifest.length, configDigest: sha256(config), layers, version, revision, architecture };
}

// ---------------------------------------------------------------------------------------------
// Layer contents

function runtimeEntries(nodeBinary: string): TarEntry[] {
  if (!existsSync(nodeBinary)) throw new ImageBuildError("runtime", `${nodeBinary} not found: run npm ci (the node package provides the runtime)`);
  const node = readRuntimeFile(nodeBinary);
  const entries: TarEntry[] = [
    {
      type: "file",
      path: "etc/passwd",
      mode: 0o644,
      content: Buffer.from(`root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:${NONROOT_UID}:${NONROOT_UID}:nonroot:/home/nonroot:/sbin/nologin\n`),
    },
    { type: "file", path: "etc/group", mode: 0o644, content: Buffer.from(`root:x:0:\nnonroot:x:${NONROOT_UID}:\n`) },
    { type: "file", path: "etc/nsswitch.conf", mode: 0o644, content: Buffer.from("passwd: files\ngroup: files\nhosts: files dns\n") },
    { type: "dir", path: "home/nonroot", mode: 0o700, uid: NONROOT_UID, gid: NONROOT_UID },
    { type: "dir", path: "root", mode: 0o700 },
    { type: "dir", path: "tmp", mode: 0o1777 },
    { type: "dir", path: STATE_DIR.slice(1), mode: 0o700, uid: NONROOT_UID, gid: NONROOT_UID },
    { type: "file", path: NODE_PATH.slice(1), mode: 0o755, content: node.content },
  ];
  for (const lib of sharedLibraries(nodeBinary)) {
    const file = readRuntimeFile(lib.source);
    entries.push({ type: "file", path: lib.path.slice(1), mode: 0o755, content: file.content });
  }
  return withParents(entries);
}

function dependencyEntries(projectDir: string): TarEntry[] {
  const lock = readLockfile(projectDir);
  const nodeModules = join(projectDir, "node_modules");
  if (!existsSync(nodeModules)) throw new ImageBuildError("node-modules", `${nodeModules} not found: run npm ci`);
  const entries: TarEntry[] = [];
  for (const key of productionPackages(lock)) {
    const folder = join(projectDir, key);
    const manifest = join(folder, "package.json");
    if (!existsSync(manifest)) throw new ImageBuildError("node-modules", `${key} is in package-lock.json but not installed: run npm ci`);
    const installed = (readJson(manifest) as { version?: string }).version;
    const locked = lockedVersion(lock, key);
    if (locked !== undefined && installed !== locked) {
      throw new ImageBuildError("node-modules", `${key} is ${installed} in node_modules but ${locked} in package-lock.json: run npm ci`);
    }
    // A package's own node_modules holds other packages: those in the closure are entries of their own.
    entries.push(...treeEntries(folder, `app/${key}`, { skipTopLevel: ["node_modules"] }));
  }
  return withParents(entries);
}

/** The app layer's entries (app/package.json, app/bin, app/src compiled, app/policies); the benchmarks run serve from them. */
export function appEntries(projectDir: string, cacheDir: string | undefined): TarEntry[] {
  const compiler = projectCompiler(projectDir, cacheDir === undefined ? undefined : join(cacheDir, "compiled-source"));
  const entries: TarEntry[] = [];
  for (const path of APP_PATHS) {
    const tree = treeEntries(join(projectDir, path), `app/${path}`, { skipTopLevel: [] });
    entries.push(...(path === "src" ? compiledSourceEntries(tree, compiler) : tree));
  }
  return withParents(entries);
}

/**
 * A file or folder of the host as entries under `at`: folders 0755, files 0755 when executable else 0644, owned by
 * root. Symlinks are kept when they point inside the tree; anything else (a device, a socket) is refused.
 */
function treeEntries(source: string, at: string, opts: { skipTopLevel: string[] }): TarEntry[] {
  const entries: TarEntry[] = [];
  const root = realpathSync(source);
  const visit = (path: string, inImage: string, top: boolean) => {
    const stat = lstatSync(path);
    if (stat.isDirectory()) {
      entries.push({ type: "dir", path: inImage, mode: 0o755 });
      for (const name of readdirSync(path).sort()) {
        if (top && opts.skipTopLevel.includes(name)) continue;
        visit(join(path, name), `${inImage}/${name}`, false);
      }
    } else if (stat.isFile()) {
      entries.push({ type: "file", path: inImage, mode: (stat.mode & 0o111) !== 0 ? 0o755 : 0o644, content: readFileSync(path) });
    } else if (stat.isSymbolicLink()) {
      const target = readlinkSync(path);
      const resolved = resolve(dirname(path), target);
      if (target.startsWith("/") || relative(root, resolved).startsWith("..")) {
        throw new ImageBuildError("input", `${path} is a symlink to ${target}, outside ${source}; the image keeps only links inside a package`);
      }
      entries.push({ type: "symlink", path: inImage, target });
    } else {
      throw new ImageBuildError("input", `${path} is neither a file, a folder nor a symlink`);
    }
  };
  visit(root, at, true);
  return entries;
}

/** Adds the missing parent folders (0755, root) and sorts by path, so the order never depends on the caller. */
function withParents(entries: TarEntry[]): TarEntry[] {
  const byPath = new Map<string, TarEntry>();
  for (const entry of entries) {
    if (byPath.has(entry.path)) throw new ImageBuildError("input", `two entries for ${entry.path} in one layer`);
    byPath.set(entry.path, entry);
  }
  for (const entry of entries) {
    for (let parent = posix.dirname(entry.path); parent !== "."; parent = posix.dirname(parent)) {
      if (!byPath.has(parent)) byPath.set(parent, { type: "dir", path: parent, mode: 0o755 });
    }
  }
  return [...byPath.values()].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}

// ---------------------------------------------------------------------------------------------
// Blobs

async function compressLayer(name: string, entries: TarEntry[], cacheDir: string | undefined): Promise<{ info: LayerInfo; bytes: Buffer }> {
  const chunks = tarChunks(entries);
  const hash = createHash("sha256");
  for (const chunk of chunks) hash.update(chunk);
  const diffId = `sha256:${hash.digest("hex")}`;
  // The compressed bytes depend on the tar and on zlib; both are in the cache key.
  const cached = cacheDir === undefined ? undefined : join(cacheDir, `${diffId.slice(7)}.zlib-${process.versions.zlib}-${GZIP_LEVEL}.gz`);
  let bytes = cached === undefined ? undefined : readCached(cached);
  if (bytes === undefined) {
    const out: Buffer[] = [];
    await pipeline(Readable.from(chunks), createGzip({ level: GZIP_LEVEL }), async (source: AsyncIterable<Buffer>) => {
      for await (const chunk of source) out.push(chunk);
    });
    bytes = Buffer.concat(out);
    if (cached !== undefined) keepCached(cached, bytes);
  }
  return { info: { name, digest: sha256(bytes), diffId, size: bytes.length, entries: entries.length }, bytes };
}

interface Descriptor {
  mediaType: string;
  digest: string;
  size: number;
  annotations?: Record<string, string>;
}

function writeLayout(layoutDir: string, tag: string, top: Descriptor, blobs: Buffer[]): void {
  const indexPath = join(layoutDir, "index.json");
  let index: { schemaVersion: 2; mediaType?: string; manifests: Descriptor[] } = { schemaVersion: 2, mediaType: MEDIA_TYPES.index, manifests: [] };
  if (existsSync(layoutDir) && readdirSync(layoutDir).length > 0) {
    if (!existsSync(join(layoutDir, "oci-layout")) || !existsSync(indexPath)) {
      throw new ImageBuildError("layout", `${layoutDir} is not empty and not an OCI image layout; give an empty or new folder`);
    }
    index = readJson(indexPath) as typeof index;
  }
  const blobDir = join(layoutDir, "blobs", "sha256");
  mkdirSync(blobDir, { recursive: true });
  writeFileSync(join(layoutDir, "oci-layout"), JSON.stringify({ imageLayoutVersion: "1.0.0" }));
  for (const bytes of blobs) {
    const path = join(blobDir, sha256(bytes).slice(7));
    if (!existsSync(path)) writeFileSync(path, bytes);
  }
  index.manifests = index.manifests.filter((m) => m.annotations?.[REF_NAME] !== tag);
  index.manifests.push({ ...top, annotations: { ...top.annotations, [REF_NAME]: tag } });
  writeFileSync(indexPath, JSON.stringify(index));
}

// ---------------------------------------------------------------------------------------------
// Small helpers

function sha256(bytes: Buffer): string {
  return `sha256:${createHash("sha256").update(bytes).digest("hex")}`;
}

/** JSON bytes in the insertion order of the keys above, which is fixed, so the bytes are too. */
function json(value: unknown): Buffer {
  return Buffer.from(JSON.stringify(value));
}

function readJson(path: string): unknown {
  try {
    return JSON.parse(readFileSync(path, "utf8"));
  } catch (err) {
    throw new ImageBuildError("input", `cannot read ${path}: ${(err as Error).message}`, { cause: err });
  }
}

/** git HEAD of the project, "-dirty" when the files that go into the image differ from it; "unknown" without git. */
export function gitRevision(projectDir: string): string {
  const git = (args: string[]) => execFileSync("git", args, { cwd: projectDir, encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim();
  try {
    const head = git(["rev-parse", "--verify", "HEAD"]);
    const changed = git(["status", "--porcelain", "--", ...APP_PATHS, "package-lock.json"]);
    return changed === "" ? head : `${head}-dirty`;
  } catch {
    return "unknown";
  }
}
