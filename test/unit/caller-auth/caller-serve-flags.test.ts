// `imprimatur serve` refuses a bad --client-ca, --caller-tokens or --metrics-port with a clear message and exit 2,
// before it listens.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createClientCa } from "../../support/caller-credentials.ts";
import { imprimatur } from "../../support/cli-process.ts";

test("bad caller and metrics flags stop serve with exit 2 and say why", async () => {
  const dir = await mkdtemp(join(tmpdir(), "imprimatur-serve-flags-"));
  try {
    const base = ["serve", "--host", "127.0.0.1", "--port", "0", "--state-dir", join(dir, "state")];
    const metrics = await imprimatur([...base, "--metrics-port", "http"]);
    assert.equal(metrics.code, 2);
    assert.match(metrics.stderr, /--metrics-port must be a port number, got http/);

    const missingCa = await imprimatur([...base, "--client-ca", join(dir, "no-such-ca.crt"), "--client-ca-any-name"]);
    assert.equal(missingCa.code, 2);
    assert.match(missingCa.stderr, /--client-ca: cannot read .*no-such-ca\.crt: ENOENT/);

    await writeFile(join(dir, "not-a-ca.crt"), "hello\n");
    const notPem = await imprimatur([...base, "--client-ca", join(dir, "not-a-ca.crt"), "--client-ca-allowed-names", "apiserver"]);
    assert.equal(notPem.code, 2);
    assert.match(notPem.stderr, /--client-ca: .*not-a-ca\.crt holds no PEM certificate/);

    await writeFile(
      join(dir, "callers.yaml"),
      "apiVersion: imprimatur.dev/v1alpha1\nkind: CallerTokens\ncallers:\n  - { name: a, cluster: b, token: short }\n",
    );
    const badTokens = await imprimatur([...base, "--caller-tokens", join(dir, "callers.yaml")]);
    assert.equal(badTokens.code, 2);
    assert.match(badTokens.stderr, /callers\.yaml:4 \(callers\[0\]\.token\): must be a string of at least 16 characters/);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test("--client-ca without naming its callers is refused: a cluster CA would let every kubelet in", async () => {
  const dir = await mkdtemp(join(tmpdir(), "imprimatur-serve-flags-"));
  const ca = await createClientCa();
  try {
    const base = ["serve", "--host", "127.0.0.1", "--port", "0", "--state-dir", join(dir, "state")];
    const unnamed = await imprimatur([...base, "--client-ca", ca.certPath]);
    assert.equal(unnamed.code, 2);
    assert.match(unnamed.stderr, /--client-ca lets in any certificate its CA issues .*: name the callers with --client-ca-allowed-names NAME/s);
    assert.match(unnamed.stderr, /--client-ca-any-name/);

    const both = await imprimatur([...base, "--client-ca", ca.certPath, "--client-ca-allowed-names", "apiserver-a", "--client-ca-any-name"]);
    assert.equal(both.code, 2);
    assert.match(both.stderr, /--client-ca-allowed-names and --client-ca-any-name exclude each other/);

    for (const flags of [["--client-ca-allowed-names", "apiserver-a"], ["--client-ca-any-name"]]) {
      const withoutCa = await imprimatur([...base, ...flags]);
      assert.equal(withoutCa.code, 2, flags.join(" "));
      assert.match(withoutCa.stderr, new RegExp(`${flags[0]} needs --client-ca`));
    }

    const emptyName = await imprimatur([...base, "--client-ca", ca.certPath, "--client-ca-allowed-names", "apiserver-a,"]);
    assert.equal(emptyName.code, 2);
    assert.match(emptyName.stderr, /--client-ca-allowed-names: an empty name in "apiserver-a,"/);
  } finally {
    await ca.remove();
    await rm(dir, { recursive: true, force: true });
  }
});
