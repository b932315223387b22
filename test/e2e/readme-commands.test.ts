// The README's two commands, as a newcomer runs them, under each npm a newcomer may have: npm 11 and npm 12 (the
// registry's latest; it runs no dependency install script that package.json's allowScripts does not approve, and
// the `node` package's preinstall is what brings Node.js 24). Each in a fresh copy of the project's files (what a
// clone holds: the files git tracks, as they are in the working tree), with the system Node.js first on PATH, as
// on a machine that has only its own Node.js (often older than 24):
//   - `npm ci && npx imprimatur serve`: serve answers an AdmissionReview with the embedded default policy, and
//     stops on SIGTERM with exit 0;
//   - `npm ci && npm test`: the whole pipeline (provisioning, already done by this run; type check, format,
//     lint, the runner) on one test file (`npm test -- FILE`), not the whole suite a second time.
// npm itself comes from the registry through `npx npm@N`, as a newcomer's would.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, execFileSync } from "node:child_process";
import { cp, mkdir, mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join, delimiter } from "node:path";
import { fileURLToPath } from "node:url";
import { postJson } from "../support/https-client.ts";
import { podReview } from "../support/admission.ts";
import { freePort } from "../support/ports.ts";
import { teardown } from "../support/teardown.ts";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const NPM_VERSIONS = ["11", "12"] as const;

let base: string;

/** PATH without this project's node_modules/.bin: the machine's own Node.js and tools. */
function systemPath(): string {
  return (process.env.PATH ?? "")
    .split(delimiter)
    .filter((entry) => !entry.includes("node_modules"))
    .join(delimiter);
}

/** A copy of the files a clone holds, as the working tree has them. */
async function freshCopy(into: string): Promise<void> {
  const files = execFileSync("git", ["ls-files", "-z", "--cached", "--others", "--exclude-standard"], { cwd: ROOT, encoding: "utf8" })
    .split("\0")
    .filter((f) => f.length > 0);
  for (const file of files) {
    const from = join(ROOT, file);
    try {
      await mkdir(dirname(join(into, file)), { recursive: true });
      await cp(from, join(into, file));
    } catch (e) {
      // A tracked file deleted in the working tree is not part of this copy.
      if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e;
    }
  }
}

interface Run {
  code: number | null;
  output: string;
}

/** Runs `args` in `cwd` on the system PATH; resolves with its exit code and output. Its process group is killed on `signal`. */
function run(cwd: string, args: string[], opts: { timeoutMs: number; env?: Record<string, string> }): Promise<Run> {
  return new Promise((resolve, reject) => {
    const env: NodeJS.ProcessEnv = { ...process.env, PATH: systemPath(), ...opts.env };
    delete env.NODE_TEST_CONTEXT;
    delete env.NODE_OPTIONS;
    const child = spawn(args[0]!, args.slice(1), { cwd, env, stdio: ["ignore", "pipe", "pipe"], detached: true });
    let output = "";
    child.stdout.on("data", (d: Buffer) => (output += d.toString()));
    child.stderr.on("data", (d: Buffer) => (output += d.toString()));
    const timer = setTimeout(() => {
      try {
        process.kill(-child.pid!, "SIGKILL");
      } catch {
        // already gone
      }
      reject(new Error(`${args.join(" ")} did not finish within ${opts.timeoutMs / 1000} s:\n${output.slice(-4000)}`));
    }, opts.timeoutMs);
    child.once("error", (e) => {
      clearTimeout(timer);
      resolve({ code: null, output: `${output}${String(e)}` });
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}

/** Waits until no process of the group `pgid` is left (the server must not outlive npm), up to 20 s. */
async function waitUntilGone(pgid: number): Promise<void> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    try {
      process.kill(-pgid, 0);
    } catch {
      return;
    }
    if (Date.now() > deadline) {
      process.kill(-pgid, "SIGKILL");
      assert.fail(`a process of npx imprimatur serve's group ${pgid} was still running 20 s after Ctrl-C`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

before(async () => {
  base = await mkdtemp(join(tmpdir(), "imprimatur-readme-commands-"));
});

after(() => teardown([() => base && rm(base, { recursive: true, force: true })]));

test("the machine's own Node.js runs npm here (the commands must not depend on this project's Node.js 24)", async () => {
  const r = await run(ROOT, ["node", "--version"], { timeoutMs: 10_000 });
  assert.equal(r.code, 0, r.output);
  // Not asserted older than 24 (a machine may have a newer one); printed, so the run shows what it tried.
  process.stdout.write(`# system Node.js ${r.output.trim()}\n`);
});

for (const npm of NPM_VERSIONS) {
  test(`npm ${npm}: npm ci, then npx imprimatur serve answers with the embedded default policy; npm test runs the pipeline`, async () => {
    const dir = join(base, `npm-${npm}`);
    await freshCopy(dir);
    const npx = (...args: string[]) => ["npx", "-y", `npm@${npm}`, ...args];

    const version = await run(dir, npx("--version"), { timeoutMs: 120_000 });
    assert.equal(version.code, 0, version.output);
    assert.match(version.output.trim().split("\n").at(-1) ?? "", new RegExp(`^${npm}\\.`), "the npm under test");

    const ci = await run(dir, npx("ci"), { timeoutMs: 600_000 });
    assert.equal(ci.code, 0, ci.output);
    const node = await run(dir, [join(dir, "node_modules/.bin/node"), "--version"], { timeoutMs: 10_000 });
    assert.match(node.output, /^v24\./, `npm ci installed Node.js 24 from the node package (its preinstall ran): ${node.output}\n${ci.output.slice(-3000)}`);

    // `npx imprimatur serve`, on a free port and in a state folder of its own.
    const port = await freePort();
    const stateDir = join(dir, ".state");
    const env: NodeJS.ProcessEnv = { ...process.env, PATH: systemPath() };
    delete env.NODE_TEST_CONTEXT;
    delete env.NODE_OPTIONS;
    const serve = spawn("npx", ["-y", `npm@${npm}`, "exec", "--", "imprimatur", "serve", "--port", String(port), "--host", "127.0.0.1"], {
      cwd: dir,
      env,
      stdio: ["ignore", "pipe", "pipe"],
      detached: true,
    });
    let serveOutput = "";
    serve.stdout.on("data", (d: Buffer) => (serveOutput += d.toString()));
    serve.stderr.on("data", (d: Buffer) => (serveOutput += d.toString()));
    const exited = new Promise<number | null>((resolve) => serve.once("exit", (code) => resolve(code)));
    try {
      const deadline = Date.now() + 60_000;
      const review = async (image: string) => {
        const ca = await readFile(join(stateDir, "ca.crt"), "utf8");
        const res = await postJson(`https://127.0.0.1:${port}/validate`, ca, podReview({ images: [image] }));
        assert.equal(res.status, 200, JSON.stringify(res.body));
        return res.body.response as { allowed?: boolean; status?: { message?: string } };
      };
      let pinned: Awaited<ReturnType<typeof review>> | undefined;
      while (!pinned) {
        assert.equal(serve.exitCode, null, `serve exited: ${serveOutput}`);
        pinned = await review("registry.example.com/app:1.4").catch(() => undefined);
        if (!pinned) {
          assert.ok(Date.now() < deadline, `serve did not answer within 60 s: ${serveOutput}`);
          await new Promise((r) => setTimeout(r, 250));
        }
      }
      // The embedded default policy: a version runs, :latest (explicit or implied) does not.
      assert.equal(pinned.allowed, true, JSON.stringify(pinned));
      const latest = await review("registry.example.com/app");
      assert.equal(latest.allowed, false, JSON.stringify(latest));
      assert.match(latest.status?.message ?? "", /pin a version/);
    } finally {
      // Ctrl-C in the terminal: SIGINT to the foreground process group (npm, its shell, the server).
      if (serve.exitCode === null) process.kill(-serve.pid!, "SIGINT");
    }
    await exited;
    assert.match(serveOutput, /"msg":"shutting down"/, `serve stops on Ctrl-C: ${serveOutput.slice(-2000)}`);
    await waitUntilGone(serve.pid!);

    const tested = await run(dir, npx("test", "--", "test/unit/duration.test.ts"), { timeoutMs: 900_000 });
    assert.equal(tested.code, 0, tested.output.slice(-6000));
    assert.match(tested.output, /^ℹ pass [1-9]/m, "the runner ran the file's tests");
    assert.match(tested.output, /^ℹ fail 0$/m);
  });
}
