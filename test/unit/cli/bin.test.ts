// The `imprimatur` executable: plain JavaScript that checks the Node.js version before it loads the
// TypeScript, so that an older Node.js says what to do instead of failing on the ".ts" extension.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { accessSync, constants, readFileSync } from "node:fs";
import { delimiter, join } from "node:path";
import { pathToFileURL } from "node:url";
import { test } from "node:test";
import pkg from "../../../package.json" with { type: "json" };
import { BIN, imprimatur, REPO_ROOT } from "../../support/cli-process.ts";

interface NodeVersionModule {
  REQUIRED_NODE_MAJOR: number;
  nodeVersionProblem(version: string): string | undefined;
}
const check = (await import(pathToFileURL(join(REPO_ROOT, "bin", "node-version.js")).href)) as NodeVersionModule;

test("package.json's bin is the JavaScript entry point, an executable with a node shebang", () => {
  assert.deepEqual(pkg.bin, { imprimatur: "bin/imprimatur.js" });
  assert.equal(join(REPO_ROOT, pkg.bin.imprimatur), BIN);
  assert.match(readFileSync(BIN, "utf8"), /^#!\/usr\/bin\/env node\n/);
  accessSync(BIN, constants.X_OK);
});

test("the version it requires is the package's engines", () => {
  assert.equal(pkg.engines.node, `>=${check.REQUIRED_NODE_MAJOR}`);
});

test("an older Node.js gets one line saying what to do", () => {
  for (const old of ["20.20.2", "22.18.0", "23.11.1", "18.0.0", "0.12.18"]) {
    const problem = check.nodeVersionProblem(old);
    assert.ok(problem, old);
    assert.ok(!problem.includes("\n"), "one line");
    assert.ok(problem.startsWith(`imprimatur needs Node.js ${check.REQUIRED_NODE_MAJOR} or newer (this is ${old}); `), problem);
    assert.match(problem, /"npx imprimatur" after "npm ci"/);
  }
  assert.ok(check.nodeVersionProblem("not a version"));
});

test("Node.js 24 and newer pass", () => {
  for (const ok of ["24.0.0", "24.21.0", "25.1.0", "30.0.0-pre", process.versions.node]) assert.equal(check.nodeVersionProblem(ok), undefined, ok);
});

test("with this Node.js the executable runs the command", async () => {
  const r = await imprimatur(["version"]);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /^imprimatur \S+ \(commit \S+\)\n$/);
});

test("with an older Node.js on PATH, if there is one, the executable prints the one line and exits 2", (t) => {
  const old = olderNode();
  if (!old) {
    t.diagnostic("no Node.js older than the required one on PATH; the check itself is tested above");
    return;
  }
  const r = spawnSync(old.path, [BIN, "version"], { encoding: "utf8" });
  assert.equal(r.status, 2, r.stderr);
  assert.equal(r.stdout, "");
  assert.equal(r.stderr, `${check.nodeVersionProblem(old.version)}\n`);
});

/** A `node` on PATH older than the required version (a system Node.js beside the project's), if any. */
function olderNode(): { path: string; version: string } | undefined {
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    const path = join(dir, "node");
    const r = spawnSync(path, ["-p", "process.versions.node"], { encoding: "utf8" });
    const version = r.status === 0 ? r.stdout.trim() : "";
    if (version && Number.parseInt(version, 10) < check.REQUIRED_NODE_MAJOR) return { path, version };
  }
  return undefined;
}
