// The production dependencies of the image: which folders of node_modules the app needs at run time.
//
// Read from package-lock.json (lockfile v2/v3 `packages`), the way Node resolves them: starting from the
// package's own dependencies, each name is looked up in the requiring package's node_modules, then in every
// folder above it. The closure is what `npm ci --omit=dev` would install, minus the `node` package (the image
// carries its binary as the runtime, not as a dependency). A pruned copy of node_modules, so the build needs no
// registry and gives the same files npm ci gave.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ImageBuildError } from "./image-build-error.ts";

export interface LockPackage {
  /** The package's own name, where it differs from its folder's (an npm alias). */
  name?: string;
  version?: string;
  /** Subresource Integrity of the package's tarball ("sha512-<base64>"). */
  integrity?: string;
  /** Where it was downloaded from (absent with omit-lockfile-registry-resolved). */
  resolved?: string;
  license?: string;
  dev?: boolean;
  optional?: boolean;
  link?: boolean;
  dependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  peerDependenciesMeta?: Record<string, { optional?: boolean }>;
}

export interface Lockfile {
  lockfileVersion?: number;
  packages?: Record<string, LockPackage>;
}

/** Dependencies that never go into the image: the runtime comes in as /usr/local/bin/node instead. */
export const RUNTIME_PACKAGES = ["node"];

/**
 * The lock keys ("node_modules/a", "node_modules/a/node_modules/b") of every package the root needs at run time,
 * sorted. Throws ImageBuildError "lockfile" when the lockfile is not v2/v3 or a required dependency has no entry.
 */
export function productionPackages(lock: Lockfile, exclude: readonly string[] = RUNTIME_PACKAGES): string[] {
  const packages = lock.packages;
  if (packages === undefined || (lock.lockfileVersion ?? 0) < 2) {
    throw new ImageBuildError("lockfile", "package-lock.json has no `packages` section (lockfileVersion 2 or 3 needed): run npm install with npm 7 or later");
  }
  const root = packages[""] ?? {};
  const found = new Set<string>();
  const queue: string[] = [];

  const require = (from: string, name: string, optional: boolean) => {
    const key = resolve(packages, from, name);
    if (key === undefined) {
      if (optional) return;
      throw new ImageBuildError("lockfile", `${from || "the package"} needs ${name}, which package-lock.json does not list: run npm install`);
    }
    if (found.has(key)) return;
    found.add(key);
    queue.push(key);
  };
  const dependenciesOf = (from: string, pkg: LockPackage, isRoot: boolean) => {
    for (const name of Object.keys(pkg.dependencies ?? {})) if (!(isRoot && exclude.includes(name))) require(from, name, false);
    for (const name of Object.keys(pkg.optionalDependencies ?? {})) if (!(isRoot && exclude.includes(name))) require(from, name, true);
    for (const name of Object.keys(pkg.peerDependencies ?? {})) require(from, name, pkg.peerDependenciesMeta?.[name]?.optional === true);
  };

  dependenciesOf("", root, true);
  while (queue.length > 0) {
    const key = queue.shift()!;
    const pkg = packages[key]!;
    if (pkg.dev === true) throw new ImageBuildError("lockfile", `${key} is marked dev in package-lock.json but a production dependency needs it`);
    if (pkg.link === true)
      throw new ImageBuildError("lockfile", `${key} is a link (a workspace or file: dependency); the image build copies installed packages only`);
    dependenciesOf(key, pkg, false);
  }
  return [...found].sort();
}

/** Node's lookup of `name` from the package at lock key `from` ("" is the root). */
function resolve(packages: Record<string, LockPackage>, from: string, name: string): string | undefined {
  let base = from;
  for (;;) {
    const candidate = base === "" ? `node_modules/${name}` : `${base}/node_modules/${name}`;
    if (packages[candidate] !== undefined) return candidate;
    if (base === "") return undefined;
    const cut = base.lastIndexOf("/node_modules/");
    base = cut >= 0 ? base.slice(0, cut) : "";
  }
}

/** The lock's version of each package, for checking that node_modules holds what the lockfile says. */
export function lockedVersion(lock: Lockfile, key: string): string | undefined {
  return lock.packages?.[key]?.version;
}

export function readLockfile(projectDir: string): Lockfile {
  const path = join(projectDir, "package-lock.json");
  try {
    return JSON.parse(readFileSync(path, "utf8")) as Lockfile;
  } catch (err) {
    throw new ImageBuildError("lockfile", `cannot read ${path}: ${(err as Error).message}`);
  }
}
