// `imprimatur convert` judged with real signatures: a Kyverno ClusterPolicy (verifyImages with a key, keyless and
// an attestation condition) and a Sigstore policy-controller ClusterImagePolicy (a key authority), written as
// their docs describe them, converted, and the result given to `imprimatur verify` against a real docker-registry
// holding images signed by the project's test signer (cosign `.sig` and `.att` layouts, a keyless bundle as a
// referrer) and logged in a mock Sigstore. The mock's trusted root stands in for the public-good instance (a
// TrustRoot named sigstore-public-good beside the converted policies), so the converted attestors, which name no
// trust root, verify against it as the originals would against the public one. Each image is judged as the
// original's semantics say: signed by the key or the identity allowed, unsigned, signed by another key or
// identity, or attested with a failing condition denied.
import assert from "node:assert/strict";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { stringify } from "yaml";
import { imprimatur } from "../support/cli-process.ts";
import { startRegistry, type TestRegistry } from "../support/registry.ts";
import { generateSigningKey, type SigningKey } from "../support/signer/keys.ts";
import { createMockSigstore, type MockSigstore } from "../support/signer/mock-sigstore.ts";
import { pushCosignAttestations, pushCosignSignatures } from "../support/signer/registry-signatures.ts";
import { attachKeylessSignature } from "../support/signer/keyless-signature.ts";
import { teardown } from "../support/teardown.ts";
import { TestLayouts } from "../support/test-layouts.ts";

const WORKFLOW = "https://github.com/acme/app/.github/workflows/release.yml@refs/tags/v1";
const ISSUER = "https://token.actions.githubusercontent.com";
const SLSA = "https://slsa.dev/provenance/v1";
const GOOD_BUILD = "https://actions.github.io/buildtypes/workflow/v1";

let dir: string;
let registry: TestRegistry;
let sigstore: MockSigstore;
let release: SigningKey;
let other: SigningKey;
const layouts = new TestLayouts();
const push = () => ({ url: registry.url, caPem: registry.caPem, username: registry.username, password: registry.password });

async function image(repository: string): Promise<string> {
  return (await layouts.push(registry, repository, "1.0", { seed: `convert-signatures ${repository}` })).digest;
}

async function signed(repository: string, key: SigningKey): Promise<string> {
  const digest = await image(repository);
  await pushCosignSignatures({ registry, repository, digest, signers: [{ key, rekor: sigstore, hash: "sha256" }] });
  return digest;
}

async function keyless(repository: string, subjectAltName: string): Promise<string> {
  const digest = await image(repository);
  await attachKeylessSignature({ registry, target: push(), sigstore, repository, tag: "1.0", digest, subjectAltName, issuer: ISSUER });
  return digest;
}

async function attested(repository: string, buildType: string): Promise<string> {
  const digest = await signed(repository, release);
  const predicate = { buildDefinition: { buildType }, runDetails: { builder: { id: "https://github.com/actions/runner" } } };
  await pushCosignAttestations({ registry, repository, digest, statements: [{ predicateType: SLSA, predicate, signer: { key: release, rekor: sigstore } }] });
  return digest;
}

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "imprimatur-convert-signatures-"));
  sigstore = await createMockSigstore({ name: "convert" });
  release = generateSigningKey("ecdsa-p256");
  other = generateSigningKey("ecdsa-p256");
  registry = await startRegistry({ auth: "htpasswd" });
  await signed("kyverno/keyed", release);
  await image("kyverno/unsigned");
  await signed("kyverno/other-key", other);
  await keyless("kyverno/keyless", WORKFLOW);
  await keyless("kyverno/impostor", "https://github.com/evil/app/.github/workflows/x.yml@refs/heads/main");
  await attested("kyverno/attested-good", GOOD_BUILD);
  await attested("kyverno/attested-bad", "https://evil.example/build");
  await signed("policy-controller/keyed", release);
  await image("policy-controller/unsigned");
  await writeFile(join(dir, "registries.yaml"), registry.registryConfig());
});

after(() => teardown([() => registry?.stop(), () => dir && rm(dir, { recursive: true, force: true }), ...layouts.removals()]));

const indent = (text: string, spaces: number) => text.trim().replace(/\n/g, `\n${" ".repeat(spaces)}`);

/** Converts `original` into a policy folder with the trust root, and returns verify's verdict per image. */
async function convertAndVerify(name: string, original: string, images: Record<string, string>, namespaceArgs: string[] = []): Promise<Record<string, string>> {
  const input = join(dir, `${name}.original.yaml`);
  await writeFile(input, original);
  const converted = await imprimatur(["convert", "-f", input]);
  assert.equal(converted.code, 0, `converted as strict as the original: ${converted.stderr}`);
  const folder = join(dir, name);
  await rm(folder, { recursive: true, force: true });
  await mkdir(folder);
  await writeFile(join(folder, "converted.yaml"), converted.stdout);
  await writeFile(
    join(folder, "trust-root.yaml"),
    stringify({
      apiVersion: "imprimatur.dev/v1alpha1",
      kind: "TrustRoot",
      metadata: { name: "sigstore-public-good" },
      spec: { trustedRoot: sigstore.trustedRoot },
    }),
  );
  const verdicts: Record<string, string> = {};
  for (const [label, ref] of Object.entries(images)) {
    const r = await imprimatur([
      "verify",
      "--policies",
      folder,
      "--registries",
      join(dir, "registries.yaml"),
      "--authfile",
      registry.authFile,
      ...namespaceArgs,
      `${registry.host}/${ref}`,
    ]);
    assert.ok(r.code === 0 || r.code === 1, `${label}: ${r.stdout}${r.stderr}`);
    verdicts[label] =
      `${r.code === 0 ? "allowed" : "denied"}${r.code === 0 ? "" : `: ${/^DENIED\s+\S+(?: sha256:[0-9a-f]{64})?: (.*)$/m.exec(r.stdout)?.[1] ?? r.stdout}`}`;
  }
  return verdicts;
}

test("Kyverno verifyImages (a key, a keyless identity, an attestation condition), converted: each image judged as Kyverno would", async (t) => {
  const original = `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: verify-release}
spec:
  validationFailureAction: Enforce
  webhookTimeoutSeconds: 30
  rules:
    - name: keyed
      match: {any: [{resources: {kinds: [Pod]}}]}
      verifyImages:
        - imageReferences: ["${registry.host}/kyverno/keyed*", "${registry.host}/kyverno/unsigned*", "${registry.host}/kyverno/other-key*"]
          attestors:
            - entries:
                - keys:
                    publicKeys: |-
                      ${indent(release.publicKeyPem, 22)}
    - name: keyless
      match: {any: [{resources: {kinds: [Pod]}}]}
      verifyImages:
        - imageReferences: ["${registry.host}/kyverno/keyless*", "${registry.host}/kyverno/impostor*"]
          attestors:
            - entries:
                - keyless:
                    subject: "https://github.com/acme/*"
                    issuer: "${ISSUER}"
    - name: attested
      match: {any: [{resources: {kinds: [Pod]}}]}
      verifyImages:
        - imageReferences: ["${registry.host}/kyverno/attested-*"]
          attestors:
            - entries:
                - keys:
                    publicKeys: |-
                      ${indent(release.publicKeyPem, 22)}
          attestations:
            - predicateType: ${SLSA}
              attestors:
                - entries:
                    - keys:
                        publicKeys: |-
                          ${indent(release.publicKeyPem, 26)}
              conditions:
                - all:
                    - key: "{{ buildDefinition.buildType }}"
                      operator: Equals
                      value: ${GOOD_BUILD}
`;
  const verdicts = await convertAndVerify("kyverno", original, {
    keyed: "kyverno/keyed:1.0",
    unsigned: "kyverno/unsigned:1.0",
    otherKey: "kyverno/other-key:1.0",
    keyless: "kyverno/keyless:1.0",
    impostor: "kyverno/impostor:1.0",
    attestedGood: "kyverno/attested-good:1.0",
    attestedBad: "kyverno/attested-bad:1.0",
  });
  t.diagnostic(JSON.stringify(verdicts, null, 2));
  assert.equal(verdicts.keyed, "allowed");
  // One ImagePolicy per Kyverno rule, named after both.
  assert.match(verdicts.unsigned!, /^denied: policy verify-release-keyed rules\[0\]: no signatures found/);
  assert.match(verdicts.otherKey!, /^denied: policy verify-release-keyed rules\[0\]: .*no signature by this key/);
  assert.equal(verdicts.keyless, "allowed");
  assert.match(
    verdicts.impostor!,
    /^denied: policy verify-release-keyless rules\[0\]: .*certificate identity ".*evil.*" does not match "https:\/\/github\.com\/acme\/\*"/,
  );
  assert.equal(verdicts.attestedGood, "allowed");
  assert.match(
    verdicts.attestedBad!,
    /^denied: policy verify-release-attested rules\[0\]: attestations\[0\] \(https:\/\/slsa\.dev\/provenance\/v1\): conditions\[0\]\.all\[0\]: "https:\/\/evil\.example\/build" is not Equals/,
  );
});

test("policy-controller ClusterImagePolicy (a key authority), converted: its images need the key's signature in a namespace that opts in", async () => {
  const original = `apiVersion: policy.sigstore.dev/v1beta1
kind: ClusterImagePolicy
metadata: {name: release-signed}
spec:
  images:
    - glob: "${registry.host}/policy-controller/*"
  authorities:
    - key:
        data: |
          ${indent(release.publicKeyPem, 10)}
`;
  const images = { keyed: "policy-controller/keyed:1.0", unsigned: "policy-controller/unsigned:1.0" };
  const verdicts = await convertAndVerify("policy-controller", original, images, [
    "--namespace",
    "shop",
    "--namespace-labels",
    "shop:policy.sigstore.dev/include=true",
  ]);
  assert.equal(verdicts.keyed, "allowed");
  assert.match(verdicts.unsigned!, /^denied: policy release-signed rules\[0\]: .*no signatures found/);
  // policy-controller enforces only in namespaces labelled policy.sigstore.dev/include=true.
  assert.deepEqual(await convertAndVerify("policy-controller", original, images, ["--namespace", "shop", "--namespace-labels", "shop:team=web"]), {
    keyed: "allowed",
    unsigned: "allowed",
  });
});
