// `imprimatur resolve` as a user runs it: the real CLI in a child process, against a real docker-registry
// (htpasswd auth, TLS with a test CA) holding images pushed by skopeo, with a registries file naming the CA and
// the auth file the harness writes.

import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { imprimatur } from "../support/cli-process.ts";
import { startRegistry, type TestRegistry } from "../support/registry.ts";
import { teardown } from "../support/teardown.ts";
import { TestLayouts } from "../support/test-layouts.ts";

let registry: TestRegistry;
let scratch: string;
let registriesFile: string;

const layouts = new TestLayouts();
const layout = layouts.build;
const images = {
  app: layout({ tag: "v1", seed: "resolve-cli app" }),
  other: layout({ tag: "v2", seed: "resolve-cli other" }),
  multi: layout({
    tag: "v1",
    seed: "resolve-cli multi",
    platforms: [
      { os: "linux", architecture: "amd64" },
      { os: "linux", architecture: "arm64" },
    ],
  }),
};

before(async () => {
  registry = await startRegistry({ auth: "htpasswd" });
  scratch = mkdtempSync(join(tmpdir(), "imprimatur-resolve-cli-"));
  registriesFile = writeRegistries("registries.yaml", [
    `  - host: "${registry.host}"`,
    `    ca: ${JSON.stringify(registry.caFile)}`,
    // The registry listens on 127.0.0.1, which resolve refuses for hosts not listed like this.
    "    allowLocalAddresses: true",
  ]);
  await Promise.all([
    registry.push(images.app.layoutDir, "v1", "team/app", "v1"),
    registry.push(images.other.layoutDir, "v2", "team/other", "v2"),
    registry.push(images.multi.layoutDir, "v1", "team/multi", "v1"),
  ]);
});

after(() => teardown([() => registry?.stop(), () => scratch && rmSync(scratch, { recursive: true, force: true }), ...layouts.removals()]));

/** A RegistryConfig file in the scratch dir with the given `registries:` entries (YAML lines). */
function writeRegistries(name: string, entries: string[]): string {
  const path = join(scratch, name);
  writeFileSync(path, ["apiVersion: imprimatur.dev/v1alpha1", "kind: RegistryConfig", "registries:", ...entries, ""].join("\n"));
  return path;
}

function lines(text: string): string[] {
  return text.split("\n").filter((l) => l !== "");
}

describe("imprimatur resolve", () => {
  const image = (name: string) => `${registry.host}/${name}`;
  const access = () => ["--registries", registriesFile, "--authfile", registry.authFile];

  test("prints IMAGE@sha256:… for each image, in order, and exits 0", async () => {
    const result = await imprimatur(["resolve", ...access(), image("team/app:v1"), image("team/other:v2"), image("team/multi:v1")]);
    assert.equal(result.code, 0, result.stderr);
    assert.deepEqual(lines(result.stdout), [
      `${image("team/app:v1")}@${images.app.digest}`,
      `${image("team/other:v2")}@${images.other.digest}`,
      // Without --platform a multi-platform image pins to its index.
      `${image("team/multi:v1")}@${images.multi.digest}`,
    ]);
  });

  test("an image given with a digest is re-pinned to what the registry serves for that digest", async () => {
    const result = await imprimatur(["resolve", ...access(), `${image("team/app:v1")}@${images.app.digest}`]);
    assert.equal(result.code, 0, result.stderr);
    assert.deepEqual(lines(result.stdout), [`${image("team/app:v1")}@${images.app.digest}`]);
  });

  test("an image that cannot be resolved: exit 1, the reason on stderr, the other images still printed", async () => {
    const missing = image("team/app:no-such-tag");
    const result = await imprimatur(["resolve", ...access(), image("team/app:v1"), missing, image("team/other:v2")]);
    assert.equal(result.code, 1);
    assert.deepEqual(lines(result.stdout), [`${image("team/app:v1")}@${images.app.digest}`, `${image("team/other:v2")}@${images.other.digest}`]);
    const reasons = lines(result.stderr);
    assert.equal(reasons.length, 1, result.stderr);
    assert.ok(reasons[0]!.startsWith(`${missing}: `), result.stderr);
    assert.match(reasons[0]!, /not found/);
  });

  test("--platform linux/arm64 prints the arm64 manifest's digest of a multi-platform image", async () => {
    const result = await imprimatur(["resolve", ...access(), "--platform", "linux/arm64", image("team/multi:v1")]);
    assert.equal(result.code, 0, result.stderr);
    const arm64 = images.multi.manifests.find((m) => m.platform.architecture === "arm64")!;
    assert.deepEqual(lines(result.stdout), [`${image("team/multi:v1")}@${arm64.digest}`]);
  });

  test("--platform naming a platform the index does not have: exit 1, listing the ones it has", async () => {
    const result = await imprimatur(["resolve", ...access(), "--platform", "linux/s390x", image("team/multi:v1")]);
    assert.equal(result.code, 1);
    assert.equal(result.stdout, "");
    assert.match(result.stderr, /no manifest for linux\/s390x in the index \(it has linux\/amd64, linux\/arm64\)/);
  });

  test("without the auth file: exit 1, unauthorized, and the password appears nowhere", async () => {
    const result = await imprimatur(["resolve", "--registries", registriesFile, image("team/app:v1")]);
    assert.equal(result.code, 1);
    assert.equal(result.stdout, "");
    assert.match(result.stderr, /unauthorized/);
    assert.ok(!result.stderr.includes(registry.password));
  });

  test("without its CA in the registries file the test CA is not trusted: exit 1 with a TLS error", async () => {
    const file = writeRegistries("no-ca.yaml", [`  - host: "${registry.host}"`, "    allowLocalAddresses: true"]);
    const result = await imprimatur(["resolve", "--registries", file, "--authfile", registry.authFile, image("team/app:v1")]);
    assert.equal(result.code, 1);
    assert.match(result.stderr, /TLS failed/);
    assert.match(result.stderr, /registries file/);
  });

  test("bad flags, no image or a malformed --platform: exit 2, one line naming the problem and where the help is", async () => {
    for (const args of [
      ["--no-such-flag", image("team/app:v1")],
      [],
      ["--platform", "linux", image("team/app:v1")],
      ["--timeout", "soon", image("team/app:v1")],
    ]) {
      const result = await imprimatur(["resolve", ...args]);
      assert.equal(result.code, 2, `${args.join(" ")}: ${result.stderr}`);
      assert.equal(result.stdout, "");
      assert.match(result.stderr, /^imprimatur resolve: [^\n]+\nsee 'imprimatur resolve --help'\n$/);
    }
  });

  test("a registries file with an unknown field: exit 2, naming the file and the field", async () => {
    const file = writeRegistries("typo.yaml", [`  - host: "${registry.host}"`, `    caFile: ${JSON.stringify(registry.caFile)}`]);
    const result = await imprimatur(["resolve", "--registries", file, "--authfile", registry.authFile, image("team/app:v1")]);
    assert.equal(result.code, 2);
    assert.equal(result.stdout, "");
    assert.ok(result.stderr.includes(file), result.stderr);
    assert.match(result.stderr, /typo\.yaml:\d+ \(registries\[0\]\.caFile\): unknown field/);
  });
});
