// `npm run node-bundle`: the node proxy as one self-contained folder for a node's /opt/imprimatur, and a
// reproducible .tar.gz of it. The kubelet pulls every image through the proxy, so the proxy cannot be a pod whose
// image it would pull: it runs on the host, under systemd, from this folder:
//
//   node                      the Node.js 24 runtime of the `node` npm package (the one the tests run on)
//   imprimatur                a launcher for operators (`/opt/imprimatur/imprimatur node-records`); the unit
//                             calls node directly and needs no shell
//   app/                      bin/, src/, policies/, package.json and the production dependencies only
//   build.env                 IMPRIMATUR_COMMIT, for `imprimatur version`
//   systemd/                  the unit, the environment file to copy to /etc/imprimatur, the kubelet setting
//   containerd-verifier/      for containerd 2.x: the image verifier for its bindir plugin, its flags, the stanza
//
// The dependencies are copied from this clone's node_modules (what `npm ci` installed), pruned to the packages
// `npm ls --omit=dev` lists, without the `node` package (its binary is the runtime above): no registry is asked.
// The archive is the same bytes for the same inputs: names sorted, times, owners and modes normalised, gzip
// without a name or time.
import { execFileSync, spawnSync } from "node:child_process";
import { chmodSync, copyFileSync, cpSync, createReadStream, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createHash } from "node:crypto";
import { basename, dirname, join, relative, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const ROOT = fileURLToPath(new URL("../", import.meta.url));
const USAGE = `Usage: npm run node-bundle -- [--out DIR] [--no-archive]

Builds the node proxy's host bundle: DIR/imprimatur-node-proxy-VERSION-linux-ARCH/ and, unless --no-archive,
DIR/imprimatur-node-proxy-VERSION-linux-ARCH.tar.gz (reproducible) with its SHA-256 in a .sha256 file beside it.

  --out DIR       where to write (default dist/)
  --no-archive    the folder only (tests)

Run after npm ci. Exit status: 0 built, 1 a build error, 2 a usage error.
`;

/** A build that cannot go on: the message says what to do. */
class BundleError extends Error {}

interface Options {
  out: string;
  archive: boolean;
}

function parseOptions(argv: string[]): Options | number {
  let values;
  try {
    values = parseArgs({ args: argv, options: { out: { type: "string" }, "no-archive": { type: "boolean" }, help: { type: "boolean", short: "h" } } }).values;
  } catch (e) {
    process.stderr.write(`build-node-bundle: ${(e as Error).message}\n\n${USAGE}`);
    return 2;
  }
  if (values.help) {
    process.stdout.write(USAGE);
    return 0;
  }
  return { out: resolve(values.out ?? join(ROOT, "dist")), archive: !values["no-archive"] };
}

/** The folders (relative to ROOT) of the production dependencies, without the runtime package and what only it needs. */
function productionPackageDirs(): string[] {
  const r = spawnSync("npm", ["ls", "--omit=dev", "--all", "--json", "--long"], { cwd: ROOT, encoding: "utf8", maxBuffer: 64 * 1024 * 1024 });
  if (r.error) throw new BundleError(`cannot run npm ls: ${r.error.message}`);
  let tree: Tree;
  try {
    tree = JSON.parse(r.stdout) as Tree;
  } catch {
    throw new BundleError(`npm ls gave no dependency tree: ${r.stderr.trim()}`);
  }
  const dirs = new Set<string>();
  const problems: string[] = [];
  const walk = (node: Tree, name: string, depth: number) => {
    if (depth === 1 && name === "node") return; // the runtime: carried as ./node
    if (depth > 0) {
      if (node.path) dirs.add(relative(ROOT, node.path).split(sep).join("/"));
      else if (node.missing && !node.optional && !node.peerMissing) problems.push(name);
    }
    for (const [child, sub] of Object.entries(node.dependencies ?? {})) walk(sub, child, depth + 1);
  };
  walk(tree, "", 0);
  if (problems.length > 0) throw new BundleError(`dependencies missing from node_modules: ${problems.join(", ")}: run npm ci`);
  for (const dir of dirs)
    if (!dir.startsWith("node_modules/")) throw new BundleError(`a dependency outside node_modules (${dir}): linked packages cannot be bundled`);
  return [...dirs].sort();
}

interface Tree {
  path?: string;
  missing?: boolean;
  optional?: boolean;
  peerMissing?: boolean;
  dependencies?: Record<string, Tree>;
}

function commit(): string {
  if (process.env.IMPRIMATUR_COMMIT?.trim()) return process.env.IMPRIMATUR_COMMIT.trim();
  try {
    return execFileSync("git", ["rev-parse", "HEAD"], { cwd: ROOT, encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim();
  } catch {
    return "unknown";
  }
}

async function sha256(file: string): Promise<string> {
  const hash = createHash("sha256");
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest("hex");
}

export async function buildNodeBundle(o: Options): Promise<{ folder: string; archive?: string; sha256?: string }> {
  const runtime = join(ROOT, "node_modules/node/bin/node");
  if (!existsSync(runtime)) throw new BundleError("node_modules/node/bin/node is missing: run npm ci (the `node` package is the bundle's runtime)");
  const runtimeVersion = execFileSync(runtime, ["-p", "process.versions.node + ' ' + process.platform + ' ' + process.arch"], { encoding: "utf8" }).trim();
  const [nodeVersion, platform, arch] = runtimeVersion.split(" ") as [string, string, string];
  if (Number(nodeVersion.split(".")[0]) < 24) throw new BundleError(`node_modules/node is Node.js ${nodeVersion}; the bundle needs 24 or later`);
  const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string };
  const name = `imprimatur-node-proxy-${pkg.version}-${platform}-${arch}`;
  const folder = join(o.out, name);

  rmSync(folder, { recursive: true, force: true });
  mkdirSync(join(folder, "app"), { recursive: true });
  copyFileSync(runtime, join(folder, "node"));
  chmodSync(join(folder, "node"), 0o755);
  for (const part of ["bin", "src", "policies"]) cpSync(join(ROOT, part), join(folder, "app", part), { recursive: true });
  for (const file of ["package.json", "package-lock.json", "LICENSE"])
    if (existsSync(join(ROOT, file))) copyFileSync(join(ROOT, file), join(folder, "app", file));
  for (const dir of productionPackageDirs()) {
    // Each package without its own node_modules: the nested packages it needs are in the list themselves.
    const from = join(ROOT, dir);
    cpSync(from, join(folder, "app", dir), { recursive: true, verbatimSymlinks: true, filter: (src) => src !== join(from, "node_modules") });
  }
  writeFileSync(
    join(folder, "imprimatur"),
    '#!/bin/sh\n# imprimatur from this bundle: its own Node.js and app.\nhere=$(dirname "$(readlink -f "$0")")\n' +
      '[ -z "$IMPRIMATUR_COMMIT" ] && [ -f "$here/build.env" ] && . "$here/build.env" && export IMPRIMATUR_COMMIT\n' +
      'exec "$here/node" "$here/app/bin/imprimatur.js" "$@"\n',
  );
  chmodSync(join(folder, "imprimatur"), 0o755);
  writeFileSync(join(folder, "build.env"), `IMPRIMATUR_COMMIT=${commit()}\n`);
  mkdirSync(join(folder, "systemd"));
  for (const file of ["imprimatur-node-proxy.service", "node-proxy.env", "kubelet-config.yaml"]) {
    copyFileSync(join(ROOT, "deploy/node-proxy/host", file), join(folder, "systemd", file));
  }
  // For containerd 2.x nodes: the verifier its image-verifier plugin runs, its flags, the containerd stanza.
  mkdirSync(join(folder, "containerd-verifier"));
  for (const file of ["imprimatur-verifier", "containerd-verifier.env", "containerd-config.toml"]) {
    copyFileSync(join(ROOT, "deploy/containerd-verifier", file), join(folder, "containerd-verifier", file));
  }
  chmodSync(join(folder, "containerd-verifier", "imprimatur-verifier"), 0o755);
  if (!o.archive) return { folder };

  return { folder, ...(await archiveFolder(folder)) };
}

/**
 * FOLDER.tar.gz and FOLDER.tar.gz.sha256: the folder under its own name, the same bytes for the same files
 * whatever their times, owners, group or other write bits, and the order the file system lists them in.
 */
export async function archiveFolder(folder: string): Promise<{ archive: string; sha256: string }> {
  const archive = `${folder}.tar.gz`;
  const tar = `tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner --mode=u+rw,go-w,go+r --format=gnu -C "$1" -cf - "$2" | gzip -n -6 > "$3"`;
  const r = spawnSync("bash", ["-c", `set -o pipefail; ${tar}`, "bash", dirname(folder), basename(folder), archive], {
    stdio: ["ignore", "inherit", "inherit"],
  });
  if (r.status !== 0) throw new BundleError(`tar | gzip failed (${r.status ?? r.signal})`);
  const digest = await sha256(archive);
  writeFileSync(`${archive}.sha256`, `${digest}  ${basename(archive)}\n`);
  return { archive, sha256: digest };
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const options = parseOptions(process.argv.slice(2));
  if (typeof options === "number") process.exit(options);
  try {
    const built = await buildNodeBundle(options);
    process.stdout.write(`${built.folder}\n${built.archive ? `${built.archive}\nsha256:${built.sha256}\n` : ""}`);
  } catch (e) {
    if (!(e instanceof BundleError)) throw e;
    process.stderr.write(`build-node-bundle: ${e.message}\n`);
    process.exit(1);
  }
}
