// `imprimatur version`: text and JSON output, and where the commit comes from (a Git checkout of the
// package folder, else IMPRIMATUR_COMMIT, else "unknown").
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, test } from "node:test";
import pkg from "../../../package.json" with { type: "json" };
import { gitCommit, versionInfo, versionLine } from "../../../src/cli/version.ts";
import { imprimatur, REPO_ROOT } from "../../support/cli-process.ts";

/** The commit the command should report when run from this repository. */
function expectedCommit(env: NodeJS.ProcessEnv = process.env): string {
  if (existsSync(join(REPO_ROOT, ".git"))) return execFileSync("git", ["rev-parse", "HEAD"], { cwd: REPO_ROOT, encoding: "utf8" }).trim();
  return env.IMPRIMATUR_COMMIT?.trim() || "unknown";
}

describe("imprimatur version", { concurrency: 4 }, () => {
  test("-o json has the version, the commit and the Node.js version", async () => {
    const r = await imprimatur(["version", "-o", "json"]);
    assert.equal(r.code, 0, r.stderr);
    const info = JSON.parse(r.stdout) as Record<string, unknown>;
    assert.deepEqual(Object.keys(info).sort(), ["commit", "node", "version"]);
    assert.equal(info.version, pkg.version);
    assert.equal(info.node, process.versions.node);
    assert.equal(info.commit, expectedCommit());
  });

  test("text: one line, the commit shortened", async () => {
    const r = await imprimatur(["version"]);
    assert.equal(r.code, 0, r.stderr);
    const commit = expectedCommit();
    assert.equal(r.stdout, `imprimatur ${pkg.version} (commit ${/^[0-9a-f]{40}$/.test(commit) ? commit.slice(0, 7) : commit})\n`);
  });

  test("--version is the same command, flags included", async () => {
    const [a, b] = await Promise.all([imprimatur(["--version", "--output=json"]), imprimatur(["version", "--output", "json"])]);
    assert.equal(a.code, 0, a.stderr);
    assert.equal(a.stdout, b.stdout);
  });

  test("IMPRIMATUR_COMMIT is used when the package folder is no Git checkout", async () => {
    const r = await imprimatur(["version"], { env: { ...process.env, IMPRIMATUR_COMMIT: "0123456789abcdef0123456789abcdef01234567" } });
    assert.equal(r.code, 0, r.stderr);
    const expected = expectedCommit({ IMPRIMATUR_COMMIT: "0123456789abcdef0123456789abcdef01234567" });
    assert.equal(r.stdout, `imprimatur ${pkg.version} (commit ${expected.slice(0, 7)})\n`);
  });

  test("a bad --output exits 2", async () => {
    const r = await imprimatur(["version", "-o", "yaml"]);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /--output must be text or json, got yaml/);
  });
});

describe("where the commit comes from", () => {
  const scratch = mkdtempSync(join(tmpdir(), "imprimatur-version-"));
  after(() => rmSync(scratch, { recursive: true, force: true }));
  const git = (cwd: string, ...args: string[]) =>
    execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@example.invalid", "-c", "init.defaultBranch=main", ...args], {
      cwd,
      encoding: "utf8",
    }).trim();

  test("a folder that is no Git checkout: IMPRIMATUR_COMMIT, else unknown", async () => {
    const plain = join(scratch, "plain");
    mkdirSync(plain);
    assert.equal(await gitCommit(plain), undefined);
    assert.equal((await versionInfo({ dir: plain, env: { IMPRIMATUR_COMMIT: " abc1234\n" } })).commit, "abc1234");
    assert.equal((await versionInfo({ dir: plain, env: { IMPRIMATUR_COMMIT: "" } })).commit, "unknown");
    assert.equal((await versionInfo({ dir: plain, env: {} })).commit, "unknown");
  });

  test("a Git checkout: its HEAD, before IMPRIMATUR_COMMIT", async () => {
    const repo = join(scratch, "repo");
    mkdirSync(repo);
    git(repo, "init", "-q");
    writeFileSync(join(repo, "f"), "x");
    git(repo, "add", "f");
    git(repo, "commit", "-q", "-m", "one");
    const head = git(repo, "rev-parse", "HEAD");
    assert.equal(await gitCommit(repo), head);
    assert.equal((await versionInfo({ dir: repo, env: { IMPRIMATUR_COMMIT: "abc1234" } })).commit, head);

    // A package installed inside its user's repository is not that repository's commit.
    const installed = join(repo, "node_modules", "imprimatur");
    mkdirSync(installed, { recursive: true });
    assert.equal(await gitCommit(installed), undefined);
    assert.equal((await versionInfo({ dir: installed, env: { IMPRIMATUR_COMMIT: "abc1234" } })).commit, "abc1234");
  });

  test("a Git checkout without a commit yet counts as unknown", async () => {
    const empty = join(scratch, "empty");
    mkdirSync(empty);
    git(empty, "init", "-q");
    assert.equal(await gitCommit(empty), undefined);
  });

  test("versionLine shortens full commit ids only", () => {
    const info = { version: "1.2.3", node: "24.0.0" };
    assert.equal(versionLine({ ...info, commit: "0123456789abcdef0123456789abcdef01234567" }), "imprimatur 1.2.3 (commit 0123456)");
    assert.equal(versionLine({ ...info, commit: "v1.2.3-rc1" }), "imprimatur 1.2.3 (commit v1.2.3-rc1)");
    assert.equal(versionLine({ ...info, commit: "unknown" }), "imprimatur 1.2.3 (commit unknown)");
  });
});
