// `npm run image` (scripts/build-image.ts) end to end: the same inputs give the same digest; the image pushed to a
// real docker-registry with skopeo and pulled back holds a minimal root filesystem (no shell, production
// dependencies only, the state folder owned by 65532, src as JavaScript compiled from the TypeScript and no .ts)
// whose node runs `imprimatur version`; and `serve` from it runs the way a container runtime starts it: PID 1 of
// its own PID namespace, user 65532, a read-only root with only the state folder and /tmp writable, no shell
// anywhere, and on SIGTERM it drains (/readyz 503) and exits 0; with --workers 2 its workers start too.
//
// The project is snapshotted first (node_modules linked), so files edited meanwhile cannot change the inputs
// between the builds compared.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { chownSync, cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, readlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { buildImage, NODE_PATH, NONROOT_UID, STATE_DIR, type BuiltImage } from "../../src/image-build/build-image.ts";
import { startRegistry, runSkopeo, type TestRegistry } from "../support/registry.ts";
import { runCommand } from "../support/command.ts";
import { freePort } from "../support/ports.ts";
import { getText } from "../support/https-client.ts";
import { teardown } from "../support/teardown.ts";

const PROJECT = fileURLToPath(new URL("../../", import.meta.url));
const COMMIT = "0123456789abcdef0123456789abcdef01234567";
let dir: string;
let snapshot: string;
let image: BuiltImage;
let registry: TestRegistry;
let rootfs: string;

type Doc = Record<string, any>;
const blob = (layout: string, digest: string) => readFileSync(join(layout, "blobs", "sha256", digest.slice("sha256:".length)));
const blobJson = (layout: string, digest: string) => JSON.parse(blob(layout, digest).toString("utf8")) as Doc;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "imprimatur-image-"));
  snapshot = join(dir, "project");
  mkdirSync(snapshot);
  for (const path of ["package.json", "package-lock.json", "bin", "src", "policies"]) cpSync(join(PROJECT, path), join(snapshot, path), { recursive: true });
  symlinkSync(join(PROJECT, "node_modules"), join(snapshot, "node_modules"));
  registry = await startRegistry({ auth: "htpasswd" });
});

after(() => teardown([() => registry?.stop(), () => dir && rmSync(dir, { recursive: true, force: true })]));

test("the same inputs give the same digest, compressed afresh or from the layer cache; another commit another digest", async () => {
  const cache = join(dir, "cache");
  image = await buildImage({ outputDir: join(dir, "a"), projectDir: snapshot, commit: COMMIT, tag: "test", layerCache: false });
  const again = await buildImage({ outputDir: join(dir, "b"), projectDir: snapshot, commit: COMMIT, tag: "test", layerCache: cache });
  assert.equal(again.digest, image.digest);
  assert.deepEqual(again.layers, image.layers);
  for (const layer of image.layers) assert.deepEqual(blob(join(dir, "b"), layer.digest), blob(join(dir, "a"), layer.digest), layer.name);
  const cached = await buildImage({ outputDir: join(dir, "c"), projectDir: snapshot, commit: COMMIT, tag: "test", layerCache: cache });
  assert.equal(cached.digest, image.digest);
  const other = await buildImage({ outputDir: join(dir, "c"), projectDir: snapshot, commit: "f".repeat(40), tag: "other", layerCache: cache });
  assert.notEqual(other.digest, image.digest);
  assert.deepEqual(
    other.layers.map((l) => l.digest),
    image.layers.map((l) => l.digest),
  );
  // One layout holds both tags.
  const index = JSON.parse(readFileSync(join(dir, "c", "index.json"), "utf8")) as Doc;
  assert.deepEqual(index.manifests.map((m: Doc) => m.annotations["org.opencontainers.image.ref.name"]).sort(), ["other", "test"]);
});

test("the config runs node on bin/imprimatur.js directly as 65532, with the version and revision as labels and annotations", () => {
  const layout = join(dir, "a");
  const manifest = blobJson(layout, image.digest);
  const config = blobJson(layout, manifest.config.digest);
  const version = (JSON.parse(readFileSync(join(snapshot, "package.json"), "utf8")) as { version: string }).version;
  assert.deepEqual(config.config.Entrypoint, [NODE_PATH, "/app/bin/imprimatur.js"]);
  assert.equal(config.config.User, `${NONROOT_UID}:${NONROOT_UID}`);
  assert.ok(config.config.Env.includes(`IMPRIMATUR_COMMIT=${COMMIT}`));
  assert.equal(config.created, "1970-01-01T00:00:00Z");
  for (const annotations of [config.config.Labels, manifest.annotations]) {
    assert.equal(annotations["org.opencontainers.image.version"], version);
    assert.equal(annotations["org.opencontainers.image.revision"], COMMIT);
  }
  assert.deepEqual(
    image.layers.map((l) => l.name),
    ["runtime", "dependencies", "app"],
  );
});

test("pushed with skopeo and pulled back: the same digest, a root filesystem with no shell whose node runs `imprimatur version`", async () => {
  await registry.push(join(dir, "a"), "test", "imprimatur", "test");
  assert.equal((await registry.inspectRaw("imprimatur", "test")).digest, image.digest);
  const pulled = join(dir, "pulled");
  const copy = await runSkopeo([
    "--insecure-policy",
    "copy",
    ...registry.skopeoFlags("src"),
    `docker://${registry.host}/imprimatur:test`,
    `oci:${pulled}:test`,
  ]);
  assert.equal(copy.code, 0, copy.stderr);

  // Unpack as a container runtime does: the layers in order, owners and modes as recorded.
  rootfs = join(dir, "rootfs");
  mkdirSync(rootfs);
  const index = JSON.parse(readFileSync(join(pulled, "index.json"), "utf8")) as Doc;
  const manifest = blobJson(pulled, index.manifests[0].digest);
  for (const layer of manifest.layers) {
    const untar = await runCommand(
      "tar",
      ["-xzf", join(pulled, "blobs", "sha256", layer.digest.slice(7)), "-C", rootfs, "--numeric-owner", "--same-owner", "--same-permissions"],
      { env: process.env, timeoutMs: 120_000, label: "tar" },
    );
    assert.equal(untar.code, 0, untar.stderr);
  }
  for (const absent of ["bin/sh", "usr/bin", "bin", "sbin", "app/node_modules/node", "app/node_modules/typescript", "app/node_modules/eslint", "app/test"]) {
    assert.equal(existsSync(join(rootfs, absent)), false, `${absent} is not in the image`);
  }
  for (const present of [
    "app/node_modules/pino/package.json",
    "app/src/cli/main.js",
    "app/src/kube/pod-fields.generated.json",
    "app/package.json",
    "app/policies/default",
    "etc/passwd",
    "tmp",
  ]) {
    assert.ok(existsSync(join(rootfs, present)), `${present} is in the image`);
  }
  // src holds JavaScript compiled from the TypeScript, laid out as the checkout's, and no TypeScript at all.
  const source = readdirSync(join(rootfs, "app/src"), { recursive: true, encoding: "utf8" });
  assert.deepEqual(
    source.filter((name) => /\.(?:[cm]?ts|tsx|map)$/.test(name)),
    [],
  );
  const typescript = readdirSync(join(snapshot, "src"), { recursive: true, encoding: "utf8" }).filter((name) => name.endsWith(".ts"));
  assert.deepEqual(
    typescript.map((name) => name.replace(/\.ts$/, ".js")).filter((name) => !source.includes(name)),
    [],
  );
  const state = statSync(join(rootfs, STATE_DIR));
  assert.deepEqual([state.uid, state.gid], [NONROOT_UID, NONROOT_UID]);
  assert.match(readFileSync(join(rootfs, "etc/passwd"), "utf8"), new RegExp(`^nonroot:x:${NONROOT_UID}:${NONROOT_UID}:`, "m"));

  // Chroot-free: the image's own loader, with the image's libraries, runs the image's node.
  const { loader, libraryPath } = imageLoader(rootfs);
  const config = blobJson(pulled, manifest.config.digest);
  const env = Object.fromEntries((config.config.Env as string[]).map((e) => [e.slice(0, e.indexOf("=")), e.slice(e.indexOf("=") + 1)]));
  const version = await runCommand(
    loader,
    ["--library-path", libraryPath, join(rootfs, NODE_PATH), join(rootfs, config.config.Entrypoint[1]), "version", "-o", "json"],
    {
      env,
      timeoutMs: 60_000,
      label: "image version",
    },
  );
  assert.equal(version.code, 0, version.stderr);
  assert.deepEqual(JSON.parse(version.stdout.toString("utf8")), {
    version: image.version,
    commit: COMMIT,
    node: (JSON.parse(readFileSync(join(PROJECT, "node_modules", "node", "package.json"), "utf8")) as { version: string }).version,
  });
});

test("serve from the image as PID 1, user 65532, read-only root: ready, then SIGTERM drains and it exits 0", async () => {
  await serveFromImage("state", [], async ({ pid, probe }) => {
    const status = readFileSync(`/proc/${pid}/status`, "utf8");
    assert.match(status, /^NSpid:\s+\d+\s+1$/m, "PID 1 in its namespace");
    assert.match(status, new RegExp(`^Uid:\\s+${NONROOT_UID}\\s+${NONROOT_UID}\\s+${NONROOT_UID}\\s+${NONROOT_UID}$`, "m"));
    assert.equal(readlinkSync(`/proc/${pid}/root`), rootfs);
    assert.equal(readlinkSync(`/proc/${pid}/exe`), join(rootfs, NODE_PATH));

    // A PID 1 without its own handler would not even notice SIGTERM; serve drains: not ready, still answering.
    process.kill(pid, "SIGTERM");
    let draining = false;
    for (let i = 0; i < 20 && !draining; i++) {
      draining = (await probe()) === 503;
      if (!draining) await new Promise((r) => setTimeout(r, 50));
    }
    assert.ok(draining, "/readyz answered 503 during the drain");
  });
});

test("serve --workers 2 from the image: the workers, started by node:cluster from the same entry point, run the compiled JavaScript", async () => {
  await serveFromImage("state-workers", ["--workers", "2"], async ({ pid }) => {
    // The primary serves once every worker does; each is a child of the primary, the image's node in the image's root.
    const workers = readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim().split(/\s+/).map(Number);
    assert.equal(workers.length, 2, `two workers: ${workers.join(" ")}`);
    for (const worker of workers) {
      assert.equal(readlinkSync(`/proc/${worker}/exe`), join(rootfs, NODE_PATH));
      assert.equal(readlinkSync(`/proc/${worker}/root`), rootfs);
      assert.equal(readFileSync(`/proc/${worker}/cmdline`, "utf8").split("\0")[1], "/app/bin/imprimatur.js");
    }
    process.kill(pid, "SIGTERM");
  });
});

/**
 * Runs `serve` from the unpacked image as a container runtime starts it (PID 1 of its own PID namespace, the config's
 * user and environment, a read-only root with only the state folder and /tmp writable), waits until /readyz
 * answers 200 and PID 1 logs that it serves, hands the server's PID to `during`, which sends SIGTERM, then expects exit 0 after a drain.
 */
async function serveFromImage(
  stateName: string,
  extraArgs: string[],
  during: (server: { pid: number; probe: () => Promise<number> }) => Promise<void>,
): Promise<void> {
  assert.ok(rootfs, "an earlier test unpacked the image");
  const state = join(dir, stateName);
  mkdirSync(state, { mode: 0o700 });
  chownSync(state, NONROOT_UID, NONROOT_UID);
  const port = await freePort();
  const manifest = blobJson(join(dir, "a"), image.digest);
  const config = blobJson(join(dir, "a"), manifest.config.digest).config;
  // What a runtime does with the config and a pod spec like deploy/'s: mounts, then the entrypoint as the user.
  const script = [
    "set -e",
    `mount --bind "$ROOTFS" "$ROOTFS"`,
    `mount -o remount,bind,ro "$ROOTFS"`,
    `mount --bind "$STATE" "$ROOTFS${STATE_DIR}"`,
    `mount -t tmpfs -o mode=1777,size=16m tmpfs "$ROOTFS/tmp"`,
    `exec env -i ${(config.Env as string[]).map((e) => `'${e}'`).join(" ")} "$(command -v chroot)" --userspec=${config.User} "$ROOTFS" "$@"`,
  ].join("\n");
  const args = [...config.Entrypoint, "serve", "--host", "127.0.0.1", "--port", String(port), "--state-dir", STATE_DIR, "--drain", "2s", ...extraArgs];
  const child = spawn("unshare", ["--pid", "--fork", "--mount", "--propagation", "private", "sh", "-c", script, "sh", ...args], {
    env: { ...process.env, ROOTFS: rootfs, STATE: state },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout.on("data", (c: Buffer) => (output += c.toString()));
  child.stderr.on("data", (c: Buffer) => (output += c.toString()));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  try {
    let ca = "";
    const probe = async () => (await getText(`https://127.0.0.1:${port}/readyz`, ca).catch(() => ({ status: 0 }))).status;
    const deadline = Date.now() + 60_000;
    for (;;) {
      assert.equal(child.exitCode, null, `serve exited early:\n${output}`);
      try {
        ca ||= readFileSync(join(state, "ca.crt"), "utf8");
        // Ready, and PID 1 says it serves: under --workers the first worker to listen answers /readyz while the
        // primary still waits for the others, and a SIGTERM then stops a start-up rather than draining a server.
        if ((await getText(`https://127.0.0.1:${port}/readyz`, ca)).status === 200 && /"pid":1,[^\n]*"msg":"serving"/.test(output)) break;
      } catch {
        // not up yet
      }
      assert.ok(Date.now() < deadline, `serve never became ready:\n${output}`);
      await new Promise((r) => setTimeout(r, 200));
    }

    // unshare's one child is the namespace's PID 1: node itself, exec'd through env and chroot.
    const [pid] = readFileSync(`/proc/${child.pid}/task/${child.pid}/children`, "utf8").trim().split(/\s+/).map(Number);
    await during({ pid: pid!, probe });
    // Bounded: a PID 1 that ignored the signal would never exit.
    const code = await Promise.race([exited, new Promise<string>((r) => setTimeout(() => r("still running 30 s after SIGTERM"), 30_000).unref())]);
    assert.equal(code, 0, output);
    assert.match(output, /"signal":"SIGTERM".*shutting down|shutting down.*"signal":"SIGTERM"/);
    assert.ok(readdirSync(state).length > 0, "the state folder was written");
  } catch (e) {
    if (e instanceof assert.AssertionError && !e.message.includes(output)) e.message += `\n${output}`;
    throw e;
  } finally {
    if (child.exitCode === null) child.kill("SIGKILL");
    await exited;
  }
}

/** The image's dynamic loader and the folders holding its libraries (those ldd listed at build time). */
function imageLoader(root: string): { loader: string; libraryPath: string } {
  const loaders = ["lib64", "lib"].flatMap((d) =>
    existsSync(join(root, d))
      ? readdirSync(join(root, d))
          .filter((n) => n.startsWith("ld-linux"))
          .map((n) => join(root, d, n))
      : [],
  );
  assert.equal(loaders.length, 1, `one dynamic loader in the image: ${loaders.join(", ")}`);
  const libraryDirs = new Set<string>();
  const walk = (path: string) => {
    for (const name of readdirSync(path)) {
      const full = join(path, name);
      if (statSync(full).isDirectory()) walk(full);
      else if (/\.so(\.\d+)*$/.test(name)) libraryDirs.add(path);
    }
  };
  for (const d of ["lib", "lib64", "usr/lib"]) if (existsSync(join(root, d))) walk(join(root, d));
  return { loader: loaders[0]!, libraryPath: [...libraryDirs].join(":") };
}
