// `imprimatur trust-root update` against a TUF repository the test builds and serves on 127.0.0.1 (the real
// TUF client, tuf-js through @sigstore/tuf; the Sigstore CDN cannot be reached here): the document it writes
// loads as a TrustRoot, and every failure is one line with exit 1.
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { parsePolicyText } from "../../../src/policy/load-policies.ts";
import { imprimatur } from "../../support/cli-process.ts";
import { createMockSigstore } from "../../support/signer/mock-sigstore.ts";
import { startTufRepository } from "../../support/tuf-repository.ts";

const dir = mkdtempSync(join(tmpdir(), "imprimatur-trust-root-"));
after(() => rmSync(dir, { recursive: true, force: true }));

test("update fetches trusted_root.json over TUF and writes a TrustRoot that loads; -o - prints it", async () => {
  const served = (await createMockSigstore({ name: "tuf" })).trustedRoot;
  const repo = await startTufRepository({ "trusted_root.json": JSON.stringify(served) });
  try {
    const root = join(dir, "root.json");
    writeFileSync(root, repo.rootJson);
    const out = join(dir, "policies", "public-good.yaml");
    mkdirSync(join(dir, "policies"), { recursive: true });
    const r = await imprimatur(["trust-root", "update", "--mirror", repo.url, "--root", root, "-o", out]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stderr, /^trust root sigstore-public-good: 1 certificate authorities, 1 transparency logs, 1 CT logs, 1 timestamp authorities written to /);
    assert.ok(repo.requests.includes("/targets/trusted_root.json"));
    const loaded = parsePolicyText(readFileSync(out, "utf8"), "public-good.yaml");
    assert.deepEqual(loaded.errors, []);
    assert.equal(loaded.policies.TrustRoot[0]!.name, "sigstore-public-good");

    const printed = await imprimatur(["trust-root", "update", "--mirror", repo.url, "--root", root, "--name", "corp", "-o", "-"]);
    assert.equal(printed.code, 0, printed.stderr);
    assert.equal(parsePolicyText(printed.stdout, "stdout").policies.TrustRoot[0]!.name, "corp");
  } finally {
    await repo.close();
  }
});

test("a timestamp signed by a key the root does not trust, or expired metadata, fails with one line and writes nothing", async () => {
  for (const opts of [{ breakTimestamp: true }, { expired: true }]) {
    const repo = await startTufRepository({ "trusted_root.json": "{}" }, opts);
    try {
      const root = join(dir, "bad-root.json");
      writeFileSync(root, repo.rootJson);
      const out = join(dir, "never.yaml");
      const r = await imprimatur(["trust-root", "update", "--mirror", repo.url, "--root", root, "-o", out]);
      assert.equal(r.code, 1, JSON.stringify(opts));
      assert.match(r.stderr, /^imprimatur trust-root update: .+\n$/);
      assert.throws(() => readFileSync(out));
    } finally {
      await repo.close();
    }
  }
});

test("an unreachable mirror fails within the timeout; usage errors exit 2", async () => {
  const root = join(dir, "any-root.json");
  writeFileSync(root, JSON.stringify({ signed: { _type: "root" }, signatures: [] }));
  const started = Date.now();
  const r = await imprimatur(["trust-root", "update", "--mirror", "http://127.0.0.1:1", "--root", root, "--timeout", "5"]);
  assert.equal(r.code, 1);
  assert.match(r.stderr, /^imprimatur trust-root update: /);
  assert.ok(Date.now() - started < 15_000);
  assert.equal((await imprimatur(["trust-root"])).code, 2);
  assert.equal((await imprimatur(["trust-root", "refresh"])).code, 2);
  const noRoot = await imprimatur(["trust-root", "update", "--mirror", "http://127.0.0.1:1"]);
  assert.equal(noRoot.code, 2);
  assert.match(noRoot.stderr, /--mirror needs --root/);
});

test("a --root that cannot be read or is not a TUF root, a --cache that cannot be made, an -o without its folder: one line, exit 2, nothing fetched", async () => {
  const repo = await startTufRepository({ "trusted_root.json": "{}" });
  try {
    const missing = join(dir, "missing-root.json");
    const notJson = join(dir, "not-json.json");
    writeFileSync(notJson, "root\n");
    const notRoot = join(dir, "not-root.json");
    writeFileSync(notRoot, "{}");
    const good = join(dir, "good-root.json");
    writeFileSync(good, repo.rootJson);
    const cases: Array<[string[], string]> = [
      [["--root", missing], `cannot read the TUF root ${missing}: no such file or folder`],
      [["--root", dir], `cannot read the TUF root ${dir}: it is a folder, not a file`],
      [["--root", notJson], `${notJson} is not a TUF root.json: it is not JSON`],
      [["--root", notRoot], `${notRoot} is not a TUF root.json: it has no signed root metadata ("signed" with "_type": "root", and "signatures")`],
      [["--root", good, "--cache", "/proc/imprimatur-tuf"], "--cache: cannot use the folder /proc/imprimatur-tuf: /proc does not allow creating folders in it"],
      [
        ["--root", good, "-o", join(dir, "absent", "root.yaml")],
        `cannot write ${join(dir, "absent", "root.yaml")}: the folder ${join(dir, "absent")} does not exist`,
      ],
    ];
    for (const [args, message] of cases) {
      const r = await imprimatur(["trust-root", "update", "--mirror", repo.url, ...args]);
      assert.equal(r.code, 2, message);
      assert.equal(r.stderr, `imprimatur trust-root update: ${message}\n`);
    }
    assert.deepEqual(repo.requests, []);
  } finally {
    await repo.close();
  }
});
