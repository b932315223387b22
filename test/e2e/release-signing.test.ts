// Imprimatur's own supply chain, end to end: a real docker-registry 2.8 (TLS, htpasswd auth; no Referrers API, so
// the referrers tag schema) holds three images of one repository. The real CLI, `imprimatur sign-image` in a child
// process, signs one with a freshly generated release key (an unencrypted PKCS#8 PEM) and attaches its SBOM and
// build provenance; another gets only a signature and an SBOM (the release signer's library, parts left out); the
// third nothing. Then:
//   - what is in the registry is what cosign v3 leaves: three referrer manifests listed in the referrers tag's
//     index with cosign's artifactType and annotations, each a Sigstore bundle that @sigstore/verify (the reference
//     verifier) accepts for the key, holding the statements the formats require;
//   - `imprimatur verify` with deploy/self-verification's policy (its placeholders replaced) allows the signed image
//     and denies the other two;
//   - the same policy applied as a custom resource with `kubectl apply -k` (an overlay patching the two values, as
//     docs/install.md says) to a real kube-apiserver v1.20, served by `imprimatur serve --policy-crds`: an ImageReview
//     admits the signed image naming its digest and signer, and denies the unsigned one and the one without provenance.
import assert from "node:assert/strict";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, test } from "node:test";
import { stringify } from "yaml";
import { CredentialKeyring } from "../../src/credentials/keyring.ts";
import { RegistryClient } from "../../src/registry/registry-client.ts";
import { registrySettingsMap } from "../../src/registry/registry-settings.ts";
import { BUILD_TYPE } from "../../src/release/provenance.ts";
import { signImage } from "../../src/release/sign-image.ts";
import { releaseKey } from "../../src/release/signing-key.ts";
import { imageReview } from "../support/admission.ts";
import { imprimatur } from "../support/cli-process.ts";
import { postJson } from "../support/https-client.ts";
import { startImprimatur, type ImprimaturProcess } from "../support/imprimatur-process.ts";
import { startKubeCluster, type KubeCluster } from "../support/kube-cluster.ts";
import { startRegistry, type TestRegistry } from "../support/registry.ts";
import { generateSigningKey, trustedPublicKeys, type SigningKey } from "../support/signer/keys.ts";
import { fetchBlob, fetchManifest, type PushTarget } from "../support/signer/oci-push.ts";
import { EMPTY_TRUSTED_ROOT, verifyBundle } from "../support/signer/reference-verify.ts";
import { teardown } from "../support/teardown.ts";
import { TestLayouts } from "../support/test-layouts.ts";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const SELF_VERIFICATION = join(ROOT, "deploy", "self-verification");
const REPOSITORY = "release/imprimatur";
const REVISION = "0123456789abcdef0123456789abcdef01234567";
const BUNDLE_V03 = "application/vnd.dev.sigstore.bundle.v0.3+json";
const SIGN = "https://sigstore.dev/cosign/sign/v1";
const SPDX = "https://spdx.dev/Document";
const SLSA = "https://slsa.dev/provenance/v1";
const OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json";
const OCI_INDEX = "application/vnd.oci.image.index.v1+json";
const PLACEHOLDER_IMAGE = "registry.example.com/platform/imprimatur";
const PLACEHOLDER_KEY = "-----BEGIN PUBLIC KEY-----\nREPLACE-WITH-THE-IMPRIMATUR-RELEASE-PUBLIC-KEY\n-----END PUBLIC KEY-----\n";

let dir: string;
let registry: TestRegistry;
let cluster: KubeCluster;
let server: ImprimaturProcess;
let key: SigningKey;
let keyFile: string;
let registriesFile: string;
let policyFile: string;
const layouts = new TestLayouts();
const digests: Record<"signed" | "unsigned" | "noProvenance", string> = { signed: "", unsigned: "", noProvenance: "" };
let signedOutput: { image: string; key: string; referrers: Array<{ part: string; digest: string; artifactType: string; predicateType: string }> };

const target = (): PushTarget => ({ url: registry.url, caPem: registry.caPem, username: registry.username, password: registry.password });
const image = (digest: string) => `${registry.host}/${REPOSITORY}@${digest}`;
const fingerprint = () => releaseKey(key.privateKey).fingerprint;

/** deploy/self-verification's policy with its two placeholders replaced, as a user edits it. */
async function editedPolicy(): Promise<string> {
  const shipped = await readFile(join(SELF_VERIFICATION, "imagepolicy.yaml"), "utf8");
  // The key is the block scalar's text, indented as the file indents it.
  const asKeyBlock = (pem: string) =>
    pem
      .trimEnd()
      .split("\n")
      .map((line) => `                  ${line}`)
      .join("\n");
  assert.ok(shipped.includes(asKeyBlock(PLACEHOLDER_KEY)) && shipped.includes(`["${PLACEHOLDER_IMAGE}"]`), "the shipped policy has both placeholders");
  return shipped.replace(asKeyBlock(PLACEHOLDER_KEY), asKeyBlock(key.publicKeyPem)).replace(`["${PLACEHOLDER_IMAGE}"]`, `["${registry.host}/${REPOSITORY}"]`);
}

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "imprimatur-e2e-release-"));
  registry = await startRegistry({ auth: "htpasswd" });
  registriesFile = join(dir, "registries.json");
  await writeFile(registriesFile, registry.registryConfig());
  for (const [name, tag] of [
    ["signed", "1.0"],
    ["unsigned", "1.1"],
    ["noProvenance", "1.2"],
  ] as const) {
    digests[name] = (await layouts.push(registry, REPOSITORY, tag, { seed: `release-${name}` })).digest;
  }
  key = generateSigningKey("ecdsa-p256");
  keyFile = join(dir, "release.key");
  await writeFile(keyFile, key.privateKey.export({ format: "pem", type: "pkcs8" }), { mode: 0o600 });
  policyFile = join(dir, "self-verification.yaml");
  await writeFile(policyFile, await editedPolicy());
  cluster = await startKubeCluster();
});

after(() =>
  teardown([
    () => server?.stop(),
    () => cluster?.stop(),
    () => registry?.stop(),
    ...layouts.removals(),
    () => dir && rm(dir, { recursive: true, force: true }),
  ]),
);

test("imprimatur sign-image signs the image with the key and attaches its SBOM and provenance", async () => {
  const result = await imprimatur([
    "sign-image",
    image(digests.signed),
    "--key",
    keyFile,
    "--source-revision",
    REVISION,
    "--authfile",
    registry.authFile,
    "--registries",
    registriesFile,
    "-o",
    "json",
  ]);
  assert.equal(result.code, 0, `${result.stdout}${result.stderr}`);
  signedOutput = JSON.parse(result.stdout);
  assert.equal(signedOutput.image, image(digests.signed));
  assert.equal(signedOutput.key, fingerprint());
  assert.deepEqual(
    signedOutput.referrers.map((r) => [r.part, r.predicateType, r.artifactType]),
    [
      ["signature", SIGN, BUNDLE_V03],
      ["sbom", SPDX, BUNDLE_V03],
      ["provenance", SLSA, BUNDLE_V03],
    ],
  );
  assert.deepEqual(JSON.parse(result.stdout).referrersIndex?.entries, 3, "docker-registry has no Referrers API: the tag's index lists them");

  // The text form says the same in a line per referrer; an image that is not there exits 1.
  const missing = await imprimatur([
    "sign-image",
    image(`sha256:${"0".repeat(64)}`),
    "--key",
    keyFile,
    "--authfile",
    registry.authFile,
    "--registries",
    registriesFile,
  ]);
  assert.equal(missing.code, 1, missing.stdout);
  assert.match(missing.stderr, /^imprimatur sign-image: .*not found: manifest sha256:0{64}/m);

  // The second image: signed, with an SBOM, without provenance (the release signer's library, the same code).
  const client = new RegistryClient({
    settings: registrySettingsMap(registry.settings()),
    credentials: CredentialKeyring.of([{ key: registry.host, credential: { source: "test", username: registry.username, password: registry.password } }])
      .lookup,
  });
  try {
    const partial = await signImage(client, {
      image: { registry: registry.host, repository: REPOSITORY, digest: digests.noProvenance },
      key: releaseKey(key.privateKey),
      imprimaturVersion: "0.0.0-test",
      parts: ["signature", "sbom"],
    });
    assert.deepEqual(
      partial.referrers.map((r) => r.part),
      ["signature", "sbom"],
    );
  } finally {
    await client.close();
  }
});

test("a cosign key file or a key on another curve exits 2 before anything is pushed", async () => {
  const cosignKey = join(dir, "cosign.key");
  await writeFile(cosignKey, "-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----\neyJrZGYiOnt9fQ==\n-----END ENCRYPTED SIGSTORE PRIVATE KEY-----\n");
  const p384 = join(dir, "p384.key");
  await writeFile(p384, generateSigningKey("ecdsa-p384").privateKey.export({ format: "pem", type: "pkcs8" }));
  for (const [file, message] of [
    [cosignKey, /cosign's encrypted key format; give an unencrypted PKCS#8 PEM/],
    [p384, /an ECDSA key on secp384r1; release images are signed with ECDSA P-256 keys/],
  ] as const) {
    const r = await imprimatur(["sign-image", image(digests.unsigned), "--key", file, "--authfile", registry.authFile, "--registries", registriesFile]);
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, message);
  }
  const index = await fetchManifest(target(), REPOSITORY, `sha256-${digests.unsigned.slice(7)}`, [OCI_INDEX]).catch((e: Error) => e);
  assert.ok(index instanceof Error && /HTTP 404/.test(index.message), "the unsigned image has no referrers");
});

test("the registry holds what cosign v3 leaves: referrers in the tag's index, each a bundle the reference verifier accepts", async () => {
  const index = await fetchManifest(target(), REPOSITORY, `sha256-${digests.signed.slice(7)}`, [OCI_INDEX]);
  const listed = JSON.parse(index.bytes.toString()) as {
    mediaType: string;
    manifests: Array<{ digest: string; artifactType: string; annotations: Record<string, string> }>;
  };
  assert.equal(listed.mediaType, OCI_INDEX);
  assert.deepEqual(
    listed.manifests.map((d) => d.digest),
    signedOutput.referrers.map((r) => r.digest),
  );
  const statements: Record<string, { subject: Array<{ name: string; digest: { sha256: string } }>; predicate: Record<string, any> }> = {};
  for (const descriptor of listed.manifests) {
    assert.equal(descriptor.artifactType, BUNDLE_V03);
    assert.equal(descriptor.annotations["dev.sigstore.bundle.content"], "dsse-envelope");
    assert.match(descriptor.annotations["org.opencontainers.image.created"]!, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    const predicateType = descriptor.annotations["dev.sigstore.bundle.predicateType"]!;
    const manifest = JSON.parse((await fetchManifest(target(), REPOSITORY, descriptor.digest, [OCI_MANIFEST])).bytes.toString());
    assert.equal(manifest.artifactType, BUNDLE_V03);
    assert.equal(manifest.config.mediaType, "application/vnd.oci.empty.v1+json");
    assert.equal(manifest.subject.digest, digests.signed);
    assert.equal(manifest.layers.length, 1);
    assert.equal(manifest.layers[0].mediaType, BUNDLE_V03);
    const bundle = await fetchBlob(target(), REPOSITORY, manifest.layers[0].digest);
    // @sigstore/verify, with the key and no log entry or timestamp required.
    const signer = verifyBundle(EMPTY_TRUSTED_ROOT, bundle, { keys: trustedPublicKeys([key]), tlogThreshold: 0, timestampThreshold: 0 });
    assert.ok(signer.key);
    assert.throws(() =>
      verifyBundle(EMPTY_TRUSTED_ROOT, bundle, {
        keys: trustedPublicKeys([{ key: generateSigningKey(), hint: key.hint }]),
        tlogThreshold: 0,
        timestampThreshold: 0,
      }),
    );
    const json = JSON.parse(bundle.toString());
    assert.deepEqual(json.verificationMaterial.tlogEntries, []);
    const statement = JSON.parse(Buffer.from(json.dsseEnvelope.payload, "base64").toString());
    assert.equal(statement._type, "https://in-toto.io/Statement/v1");
    assert.equal(statement.predicateType, predicateType);
    assert.deepEqual(statement.subject, [{ name: `${registry.host}/${REPOSITORY}`, digest: { sha256: digests.signed.slice(7) } }]);
    statements[predicateType] = statement;
  }
  assert.deepEqual(Object.keys(statements).sort(), [SIGN, SPDX, SLSA].sort());
  assert.deepEqual(statements[SIGN]!.predicate, {});
  const sbom = statements[SPDX]!.predicate;
  assert.equal(sbom.spdxVersion, "SPDX-2.3");
  const purls = sbom.packages.flatMap((p: { externalRefs?: Array<{ referenceLocator: string }> }) => (p.externalRefs ?? []).map((r) => r.referenceLocator));
  assert.ok(
    purls.some((p: string) => p.startsWith("pkg:npm/undici@")),
    "the SBOM lists the npm packages",
  );
  const provenance = statements[SLSA]!.predicate;
  assert.equal(provenance.buildDefinition.buildType, BUILD_TYPE);
  assert.equal(provenance.buildDefinition.externalParameters.sourceRevision, REVISION);
  assert.deepEqual(provenance.buildDefinition.resolvedDependencies[0], { name: "source", digest: { gitCommit: REVISION } });
  assert.match(provenance.runDetails.builder.id, /^https:\/\//);
});

test("imprimatur verify with deploy/self-verification's policy allows the signed image and denies the others", async () => {
  const verify = (digest: string) =>
    imprimatur(["verify", "--policies", policyFile, "--authfile", registry.authFile, "--registries", registriesFile, "-o", "json", image(digest)]);
  const signed = await verify(digests.signed);
  assert.equal(signed.code, 0, `${signed.stdout}${signed.stderr}`);
  const result = JSON.parse(signed.stdout).results[0];
  assert.equal(result.digest, digests.signed);
  assert.deepEqual(result.signers, [`key ${fingerprint()}`]);
  assert.deepEqual(Object.keys(result.attestations).sort(), [SLSA, SPDX].sort());

  const unsigned = await verify(digests.unsigned);
  assert.equal(unsigned.code, 1, unsigned.stdout);
  assert.match(JSON.parse(unsigned.stdout).results[0].violations[0].message, /no signatures found/);
  const noProvenance = await verify(digests.noProvenance);
  assert.equal(noProvenance.code, 1, noProvenance.stdout);
  assert.match(JSON.parse(noProvenance.stdout).results[0].violations[0].message, /slsa\.dev\/provenance\/v1/);
});

test("applied with kubectl apply -k and served with --policy-crds: admitted naming its digest; unsigned and unproven denied", async () => {
  // The CRDs, then the policy through an overlay that patches the two placeholders, as a user applies it.
  assert.equal((await cluster.kubectl(["apply", "-k", join(ROOT, "deploy", "crds")])).code, 0);
  const established = await cluster.kubectl(["wait", "--for=condition=Established", "crd", "--all", "--timeout=60s"]);
  assert.equal(established.code, 0, established.stderr);
  const overlay = join(dir, "self-verification-overlay");
  await mkdir(overlay);
  await writeFile(
    join(overlay, "kustomization.yaml"),
    stringify({
      apiVersion: "kustomize.config.k8s.io/v1beta1",
      kind: "Kustomization",
      bases: [relative(overlay, SELF_VERIFICATION)],
      patchesJson6902: [
        { target: { group: "imprimatur.dev", version: "v1alpha1", kind: "ImagePolicy", name: "imprimatur-self-verification" }, path: "release-key.yaml" },
      ],
    }),
  );
  await writeFile(
    join(overlay, "release-key.yaml"),
    stringify([
      { op: "replace", path: "/spec/rules/0/images/0", value: `${registry.host}/${REPOSITORY}` },
      { op: "replace", path: "/spec/rules/0/attestors/0/entries/0/staticKey/key", value: key.publicKeyPem },
    ]),
  );
  const applied = await cluster.kubectl(["apply", "-k", overlay]);
  assert.equal(applied.code, 0, applied.stderr);

  server = await startImprimatur(["--kubeconfig", cluster.kubeconfig, "--policy-crds", "--registries", registriesFile, "--authfile", registry.authFile]);
  const ready = async () => {
    const r = await cluster.kubectl(["get", "imagepolicy", "imprimatur-self-verification", "-o", "json"]);
    return (JSON.parse(r.stdout || "{}") as { status?: { conditions?: Array<{ type: string; status: string; message?: string }> } }).status?.conditions?.find(
      (c) => c.type === "Ready",
    );
  };
  for (const deadline = Date.now() + 30_000; (await ready())?.status !== "True";) {
    if (Date.now() > deadline) assert.fail(`the policy is not Ready: ${JSON.stringify(await ready())}\n${await server.log()}`);
    await new Promise((r) => setTimeout(r, 250));
  }

  const review = async (digest: string) => (await postJson(`${server.baseUrl}/imagereview`, server.ca, imageReview([image(digest)], "default"))).body;
  const signed = await review(digests.signed);
  assert.equal(signed.status.allowed, true, `${JSON.stringify(signed)}\n${await server.log()}`);
  const verified = JSON.parse(signed.status.auditAnnotations["verified-images"])[image(digests.signed)];
  assert.equal(verified.digest, digests.signed);
  assert.deepEqual(
    verified.signers.map((s: string) => s.split(" (")[0]),
    [`key ${fingerprint()}`],
  );

  const unsigned = await review(digests.unsigned);
  assert.equal(unsigned.status.allowed, false);
  assert.match(unsigned.status.reason, /imprimatur-self-verification rules\[0\].*no signatures found/);
  const noProvenance = await review(digests.noProvenance);
  assert.equal(noProvenance.status.allowed, false);
  assert.match(noProvenance.status.reason, /imprimatur-self-verification rules\[0\].*attestations\[0\] \(https:\/\/slsa\.dev\/provenance\/v1\)/);
  // Images of other repositories are not this policy's to judge (default: allow): the other policies decide.
  const other = `${registry.host}/other/app@sha256:${"1".repeat(64)}`;
  const elsewhere = (await postJson(`${server.baseUrl}/imagereview`, server.ca, imageReview([other], "default"))).body;
  assert.equal(elsewhere.status.allowed, true, JSON.stringify(elsewhere));
});
