// What the release image holds, as its SBOM and provenance name it: the app (package.json's name and version),
// the npm packages of /app/node_modules (the production closure of package-lock.json that
// src/image-build/production-dependencies.ts computes for the image build), and the Node.js runtime, which comes
// from the `node` npm package. Read from the project folder that built the image (the checkout the release script
// runs in); system libraries the runtime loads are not npm packages and are not listed.
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { productionPackages, RUNTIME_PACKAGES, type Lockfile, type LockPackage } from "../image-build/production-dependencies.ts";
import { ReleaseError } from "./release-error.ts";

export interface NpmPackage {
  name: string;
  version: string;
  /** pkg:npm/… (Package URL, npm type: the scope's @ percent-encoded). */
  purl: string;
  /** The lock's integrity as digests of the tarball: algorithm ("sha512", "sha1") → hex. */
  digests: Record<string, string>;
  /** The license the package declares, as package-lock.json records it. */
  license?: string;
  /** Where package-lock.json says it was downloaded from, when it records that. */
  resolved?: string;
}

export interface ImageContents {
  app: NpmPackage;
  /** The production dependencies, one entry per name and version, sorted by name then version. */
  dependencies: NpmPackage[];
  /** The Node.js runtime (/usr/local/bin/node), from the `node` package; absent when the lock has none. */
  runtime?: NpmPackage;
  /** sha256:<hex> of package-lock.json. */
  lockfileDigest: string;
}

/** Reads package.json and package-lock.json of `projectDir`; ReleaseError "image" when they cannot be read. */
export function imageContents(projectDir: string): ImageContents {
  const pkg = readJson(join(projectDir, "package.json")) as { name?: string; version?: string; license?: string };
  const lockBytes = readBytes(join(projectDir, "package-lock.json"));
  let lock: Lockfile;
  try {
    lock = JSON.parse(lockBytes.toString("utf8")) as Lockfile;
  } catch (e) {
    throw new ReleaseError("image", `${join(projectDir, "package-lock.json")} is not JSON: ${(e as Error).message}`);
  }
  return contentsOf({ name: pkg.name ?? "imprimatur", version: pkg.version ?? "0.0.0", ...(pkg.license ? { license: pkg.license } : {}) }, lock, lockBytes);
}

/** The same from the parsed files: `lockBytes` only for the lockfile's digest. */
export function contentsOf(app: { name: string; version: string; license?: string }, lock: Lockfile, lockBytes: Buffer): ImageContents {
  const seen = new Map<string, NpmPackage>();
  for (const key of productionPackages(lock)) {
    const entry = lock.packages![key]!;
    const found = npmPackage(packageName(key, entry), entry);
    seen.set(`${found.name}@${found.version}`, found);
  }
  const dependencies = [...seen.values()].sort((a, b) => (a.name === b.name ? compare(a.version, b.version) : compare(a.name, b.name)));
  const runtimeEntry = RUNTIME_PACKAGES.map((name) => lock.packages?.[`node_modules/${name}`]).find((e) => e !== undefined);
  return {
    app: { name: app.name, version: app.version, purl: npmPurl(app.name, app.version), digests: {}, ...(app.license ? { license: app.license } : {}) },
    dependencies,
    ...(runtimeEntry ? { runtime: npmPackage(RUNTIME_PACKAGES[0]!, runtimeEntry) } : {}),
    lockfileDigest: `sha256:${createHash("sha256").update(lockBytes).digest("hex")}`,
  };
}

function npmPackage(name: string, entry: LockPackage): NpmPackage {
  const version = entry.version ?? "0.0.0";
  return {
    name,
    version,
    purl: npmPurl(name, version),
    digests: integrityDigests(entry.integrity),
    ...(entry.license ? { license: entry.license } : {}),
    ...(entry.resolved ? { resolved: entry.resolved } : {}),
  };
}

/** The package's name: the lock entry's own (an alias installs under another folder), else its folder's. */
function packageName(key: string, entry: LockPackage): string {
  return entry.name ?? key.slice(key.lastIndexOf("node_modules/") + "node_modules/".length);
}

/** pkg:npm/[%40scope/]name@version (purl-spec: the npm scope's @ is always percent-encoded). */
export function npmPurl(name: string, version: string): string {
  const [scope, bare] = name.startsWith("@") && name.includes("/") ? [name.slice(1, name.indexOf("/")), name.slice(name.indexOf("/") + 1)] : [undefined, name];
  const path = scope === undefined ? encodeURIComponent(bare) : `%40${encodeURIComponent(scope)}/${encodeURIComponent(bare)}`;
  return `pkg:npm/${path}@${encodeURIComponent(version)}`;
}

/** "sha512-<base64> sha1-<base64>" → { sha512: hex, sha1: hex }; unknown or malformed parts are left out. */
export function integrityDigests(integrity: string | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const part of (integrity ?? "").split(/\s+/)) {
    const m = /^(sha1|sha256|sha384|sha512)-([A-Za-z0-9+/]+={0,2})$/.exec(part);
    if (m) out[m[1]!] = Buffer.from(m[2]!, "base64").toString("hex");
  }
  return out;
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function readBytes(path: string): Buffer {
  try {
    return readFileSync(path);
  } catch (e) {
    throw new ReleaseError("image", `cannot read ${path}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`, { cause: e });
  }
}

function readJson(path: string): unknown {
  try {
    return JSON.parse(readBytes(path).toString("utf8"));
  } catch (e) {
    if (e instanceof ReleaseError) throw e;
    throw new ReleaseError("image", `${path} is not JSON: ${(e as Error).message}`);
  }
}
