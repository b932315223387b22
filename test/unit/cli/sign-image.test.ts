// `imprimatur sign-image` and `install --signing-key` as a user runs them, for what is refused before any registry
// is asked: the image named by a tag, no key, a key that cannot sign (exit 2, one line naming it), and install
// stopping before it builds anything. Signing against a registry: test/e2e/release-signing.test.ts.
import assert from "node:assert/strict";
import { generateKeyPairSync } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { imprimatur } from "../../support/cli-process.ts";

const IMAGE = `registry.example.com/platform/imprimatur@sha256:${"a".repeat(64)}`;
let dir: string;

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "imprimatur-sign-image-"));
});

after(() => dir && rm(dir, { recursive: true, force: true }));

describe("imprimatur sign-image refuses before asking a registry", { concurrency: 4 }, () => {
  for (const [args, message] of [
    [["--key", "release.key"], /give one image, by digest/],
    [["registry.example.com/platform/imprimatur:0.1.0", "--key", "release.key"], /name the image by its sha256 digest .*a tag can move/],
    [[IMAGE], /give the release signing key with --key FILE/],
    [[IMAGE, "--key", "k", "-o", "xml"], /--output must be one of text, json, yaml, got xml/],
    [[IMAGE, "--key", "k", "--builder-id", "not a uri"], /--builder-id must be a URI/],
    [[IMAGE, "--key", "k", "--timeout", "0"], /--timeout must be a whole number of seconds/],
  ] as const) {
    test(`${args.join(" ")}: usage error, exit 2`, async () => {
      const r = await imprimatur(["sign-image", ...args]);
      assert.equal(r.code, 2, r.stderr);
      assert.match(r.stderr, message);
      assert.match(r.stderr, /see 'imprimatur sign-image --help'/);
      assert.equal(r.stdout, "");
    });
  }

  test("a key that cannot be read or cannot sign: exit 2, naming the file", async () => {
    const publicOnly = join(dir, "release.pub");
    await writeFile(publicOnly, generateKeyPairSync("ec", { namedCurve: "P-256" }).publicKey.export({ format: "pem", type: "spki" }));
    for (const [file, message] of [
      [join(dir, "missing.key"), /cannot read the signing key .*missing\.key: ENOENT/],
      [publicOnly, /release\.pub holds no PEM private key .*not the public one/],
    ] as const) {
      const r = await imprimatur(["sign-image", IMAGE, "--key", file]);
      assert.equal(r.code, 2, r.stderr);
      assert.match(r.stderr, message);
    }
  });
});

describe("imprimatur install --signing-key", () => {
  test("a key that cannot sign stops install before it builds or pushes anything", async () => {
    const r = await imprimatur(["install", "--registry", "registry.example.com/platform/imprimatur", "--signing-key", join(dir, "missing.key")]);
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /^imprimatur install: cannot read the signing key .*missing\.key: ENOENT$/m);
    assert.equal(r.stdout, "", "no step ran");
  });
});
