// Signature verification end to end: a real etcd + kube-apiserver v1.20 calling /mutate and /validate, a real
// docker-registry 2.8 with TLS and token auth holding the images and their signatures, and signatures made by
// the project's offline test signer (cosign `.sig` layouts, and Sigstore bundles as referrers through the
// referrers tag schema, which is all docker-registry 2.8 offers) against a mock Sigstore whose
// trusted_root.json is loaded as a TrustRoot policy.
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { stringify } from "yaml";
import { imageReview } from "../support/admission.ts";
import { imprimatur } from "../support/cli-process.ts";
import { getText, postJson } from "../support/https-client.ts";
import { startImprimatur, type ImprimaturProcess } from "../support/imprimatur-process.ts";
import { createPullSecret, startKubeCluster, untilWebhookActive, type KubeCluster } from "../support/kube-cluster.ts";
import { startRegistry, type TestRegistry } from "../support/registry.ts";
import { generateSigningKey, type SigningKey } from "../support/signer/keys.ts";
import { createMockSigstore, type MockSigstore } from "../support/signer/mock-sigstore.ts";
import { pushCosignAttestations, pushCosignSignatures } from "../support/signer/registry-signatures.ts";
import { attachKeylessSignature } from "../support/signer/keyless-signature.ts";
import { teardown } from "../support/teardown.ts";
import { TestLayouts } from "../support/test-layouts.ts";

const NS = "signed";
const WORKFLOW = "https://github.com/acme/app/.github/workflows/release.yml@refs/tags/v1";
const ISSUER = "https://token.actions.githubusercontent.com";
const PUSHER = { username: "pusher", password: "pusher-secret-1" };
const PULLER = { username: "puller", password: "puller-secret-1" };

let dir: string;
let cluster: KubeCluster;
let registry: TestRegistry;
let server: ImprimaturProcess;
let sigstore: MockSigstore;
let keyA: SigningKey;
let keyB: SigningKey;
const digests: Record<string, string> = {};
const layouts = new TestLayouts();

const target = () => ({ url: registry.url, caPem: registry.caPem, ...PUSHER });

async function pushImage(repository: string, tag: string): Promise<string> {
  return (await layouts.push(registry, repository, tag, { seed: `${repository}:${tag}` })).digest;
}

/** A cosign `.sig` manifest with one layer per signer, each logged in the mock Rekor. */
async function signWithKeys(repository: string, digest: string, keys: SigningKey[], signedDigest = digest): Promise<void> {
  const signers = keys.map((key) => ({ key, rekor: sigstore, hash: "sha256" as const }));
  await pushCosignSignatures({ registry, pusher: PUSHER, repository, digest, signers, signedDigest });
}

const SLSA = "https://slsa.dev/provenance/v1";
const VULN = "https://cosign.sigstore.dev/attestation/vuln/v1";
const GOOD_BUILD = "https://actions.github.io/buildtypes/workflow/v1";
const hoursAgo = (h: number) => new Date(Date.now() - h * 3600e3).toISOString();
const provenance = (buildType: string) => ({ buildDefinition: { buildType }, runDetails: { builder: { id: "https://github.com/actions/runner" } } });
const vulnScan = (score: number, ageHours: number) => ({
  metadata: { scanFinishedOn: hoursAgo(ageHours) },
  scanner: { uri: "pkg:github/aquasecurity/trivy@0.50.0", result: { Results: [{ Vulnerabilities: [{ CVSS: { nvd: { V3Score: score } } }] }] } },
});

/** A cosign `.att` manifest: one DSSE layer per statement, each signed by `key` and logged in the mock Rekor. */
async function attest(
  repository: string,
  digest: string,
  statements: Array<{ predicateType: string; predicate: unknown; subjectDigest?: string; key?: SigningKey }>,
): Promise<void> {
  await pushCosignAttestations({
    registry,
    pusher: PUSHER,
    repository,
    digest,
    statements: statements.map(({ key, ...s }) => ({ ...s, signer: { key: key ?? keyA, rekor: sigstore } })),
  });
}

/** A keyless DSSE bundle attached as a referrer, listed in the referrers tag index (docker-registry has no API). */
function signKeyless(repository: string, tag: string, digest: string, subjectAltName: string): Promise<void> {
  return attachKeylessSignature({ registry, target: target(), sigstore, repository, tag, digest, subjectAltName, issuer: ISSUER });
}

function pod(name: string, image: string, extra: Record<string, unknown> = {}): string {
  return JSON.stringify({ apiVersion: "v1", kind: "Pod", metadata: { name, namespace: NS }, spec: { containers: [{ name: "app", image }], ...extra } });
}

async function create(manifest: string): Promise<{ code: number; stderr: string }> {
  return cluster.kubectl(["create", "-f", "-"], { input: manifest });
}

async function getJson(kind: string, name: string): Promise<Record<string, any>> {
  const r = await cluster.kubectl(["get", kind, name, "-n", NS, "-o", "json"]);
  assert.equal(r.code, 0, r.stderr);
  return JSON.parse(r.stdout);
}

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "imprimatur-e2e-signatures-"));
  sigstore = await createMockSigstore({ name: "e2e" });
  keyA = generateSigningKey("ecdsa-p256");
  keyB = generateSigningKey("ecdsa-p256");
  registry = await startRegistry({ auth: "token", publicRepositories: ["public/**"], users: [PUSHER, { ...PULLER, pull: ["private/**"], push: false }] });

  digests.signed = await pushImage("public/signed", "1.0");
  await signWithKeys("public/signed", digests.signed, [keyA]);
  digests.unsigned = await pushImage("public/unsigned", "1.0");
  digests.elsewhere = await pushImage("public/elsewhere", "1.0");
  await signWithKeys("public/elsewhere", digests.elsewhere, [keyA], digests.signed);
  digests.twoOf = await pushImage("public/two-of", "1.0");
  await signWithKeys("public/two-of", digests.twoOf, [keyA]);
  digests.keyless = await pushImage("public/keyless", "1.0");
  await signKeyless("public/keyless", "1.0", digests.keyless, WORKFLOW);
  digests.impostor = await pushImage("public/keyless-impostor", "1.0");
  await signKeyless("public/keyless-impostor", "1.0", digests.impostor, "https://github.com/evil/app/.github/workflows/x.yml@refs/heads/main");
  digests.secretKeyed = await pushImage("public/secret-keyed", "1.0");
  await signWithKeys("public/secret-keyed", digests.secretKeyed, [keyB]);
  digests.secretKeyedWrong = await pushImage("public/secret-keyed-wrong", "1.0");
  await signWithKeys("public/secret-keyed-wrong", digests.secretKeyedWrong, [keyA]);
  digests.plain = await pushImage("public/plain", "1.0");
  const attested = async (name: string, statements: Parameters<typeof attest>[2]) => {
    const digest = await pushImage(`public/attested-${name}`, "1.0");
    digests[`attested-${name}`] = digest;
    await signWithKeys(`public/attested-${name}`, digest, [keyA]);
    await attest(`public/attested-${name}`, digest, statements);
  };
  await attested("good", [
    { predicateType: SLSA, predicate: provenance(GOOD_BUILD) },
    { predicateType: VULN, predicate: vulnScan(5, 2) },
  ]);
  await attested("vulnerable", [
    { predicateType: SLSA, predicate: provenance(GOOD_BUILD) },
    { predicateType: VULN, predicate: vulnScan(9.8, 2) },
  ]);
  await attested("stale", [
    { predicateType: SLSA, predicate: provenance(GOOD_BUILD) },
    { predicateType: VULN, predicate: vulnScan(5, 30) },
  ]);
  await attested("two", [
    { predicateType: SLSA, predicate: provenance("https://evil.example/build") },
    { predicateType: SLSA, predicate: provenance(GOOD_BUILD) },
    { predicateType: VULN, predicate: vulnScan(5, 2) },
  ]);
  await attested("elsewhere", [
    { predicateType: SLSA, predicate: provenance(GOOD_BUILD), subjectDigest: digests.signed },
    { predicateType: VULN, predicate: vulnScan(5, 2) },
  ]);
  await attested("untrusted", [
    { predicateType: SLSA, predicate: provenance(GOOD_BUILD), key: keyB },
    { predicateType: VULN, predicate: vulnScan(5, 2) },
  ]);
  digests.private = await pushImage("private/app", "1.0");
  await signWithKeys("private/app", digests.private, [keyA]);

  const host = registry.host;
  const keyEntry = (key: SigningKey, name: string) => ({ staticKey: { name, key: key.publicKeyPem, trustRoot: "e2e" } });
  await writeFile(join(dir, "e2e-root.json"), JSON.stringify(sigstore.trustedRoot));
  await writeFile(
    join(dir, "signed.yaml"),
    [
      stringify({ apiVersion: "imprimatur.dev/v1alpha1", kind: "TrustRoot", metadata: { name: "e2e" }, spec: { path: "e2e-root.json" } }),
      stringify({
        apiVersion: "imprimatur.dev/v1alpha1",
        kind: "ImagePolicy",
        metadata: { name: "signed-releases" },
        spec: {
          rules: [
            { action: "allow", images: [`${host}/public/two-of*`], attestors: [{ count: 2, entries: [keyEntry(keyA, "a.pub"), keyEntry(keyB, "b.pub")] }] },
            {
              action: "allow",
              images: [`${host}/public/keyless*`],
              digestMutate: true,
              attestors: [{ entries: [{ keyless: { subject: "https://github.com/acme/app/*", issuer: ISSUER, trustRoot: "e2e" } }] }],
            },
            { action: "allow", images: [`${host}/public/plain*`], digestMutate: true },
            {
              action: "allow",
              images: [`${host}/public/secret-keyed*`],
              attestors: [{ entries: [{ staticKey: { keyRef: `k8s://${NS}/release-keys`, trustRoot: "e2e" } }] }],
            },
            { action: "allow", images: [`${host}/*`], digestMutate: true, attestors: [{ entries: [keyEntry(keyA, "a.pub")] }] },
          ],
          default: "deny",
        },
      }),
      stringify({
        apiVersion: "imprimatur.dev/v1alpha1",
        kind: "ImagePolicy",
        metadata: { name: "built-and-scanned" },
        spec: {
          rules: [
            {
              action: "allow",
              images: [`${host}/public/attested-*`],
              attestors: [{ entries: [keyEntry(keyA, "a.pub")] }],
              attestations: [
                { predicateType: SLSA, conditions: [{ all: [{ key: "{{ buildDefinition.buildType }}", operator: "Equals", value: GOOD_BUILD }] }] },
                {
                  predicateType: VULN,
                  conditions: [
                    {
                      all: [
                        { key: "{{ time_since('', metadata.scanFinishedOn, '') }}", operator: "LessThan", value: "24h" },
                        { key: "{{ scanner.result.Results[].Vulnerabilities[?CVSS.nvd.V3Score > `8.0`][] | length(@) }}", operator: "Equals", value: 0 },
                      ],
                    },
                  ],
                  cel: "predicate.scanner.uri.startsWith('pkg:github/aquasecurity/trivy')",
                },
              ],
              validate: { cel: `attestations['${SLSA}'].size() > 0 && image.digest.startsWith('sha256:')` },
            },
          ],
          default: "allow",
        },
      }),
    ].join("---\n"),
  );
  await writeFile(join(dir, "registries.yaml"), registry.registryConfig());
  cluster = await startKubeCluster({ enableAdmissionPlugins: ["MutatingAdmissionWebhook", "ValidatingAdmissionWebhook"] });
  await writeFile(
    join(dir, "config.yaml"),
    stringify({ apiVersion: "imprimatur.dev/v1alpha1", kind: "ServerConfig", kubeconfig: cluster.kubeconfig, registries: join(dir, "registries.yaml") }),
  );
  server = await startImprimatur(["--policies", join(dir, "signed.yaml"), "--config", join(dir, "config.yaml")]);
  for (const file of ["mutating-webhook.yaml", "validating-webhook.yaml"]) {
    const applied = await cluster.kubectl(["apply", "-f", join(server.stateDir, file)]);
    assert.equal(applied.code, 0, applied.stderr);
  }
  assert.equal((await cluster.kubectl(["create", "namespace", NS])).code, 0);
  await createPullSecret(cluster, NS, "regcred", { host, username: PULLER.username }, PULLER.password);
  const keys = await cluster.kubectl(["create", "secret", "generic", "release-keys", "-n", NS, `--from-literal=cosign.pub=${keyB.publicKeyPem}`]);
  assert.equal(keys.code, 0, keys.stderr);
  await untilWebhookActive(cluster, pod("probe", `${host}/public/unsigned:1.0`), (probe) => probe.code !== 0 && /signatures/.test(probe.stderr), {
    context: () => server.log(),
  });
});

after(() =>
  teardown([
    () => cluster?.stop(),
    () => server?.stop(),
    () => registry?.stop(),
    ...layouts.removals(),
    () => dir && rm(dir, { recursive: true, force: true }),
  ]),
);

test("a pod with a key-signed image is admitted, pinned to the verified digest and annotated with its signer", async () => {
  const image = `${registry.host}/public/signed:1.0`;
  const r = await create(pod("signed", image));
  assert.equal(r.code, 0, `${r.stderr}\n${await server.log()}`);
  const got = await getJson("pod", "signed");
  assert.equal(got.spec.containers[0].image, `${image}@${digests.signed}`);
  const verified = JSON.parse(got.metadata.annotations["imprimatur.dev/verified-images"]);
  assert.equal(verified[image].digest, digests.signed);
  assert.match(verified[image].signers[0], /^key sha256:[0-9a-f]{64} \(log index \d+\)$/);
});

test("unsigned, signed for another digest, and 1 of 2 required signers are denied with the reason", async () => {
  const host = registry.host;
  const unsigned = await create(pod("unsigned", `${host}/public/unsigned:1.0`));
  assert.notEqual(unsigned.code, 0);
  assert.match(unsigned.stderr, /denied by policy signed-releases rules\[4\]: no signatures found \(looked for cosign tag .*sha256-[0-9a-f]{64}\.sig/);

  const elsewhere = await create(pod("elsewhere", `${host}/public/elsewhere:1.0`));
  assert.notEqual(elsewhere.code, 0);
  assert.match(elsewhere.stderr, new RegExp(`key a\\.pub: signs ${digests.signed}, not ${digests.elsewhere}`));

  const twoOf = await create(pod("two-of", `${host}/public/two-of:1.0@${digests.twoOf}`));
  assert.notEqual(twoOf.code, 0);
  assert.match(twoOf.stderr, /attestors\[0\] needs all 2: key a\.pub verified; key b\.pub: no signature by this key \(1 signature checked\)/);
});

test("keyless: the right workflow identity is admitted; another identity is denied naming both", async () => {
  const good = await create(pod("keyless", `${registry.host}/public/keyless:1.0`));
  assert.equal(good.code, 0, `${good.stderr}\n${await server.log()}`);
  const got = await getJson("pod", "keyless");
  assert.match(
    JSON.parse(got.metadata.annotations["imprimatur.dev/verified-images"])[`${registry.host}/public/keyless:1.0`].signers[0],
    new RegExp(`^subject ${WORKFLOW.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&")} issuer`),
  );

  const bad = await create(pod("impostor", `${registry.host}/public/keyless-impostor:1.0`));
  assert.notEqual(bad.code, 0);
  assert.match(
    bad.stderr,
    /certificate identity "https:\/\/github\.com\/evil\/app\/\.github\/workflows\/x\.yml@refs\/heads\/main" does not match "https:\/\/github\.com\/acme\/app\/\*"/,
  );
});

test("a private image's signatures are read with the pod's pull secret; without it the pod is denied", async () => {
  const image = `${registry.host}/private/app:1.0`;
  const withSecret = await create(pod("private", image, { imagePullSecrets: [{ name: "regcred" }] }));
  assert.equal(withSecret.code, 0, `${withSecret.stderr}\n${await server.log()}`);
  const without = await create(pod("no-secret", image));
  assert.notEqual(without.code, 0);
  assert.match(without.stderr, /denied by policy signed-releases rules\[4\]/);
});

test("a Deployment with an unsigned image is refused at creation, not later at its pods", async () => {
  const deployment = JSON.stringify({
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name: "web", namespace: NS },
    spec: {
      selector: { matchLabels: { app: "web" } },
      template: { metadata: { labels: { app: "web" } }, spec: { containers: [{ name: "app", image: `${registry.host}/public/unsigned:1.0` }] } },
    },
  });
  const r = await create(deployment);
  assert.notEqual(r.code, 0);
  assert.match(r.stderr, /spec\.template\.spec\.containers\[0\]\.image.*no signatures found/);
});

test("the ImageReview endpoint applies the same rules with the server's own credentials; metrics count verifications", async () => {
  const host = registry.host;
  const signed = await postJson(`${server.baseUrl}/imagereview`, server.ca, imageReview([`${host}/public/signed:1.0@${digests.signed}`], NS));
  assert.equal(signed.status, 200, signed.text);
  assert.equal(signed.body.status.allowed, true, signed.text);
  const unsigned = await postJson(`${server.baseUrl}/imagereview`, server.ca, imageReview([`${host}/public/unsigned:1.0@${digests.unsigned}`], NS));
  assert.equal(unsigned.body.status.allowed, false);
  assert.match(unsigned.body.status.reason, /no signatures found/);
  // The ImagePolicyWebhook cannot pin: a tag under a rule with attestors is denied, signed or not, saying why.
  const tag = await postJson(`${server.baseUrl}/imagereview`, server.ca, imageReview([`${host}/public/signed:1.0`], NS));
  assert.equal(tag.body.status.allowed, false);
  assert.match(tag.body.status.reason, /rules\[4\]\.digestVerify: .*the ImagePolicyWebhook cannot change the pod to pin it/);
  // The server has no registry credentials of its own: the private image's signatures cannot be read.
  const privateImage = await postJson(`${server.baseUrl}/imagereview`, server.ca, imageReview([`${host}/private/app:1.0@${digests.private}`], NS));
  assert.equal(privateImage.body.status.allowed, false);

  const metrics = (await getText(`${server.baseUrl}/metrics`, server.ca)).text;
  const count = (outcome: string) =>
    Number(new RegExp(`imprimatur_signature_verifications_seconds_count\\{outcome="${outcome}"\\} (\\d+)`).exec(metrics)?.[1] ?? 0);
  assert.ok(
    count("verified") >= 3,
    metrics
      .split("\n")
      .filter((l) => l.includes("signature"))
      .join("\n"),
  );
  assert.ok(count("denied") >= 3);
});

test("a key kept in a Kubernetes Secret (keyRef k8s://NAMESPACE/SECRET) verifies, and only its own signatures", async () => {
  const good = await create(pod("secret-keyed", `${registry.host}/public/secret-keyed:1.0`));
  assert.equal(good.code, 0, `${good.stderr}\n${await server.log()}`);
  const wrong = await create(pod("secret-keyed-wrong", `${registry.host}/public/secret-keyed-wrong:1.0`));
  assert.notEqual(wrong.code, 0);
  assert.match(wrong.stderr, new RegExp(`rules\\[3\\]: attestors\\[0\\] needs its entry: key k8s://${NS}/release-keys: no signature by this key`));
});

test("imprimatur verify: one line per image with the digest and signer, a summary, exit 1 when any is denied; -o json", async () => {
  const host = registry.host;
  const args = ["verify", "--policies", join(dir, "signed.yaml"), "--registries", join(dir, "registries.yaml"), "--namespace", NS];
  const both = await imprimatur([...args, `${host}/public/signed:1.0`, `${host}/public/unsigned:1.0`]);
  assert.equal(both.code, 1, both.stderr);
  const lines = both.stdout.trim().split("\n");
  assert.match(lines[0]!, new RegExp(`^ALLOWED ${host}/public/signed:1\\.0 ${digests.signed}: signed by key sha256:[0-9a-f]{64} \\(log index \\d+\\)$`));
  assert.match(lines[1]!, new RegExp(`^DENIED  ${host}/public/unsigned:1\\.0: policy signed-releases rules\\[4\\]: no signatures found`));
  assert.equal(lines[2], "2 images: 1 allowed, 1 denied");

  const json = await imprimatur([...args, "-o", "json", `${host}/public/keyless:1.0`]);
  assert.equal(json.code, 0, json.stderr);
  const report = JSON.parse(json.stdout);
  assert.equal(report.results[0].digest, digests.keyless);
  assert.match(report.results[0].signers[0], /^subject https:\/\/github\.com\/acme\/app\//);
  assert.deepEqual(report.summary, { images: 1, allowed: 1, denied: 0 });

  const usage = await imprimatur(["verify", "not a reference!"]);
  assert.equal(usage.code, 2);
});

test("a pod with a pinned unsigned-rule image and a verified image by digest keeps both records", async () => {
  const host = registry.host;
  const plain = `${host}/public/plain:1.0`;
  const signed = `${host}/public/signed:1.0@${digests.signed}`;
  const manifest = JSON.stringify({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "mixed", namespace: NS },
    spec: {
      containers: [
        { name: "plain", image: plain },
        { name: "signed", image: signed },
      ],
    },
  });
  const r = await create(manifest);
  assert.equal(r.code, 0, `${r.stderr}\n${await server.log()}`);
  const got = await getJson("pod", "mixed");
  assert.equal(got.spec.containers[0].image, `${plain}@${digests.plain}`);
  assert.deepEqual(JSON.parse(got.metadata.annotations["imprimatur.dev/pinned-images"]), { [plain]: `${plain}@${digests.plain}` });
  assert.equal(JSON.parse(got.metadata.annotations["imprimatur.dev/verified-images"])[signed].digest, digests.signed);
});

test("a registry with htpasswd auth: signatures are read with --authfile's credentials, and refused without them", async () => {
  const basic = await startRegistry({ auth: "htpasswd" });
  try {
    const layout = await layouts.push(basic, "team/app", "1.0", { seed: "htpasswd-app" });
    await pushCosignSignatures({ registry: basic, repository: "team/app", digest: layout.digest, signers: [{ key: keyA, rekor: sigstore, hash: "sha256" }] });
    const registries = join(dir, "htpasswd-registries.yaml");
    await writeFile(registries, stringify({ apiVersion: "imprimatur.dev/v1alpha1", kind: "RegistryConfig", registries: basic.configEntries() }));
    // Its own policy file: the TrustRoot (the same mock) and one rule for this registry.
    const policy = join(dir, "htpasswd.yaml");
    await writeFile(
      policy,
      stringify({ apiVersion: "imprimatur.dev/v1alpha1", kind: "TrustRoot", metadata: { name: "e2e" }, spec: { path: "e2e-root.json" } }) +
        "---\n" +
        stringify({
          apiVersion: "imprimatur.dev/v1alpha1",
          kind: "ImagePolicy",
          metadata: { name: "htpasswd-signed" },
          spec: {
            rules: [
              {
                action: "allow",
                images: [`${basic.host}/*`],
                attestors: [{ entries: [{ staticKey: { name: "a.pub", key: keyA.publicKeyPem, trustRoot: "e2e" } }] }],
              },
            ],
          },
        }),
    );
    const withPolicy = ["verify", "--policies", policy, "--registries", registries, "--namespace", NS, `${basic.host}/team/app:1.0`];
    const withAuth = await imprimatur([...withPolicy, "--authfile", basic.authFile]);
    assert.equal(withAuth.code, 0, withAuth.stdout + withAuth.stderr);
    assert.match(withAuth.stdout, new RegExp(`^ALLOWED ${basic.host}/team/app:1\\.0 ${layout.digest}: signed by key`));
    const anonymous = await imprimatur(withPolicy);
    assert.equal(anonymous.code, 1);
    assert.match(anonymous.stdout, /DENIED .*unauthorized/);
  } finally {
    await basic.stop();
  }
});

test("attestations: SLSA provenance and a vulnerability scan checked with conditions, through kube-apiserver", async () => {
  const host = registry.host;
  const good = await create(pod("attested-good", `${host}/public/attested-good:1.0`));
  assert.equal(good.code, 0, `${good.stderr}\n${await server.log()}`);
  const denied = async (name: string, expected: RegExp) => {
    const r = await create(pod(`attested-${name}`, `${host}/public/attested-${name}:1.0`));
    assert.notEqual(r.code, 0, `${name} was admitted`);
    assert.match(r.stderr, expected);
  };
  await denied(
    "vulnerable",
    /built-and-scanned rules\[0\]: attestations\[1\] \(https:\/\/cosign\.sigstore\.dev\/attestation\/vuln\/v1\): conditions\[0\]\.all\[1\]: 1 is not Equals 0/,
  );
  await denied("stale", /attestations\[1\] .*conditions\[0\]\.all\[0\]: "30h\d+m\d+(\.\d+)?s" is not LessThan "24h"/);
  await denied("elsewhere", /attestations\[0\] \(https:\/\/slsa\.dev\/provenance\/v1\): no verified attestation: .*the statement's subject is not sha256:/);
  await denied(
    "untrusted",
    /attestations\[0\] .*no verified attestation: .*\.att layer 0: attestors\[0\] needs its entry: key a\.pub: the signature does not verify with this key/,
  );
  // By default every verified statement of a type must pass (Kyverno's rule): a second, failing provenance denies.
  await denied("two", /attestations\[0\] \(https:\/\/slsa\.dev\/provenance\/v1\): .*statementsMustPass: all/);

  // imprimatur verify judges the same, and names who signed each attestation type.
  const args = ["verify", "--policies", join(dir, "signed.yaml"), "--registries", join(dir, "registries.yaml"), "--namespace", NS];
  const cli = await imprimatur([...args, `${host}/public/attested-good:1.0`, `${host}/public/attested-vulnerable:1.0`]);
  assert.equal(cli.code, 1, cli.stderr);
  const lines = cli.stdout.trim().split("\n");
  assert.match(lines[0]!, new RegExp(`^ALLOWED ${host}/public/attested-good:1\\.0 sha256:[0-9a-f]{64}: signed by key sha256:`));
  for (const type of [SLSA, VULN])
    assert.ok(
      lines.some((l) => l.startsWith(`        attestation ${type}: signed by key sha256:`)),
      cli.stdout,
    );
  assert.ok(
    lines.some((l) => /^DENIED {2}.*attested-vulnerable:1\.0.*conditions\[0\]\.all\[1\]: 1 is not Equals 0/.test(l)),
    cli.stdout,
  );
  const json = JSON.parse((await imprimatur([...args, "-o", "json", `${host}/public/attested-good:1.0`])).stdout);
  assert.deepEqual(Object.keys(json.results[0].attestations).sort(), [SLSA, VULN].sort());
});
