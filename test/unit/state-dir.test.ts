// A state folder on a path that cannot hold one (under /proc, below a file) fails at once with the path and the
// reason, for `serve` and `node-proxy` alike; Node's recursive mkdir loops forever on such paths.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { DirectoryError, makeDirectory } from "../../src/fs/make-directory.ts";
import { imprimatur } from "../support/cli-process.ts";

const scratch = mkdtempSync(join(tmpdir(), "imprimatur-state-dir-"));
after(() => rmSync(scratch, { recursive: true, force: true }));

test("makeDirectory creates missing parents with the mode and returns the first folder it made", async () => {
  const deep = join(scratch, "a", "b", "c");
  assert.equal(await makeDirectory(deep, 0o700), join(scratch, "a"));
  assert.equal(statSync(deep).mode & 0o777, 0o700 & ~process.umask());
  assert.equal(await makeDirectory(deep, 0o700), undefined);
});

test("makeDirectory refuses a path under /proc, below a file, or naming a file, with the path and the reason", async () => {
  const file = join(scratch, "plain-file");
  writeFileSync(file, "x");
  const cases: Array<[string, string]> = [
    ["/proc/imprimatur-state/inner", "cannot use the folder /proc/imprimatur-state/inner: /proc does not allow creating folders in it"],
    [join(file, "state"), `cannot use the folder ${join(file, "state")}: ${file} is a file, not a folder`],
    [file, `cannot use the folder ${file}: it is a file, not a folder`],
  ];
  for (const [path, message] of cases) {
    await assert.rejects(makeDirectory(path, 0o700), (e: unknown) => {
      assert.ok(e instanceof DirectoryError);
      assert.equal(e.code, "unusable-directory");
      assert.equal(e.message, message);
      return true;
    });
  }
});

test("serve --state-dir under /proc exits 2 with the path and the reason", async () => {
  const r = await imprimatur(["serve", "--port", "0", "--state-dir", "/proc/imprimatur-state"]);
  assert.equal(r.code, 2);
  assert.equal(r.stderr, "imprimatur serve: cannot use the folder /proc/imprimatur-state: /proc does not allow creating folders in it\n");
});

test("node-proxy --state-dir under /proc exits 2 with the path and the reason, before reaching for the runtime", async () => {
  const sockets = join(scratch, "sockets");
  const r = await imprimatur([
    "node-proxy",
    "--listen",
    `unix://${join(sockets, "proxy.sock")}`,
    "--runtime-endpoint",
    `unix://${join(sockets, "runtime.sock")}`,
    "--state-dir",
    "/proc/imprimatur-node/state",
  ]);
  assert.equal(r.code, 2);
  assert.equal(r.stderr, "imprimatur node-proxy: cannot use the folder /proc/imprimatur-node/state: /proc does not allow creating folders in it\n");
});
