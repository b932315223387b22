// Keyless identities are matched in time linear in the certificate's subject, through `imprimatur verify` as a
// user runs it against a real docker-registry: keyless signatures (cosign `.sig` layers with a mock Fulcio
// certificate, logged in a mock Rekor) whose subject is 30 "a"s and a domain. A `subjectRegExp` that backtracks
// exponentially on JavaScript's engine, and a `subject` glob with many stars (one `.*` each on that engine), are
// judged correctly and at once: the test's timeout is small, and on a backtracking engine they took minutes.
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { stringify } from "yaml";
import { imprimatur } from "../support/cli-process.ts";
import { buildOciLayout } from "../support/oci-layout.ts";
import { startRegistry, type TestRegistry } from "../support/registry.ts";
import { createMockSigstore, type MockSigstore } from "../support/signer/mock-sigstore.ts";
import { pushCosignSignatures } from "../support/signer/registry-signatures.ts";
import { teardown } from "../support/teardown.ts";

const ISSUER = "https://accounts.example.org";
const SUBJECT = `${"a".repeat(30)}@example.org`;
// Each repository holds the same image, signed by SUBJECT, and is judged by the rule of the same name.
const IDENTITIES: Record<string, Record<string, string>> = {
  "regexp-backtracking": { subjectRegExp: "^(a|a)+$" },
  "regexp-matching": { subjectRegExp: "^(a|a)+@example\\.org$" },
  "glob-many-stars": { subject: `${"*a".repeat(12)}*b` },
  "glob-matching": { subject: `${"*a".repeat(12)}*@example.org` },
};

let dir: string;
let registry: TestRegistry;
let sigstore: MockSigstore;
let layout: string | undefined;

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "imprimatur-e2e-keyless-regex-"));
  [registry, sigstore] = await Promise.all([startRegistry({ auth: "none" }), createMockSigstore({ name: "corp" })]);
  const image = await buildOciLayout({ tag: "1.0", seed: "keyless-linear-regex" });
  layout = image.layoutDir;
  const cert = await sigstore.issueKeylessCertificate({ subjectAltName: SUBJECT, issuer: ISSUER });
  for (const repository of Object.keys(IDENTITIES)) {
    await registry.push(image.layoutDir, "1.0", repository, "1.0");
    await pushCosignSignatures({ registry, repository, digest: image.digest, signers: [{ keyless: cert, rekor: sigstore }] });
  }
  const rules = Object.entries(IDENTITIES).map(([repository, identity]) => ({
    action: "allow",
    images: [`${registry.host}/${repository}*`],
    attestors: [{ entries: [{ keyless: { ...identity, issuer: ISSUER, trustRoot: "corp" } }] }],
  }));
  await writeFile(
    join(dir, "policies.yaml"),
    [
      stringify({ apiVersion: "imprimatur.dev/v1alpha1", kind: "TrustRoot", metadata: { name: "corp" }, spec: { trustedRoot: sigstore.trustedRoot } }),
      stringify({ apiVersion: "imprimatur.dev/v1alpha1", kind: "ImagePolicy", metadata: { name: "identities" }, spec: { rules, default: "deny" } }),
    ].join("---\n"),
  );
  await writeFile(join(dir, "registries.yaml"), registry.registryConfig());
});

after(() =>
  teardown([() => registry?.stop(), () => layout && rm(layout, { recursive: true, force: true }), () => dir && rm(dir, { recursive: true, force: true })]),
);

test(
  "subjectRegExp and subject globs are judged at once against a long subject: denied when they do not match, allowed when they do",
  { timeout: 20_000 },
  async () => {
    const images = Object.keys(IDENTITIES).map((repository) => `${registry.host}/${repository}:1.0`);
    const r = await imprimatur(["verify", "--policies", join(dir, "policies.yaml"), "--registries", join(dir, "registries.yaml"), "-o", "json", ...images]);
    assert.equal(r.code, 1, r.stderr);
    const results = (JSON.parse(r.stdout) as { results: Array<{ image: string; allowed: boolean; reason?: string; signers?: string[] }> }).results;
    assert.deepEqual(
      results.map((x) => [x.image.slice(registry.host.length + 1), x.allowed]),
      [
        ["regexp-backtracking:1.0", false],
        ["regexp-matching:1.0", true],
        ["glob-many-stars:1.0", false],
        ["glob-matching:1.0", true],
      ],
    );
    const text = JSON.stringify(results);
    assert.ok(text.includes(`certificate identity \\"${SUBJECT}\\" does not match \\"/^(a|a)+$/\\"`), text);
    assert.ok(text.includes(`certificate identity \\"${SUBJECT}\\" does not match \\"${"*a".repeat(12)}*b\\"`), text);
  },
);
