// `imprimatur containerd-verifier` by the protocol of containerd 2.x's bindir image-verifier plugin. No containerd
// 2.x can be installed here (Debian ships 1.6, which has no image-verifier plugin), so this test plays containerd's
// part as its documentation and plugin source define it: run the executable in bin_dir (the shipped wrapper,
// deploy/containerd-verifier/imprimatur-verifier, with its node-bundle paths pointed at this checkout) as
// `<file> -name NAME -digest DIGEST -stdin-media-type application/vnd.oci.descriptor.v1+json`, the descriptor as
// one JSON line on standard input, kill it at per_verifier_timeout (10 s), keep the first 32 KiB of standard output
// trimmed as the reason, and allow the pull only on exit status 0. The images and signatures are in a real
// docker-registry (TLS, token auth), signed by the project's test signer.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { chmod, mkdtemp, mkdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, describe, test } from "node:test";
import { startRegistry, type TestRegistry } from "../support/registry.ts";
import { generateSigningKey, type SigningKey } from "../support/signer/keys.ts";
import { createMockSigstore, type MockSigstore } from "../support/signer/mock-sigstore.ts";
import { pushCosignSignatures } from "../support/signer/registry-signatures.ts";
import { writeSignedOnlyFolder } from "../support/node-signing-policies.ts";
import { teardown } from "../support/teardown.ts";
import { TestLayouts } from "../support/test-layouts.ts";

const BIN = fileURLToPath(new URL("../../bin/imprimatur.js", import.meta.url));
const WRAPPER = fileURLToPath(new URL("../../deploy/containerd-verifier/imprimatur-verifier", import.meta.url));
const DESCRIPTOR = "application/vnd.oci.descriptor.v1+json";
/** containerd's per_verifier_timeout default and its stdout limit (pkg/imageverifier/bindir). */
const PER_VERIFIER_TIMEOUT_MS = 10_000;
const OUTPUT_LIMIT_BYTES = 32 * 1024;
const SILENT = "127.0.0.1:9";

let dir: string;
let registry: TestRegistry;
let sigstore: MockSigstore;
let key: SigningKey;
const layouts = new TestLayouts();
const images: Record<string, { name: string; digest: string; size: number; mediaType: string }> = {};

async function push(repository: string, signed: boolean): Promise<void> {
  const layout = await layouts.push(registry, repository, "1.0", { seed: `containerd-verifier-${repository}` });
  if (signed) await pushCosignSignatures({ registry, repository, digest: layout.digest, signers: [{ key, rekor: sigstore, hash: "sha256" }] });
  const { raw } = await registry.inspectRaw(repository, layout.digest);
  const mediaType = (JSON.parse(raw.toString("utf8")) as { mediaType?: string }).mediaType ?? "application/vnd.oci.image.manifest.v1+json";
  images[repository] = { name: `${registry.host}/${repository}:1.0`, digest: layout.digest, size: raw.length, mediaType };
}

/** The shipped wrapper, with the node bundle's paths pointed at this checkout and its env file at `envFile`. */
async function installWrapper(binDir: string, envFile: string): Promise<string> {
  const text = (await readFile(WRAPPER, "utf8"))
    .replaceAll("/etc/imprimatur/containerd-verifier.env", envFile)
    .replace("/opt/imprimatur/node /opt/imprimatur/app/bin/imprimatur.js", `${process.execPath} ${BIN}`);
  const file = join(binDir, "imprimatur-verifier");
  await writeFile(file, text);
  await chmod(file, 0o755);
  return file;
}

/** One verifier run as containerd's bindir plugin runs it: the judgement, the reason, and how long it took. */
function runAsContainerd(
  file: string,
  name: string,
  descriptor: unknown,
  args: string[] = ["-name", name, "-digest", (descriptor as { digest: string }).digest, "-stdin-media-type", DESCRIPTOR],
): Promise<{ ok: boolean; exitCode: number | null; reason: string; ms: number }> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { stdio: ["pipe", "pipe", "pipe"] });
    const timer = setTimeout(() => child.kill("SIGKILL"), PER_VERIFIER_TIMEOUT_MS);
    let stdout = Buffer.alloc(0);
    child.stdout.on("data", (chunk: Buffer) => {
      if (stdout.length < OUTPUT_LIMIT_BYTES) stdout = Buffer.concat([stdout, chunk]).subarray(0, OUTPUT_LIMIT_BYTES);
    });
    child.stderr.resume();
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ ok: code === 0, exitCode: code, reason: stdout.toString("utf8").trim(), ms: Date.now() - started });
    });
    child.stdin.on("error", () => {}); // a verifier may exit without reading: containerd logs and goes on
    child.stdin.end(`${JSON.stringify(descriptor)}\n`);
  });
}

const descriptorOf = (repository: string) => {
  const i = images[repository]!;
  return { mediaType: i.mediaType, digest: i.digest, size: i.size };
};

let verifier: string;
let failOpenVerifier: string;

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "imprimatur-e2e-containerd-verifier-"));
  sigstore = await createMockSigstore({ name: "containerd-verifier" });
  key = generateSigningKey("ecdsa-p256");
  registry = await startRegistry({ auth: "token", publicRepositories: ["public/**"] });
  await push("public/signed", true);
  await push("public/unsigned", false);
  await push("public/tenant-denied", true);
  const policies = await writeSignedOnlyFolder(join(dir, "policies"), {
    sigstore,
    key,
    images: [`${registry.host}/*`, `${SILENT}/*`],
    extra: [
      {
        apiVersion: "imprimatur.dev/v1alpha1",
        kind: "NamespacedImagePolicy",
        metadata: { name: "not-here", namespace: "team-a" },
        spec: { rules: [{ action: "deny", images: [`${registry.host}/public/tenant-denied*`] }], default: "allow" },
      },
    ],
  });
  const registries = join(dir, "registries.yaml");
  await writeFile(
    registries,
    JSON.stringify({
      apiVersion: "imprimatur.dev/v1alpha1",
      kind: "RegistryConfig",
      registries: [...registry.configEntries(), { host: SILENT, allowLocalAddresses: true }],
    }),
  );
  for (const [folder, failurePolicy] of [
    ["bin", "Fail"],
    ["bin-open", "Ignore"],
  ] as const) {
    await mkdir(join(dir, folder));
    const envFile = join(dir, `${folder}.env`);
    await writeFile(
      envFile,
      `IMPRIMATUR_VERIFIER_ARGS="--policies ${policies} --registries ${registries} --failure-policy ${failurePolicy} --timeout 8s --audit-log ${join(dir, `${folder}-audit.log`)}"\n`,
    );
    const file = await installWrapper(join(dir, folder), envFile);
    if (failurePolicy === "Fail") verifier = file;
    else failOpenVerifier = file;
  }
});

after(() => teardown([...layouts.removals(), () => registry?.stop(), () => dir && rm(dir, { recursive: true, force: true })]));

describe("containerd-verifier by containerd's bindir protocol", () => {
  test("a signed image is allowed (exit 0) within containerd's per-verifier timeout, with a reason", async () => {
    const r = await runAsContainerd(verifier, images["public/signed"]!.name, descriptorOf("public/signed"));
    assert.equal(r.exitCode, 0, r.reason);
    assert.match(r.reason, new RegExp(`^imprimatur: allowed .*/public/signed:1\\.0@${images["public/signed"]!.digest}`));
    assert.ok(r.ms < PER_VERIFIER_TIMEOUT_MS);
  });

  test("an unsigned image is blocked, and the reason names the policy and the digest", async () => {
    const r = await runAsContainerd(verifier, images["public/unsigned"]!.name, descriptorOf("public/unsigned"));
    assert.equal(r.exitCode, 1);
    assert.match(
      r.reason,
      new RegExp(
        `^imprimatur containerd-verifier refused the pull: image ".*/public/unsigned:1\\.0@${images["public/unsigned"]!.digest}" denied by policy signed-at-the-node rules\\[0\\]: `,
      ),
    );
    assert.ok(!r.reason.includes("\n"), "one line");
  });

  test("containerd names no pod: a namespaced policy does not apply", async () => {
    const r = await runAsContainerd(verifier, images["public/tenant-denied"]!.name, descriptorOf("public/tenant-denied"));
    assert.equal(r.exitCode, 0, r.reason);
  });

  test("standard input that is not the named image's descriptor blocks the pull", async () => {
    const other = { ...descriptorOf("public/signed"), digest: images["public/unsigned"]!.digest };
    const mismatch = await runAsContainerd(verifier, images["public/signed"]!.name, other, [
      "-name",
      images["public/signed"]!.name,
      "-digest",
      images["public/signed"]!.digest,
      "-stdin-media-type",
      DESCRIPTOR,
    ]);
    assert.equal(mismatch.exitCode, 1);
    assert.match(mismatch.reason, /the descriptor's digest ".*" is not -digest sha256:/);
    const unknownType = await runAsContainerd(verifier, images["public/signed"]!.name, descriptorOf("public/signed"), [
      "-name",
      images["public/signed"]!.name,
      "-digest",
      images["public/signed"]!.digest,
      "-stdin-media-type",
      "application/vnd.example.future+json",
    ]);
    assert.equal(unknownType.exitCode, 1);
    assert.match(unknownType.reason, /this version reads descriptors only/);
  });

  test("arguments it does not know block the pull (exit 2), as does a reference that is not one", async () => {
    const unknown = await runAsContainerd(verifier, "x", descriptorOf("public/signed"), [
      "-name",
      "x",
      "-digest",
      images["public/signed"]!.digest,
      "-platform",
      "linux",
    ]);
    assert.equal(unknown.exitCode, 2);
    const bad = await runAsContainerd(verifier, "Not:A:Ref", descriptorOf("public/signed"), [
      "--name=Not:A:Ref",
      `--digest=${images["public/signed"]!.digest}`,
      `--stdin-media-type=${DESCRIPTOR}`,
    ]);
    assert.equal(bad.exitCode, 1);
    assert.match(bad.reason, /"Not:A:Ref" is not an image reference/);
  });

  test("a registry that gives no answer blocks under Fail and allows under Ignore, saying so", async () => {
    const descriptor = { mediaType: "application/vnd.oci.image.manifest.v1+json", digest: `sha256:${"1".repeat(64)}`, size: 100 };
    const closed = await runAsContainerd(verifier, `${SILENT}/app:1.0`, descriptor);
    assert.equal(closed.exitCode, 1, closed.reason);
    assert.match(
      closed.reason,
      /refused the pull: image ".*app:1\.0@sha256:1{64}" denied by policy signed-at-the-node rules\[0\]: .*(unreachable|connect|no answer)/i,
    );
    const open = await runAsContainerd(failOpenVerifier, `${SILENT}/app:1.0`, descriptor);
    assert.equal(open.exitCode, 0, open.reason);
    assert.match(open.reason, /^imprimatur: allowed unverified \(the node fails open\)/);
    // The override is in the audit log twice over: the engine's fail-open record and the pull's own.
    const records = (await readFile(join(dir, "bin-open-audit.log"), "utf8"))
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { event: string; image?: string });
    assert.deepEqual(
      records.map((r) => r.event),
      ["fail-open", "pull-failed-open"],
    );
  });

  test("every judgement is a line in the audit log, written before the exit status", async () => {
    const log = join(dir, "bin-audit.log");
    const before = (await readFile(log, "utf8").catch(() => "")).split("\n").filter(Boolean).length;
    await runAsContainerd(verifier, images["public/unsigned"]!.name, descriptorOf("public/unsigned"));
    await runAsContainerd(verifier, images["public/signed"]!.name, descriptorOf("public/signed"));
    const lines = (await readFile(log, "utf8"))
      .split("\n")
      .filter(Boolean)
      .slice(before)
      .map((l) => JSON.parse(l) as { event: string; digest?: string });
    assert.deepEqual(
      lines.map((r) => [r.event, r.digest]),
      [
        ["pull-refused", images["public/unsigned"]!.digest],
        ["pull-verified", images["public/signed"]!.digest],
      ],
    );
  });
});
