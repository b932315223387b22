// Runnable OCI images of a Node.js program, for pods of the small cluster that must do what busybox cannot
// (serve HTTPS, verify the apiserver's certificate): the test runner's own Node binary, the shared libraries it
// is linked against (as `ldd` lists them), and the program's files, in one gzip'd layer. No shell, no package
// manager; the user is 65532 and the root filesystem can be mounted read-only. Same inputs ⇒ same digest.

import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import { tarChunks } from "../../src/image-build/reproducible-tar.ts";
import { MEDIA_TYPES, sha256Digest } from "./oci-layout.ts";

export interface NodeImageOptions {
  /** The tag (ref.name) in the layout's index.json: what `registry.push(layoutDir, tag, …)` names. */
  tag: string;
  /** Files of the program: path in the image (relative, e.g. "app/main.ts") → content. */
  files: Record<string, Buffer | string>;
  /** Arguments after the node binary, e.g. ["/app/main.ts"]. */
  entrypoint: string[];
}

export interface NodeImage {
  layoutDir: string;
  tag: string;
  digest: string;
}

export const NODE_IMAGE_USER = "65532";
const NODE_IN_IMAGE = "/usr/bin/node";

/** The shared libraries a dynamically linked binary loads, from `ldd`: absolute paths (the loader included). */
function sharedLibraries(binary: string): string[] {
  const out = spawnSync("ldd", [binary], { encoding: "utf8" });
  if (out.status !== 0) throw new Error(`ldd ${binary}: ${out.stderr || out.error?.message}`);
  const paths: string[] = [];
  for (const line of out.stdout.split("\n")) {
    const match = /=>\s*(\/\S+)/.exec(line) ?? /^\s*(\/\S+)\s+\(/.exec(line);
    if (match?.[1]) paths.push(match[1]);
  }
  return paths;
}

type Entry = { path: string; content: Buffer; mode: number } | { path: string; dir: true; mode: number };

function tar(entries: Entry[]): Buffer {
  return Buffer.concat(
    tarChunks(entries.map((e) => ("content" in e ? { type: "file" as const, ...e } : { type: "dir" as const, path: e.path, mode: e.mode }))),
  );
}

/** Every parent directory of the given relative paths, parents first. */
function parentDirs(paths: string[]): string[] {
  const dirs = new Set<string>();
  for (const path of paths) {
    const segments = path.split("/").slice(0, -1);
    for (let i = 1; i <= segments.length; i++) dirs.add(segments.slice(0, i).join("/") + "/");
  }
  return [...dirs].sort();
}

export function buildNodeImage(opts: NodeImageOptions): NodeImage {
  const files = new Map<string, { content: Buffer; mode: number }>();
  files.set(NODE_IN_IMAGE.slice(1), { content: readFileSync(process.execPath), mode: 0o755 });
  for (const lib of sharedLibraries(process.execPath)) files.set(lib.slice(1), { content: readFileSync(lib), mode: 0o755 });
  files.set("etc/passwd", {
    content: Buffer.from(`root:x:0:0:root:/:/sbin/nologin\nnonroot:x:${NODE_IMAGE_USER}:${NODE_IMAGE_USER}::/tmp:/sbin/nologin\n`),
    mode: 0o644,
  });
  files.set("etc/group", { content: Buffer.from(`root:x:0:\nnonroot:x:${NODE_IMAGE_USER}:\n`), mode: 0o644 });
  for (const [path, content] of Object.entries(opts.files)) files.set(path.replace(/^\/+/, ""), { content: Buffer.from(content), mode: 0o644 });
  const paths = [...files.keys()].sort();
  const entries: Entry[] = [
    ...[...new Set([...parentDirs(paths), "tmp/"])].sort().map((path): Entry => ({ path, dir: true, mode: path === "tmp/" ? 0o1777 : 0o755 })),
    ...paths.map((path): Entry => ({ path, ...files.get(path)! })),
  ];
  const layerTar = tar(entries);
  // Level 1: the binary is most of it, and a test waits for this.
  const layer = gzipSync(layerTar, { level: 1 });
  const config = Buffer.from(
    JSON.stringify({
      architecture: process.arch === "x64" ? "amd64" : process.arch,
      os: "linux",
      config: { Env: ["PATH=/usr/bin"], Entrypoint: [NODE_IN_IMAGE, ...opts.entrypoint], User: NODE_IMAGE_USER, WorkingDir: "/tmp" },
      rootfs: { type: "layers", diff_ids: [sha256Digest(layerTar)] },
    }),
  );
  const manifest = Buffer.from(
    JSON.stringify({
      schemaVersion: 2,
      mediaType: MEDIA_TYPES.manifest,
      config: { mediaType: MEDIA_TYPES.config, digest: sha256Digest(config), size: config.length },
      layers: [{ mediaType: MEDIA_TYPES.layerTarGzip, digest: sha256Digest(layer), size: layer.length }],
    }),
  );
  const layoutDir = mkdtempSync(join(tmpdir(), "imprimatur-node-image-"));
  const blobs = join(layoutDir, "blobs", "sha256");
  mkdirSync(blobs, { recursive: true });
  for (const bytes of [layer, config, manifest]) writeFileSync(join(blobs, sha256Digest(bytes).slice("sha256:".length)), bytes);
  writeFileSync(join(layoutDir, "oci-layout"), JSON.stringify({ imageLayoutVersion: "1.0.0" }));
  const digest = sha256Digest(manifest);
  writeFileSync(
    join(layoutDir, "index.json"),
    JSON.stringify({
      schemaVersion: 2,
      mediaType: MEDIA_TYPES.index,
      manifests: [{ mediaType: MEDIA_TYPES.manifest, digest, size: manifest.length, annotations: { "org.opencontainers.image.ref.name": opts.tag } }],
    }),
  );
  return { layoutDir, tag: opts.tag, digest };
}
