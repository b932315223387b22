// Notary Project (Notation) signatures through the paths a cluster runs, not only `imprimatur verify`
// (test/e2e/notation-signatures.test.ts): a real etcd + kube-apiserver v1.20 calling `imprimatur serve`'s /mutate and
// /validate, its ImageReview endpoint, and its background scan (`--background-scan`, policy reports in the CRDs of
// deploy/crds/reports), all judging a `notary` attestor entry against a real docker-registry 2.8 (TLS, token auth,
// public and private repositories, no Referrers API: signatures are found through the referrers tag schema, as
// notation 1.x pushes them). The signatures are written by the project's test signers (JWS and COSE envelopes over a
// test PKI: test/support/notation/) and cosign `.sig` manifests (test/support/signer/); the policy is the YAML users
// write.
// Shown: a pod whose image carries a trusted Notation signature is admitted, pinned to the digest verified, and the
// pod records the certificate and referrer that satisfied the entry; unsigned, an untrusted chain and a certificate
// outside trustedIdentities are denied naming why; count: 2 over a cosign key and a Notation certificate admits only
// with both; a private image's signatures are read with the pod's pull secret; a Deployment's template is judged (and
// pinned) at creation. ImageReview allows the signed digest naming its signer and denies the unsigned one. The scan
// reports a running pod whose image is not Notation-signed (naming the notary entry's failure and the digest that
// runs) and no report for signed ones. The certificates may come from a Secret of the namespace (`certsRef: k8s://…`, read
// when needed: denied while it is missing, admitted once it exists) or from a TrustRoot's Notation stores.
// The scanned pods are objects only (no kubelet runs here): what the kubelet would report (the imageID each container
// runs) is written through pods/status. One cluster, registry and serve for the file.
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { stringify } from "yaml";
import { loadKubeClient } from "../../src/kube/kube-connection.ts";
import { imageReview } from "../support/admission.ts";
import { getText, postJson } from "../support/https-client.ts";
import { startImprimatur, type ImprimaturProcess } from "../support/imprimatur-process.ts";
import { createPullSecret, startKubeCluster, untilWebhookActive, type KubeCluster } from "../support/kube-cluster.ts";
import { certificateFingerprint, signImageWithNotation, type NotationSigner } from "../support/notation/notation-fixtures.ts";
import { codeSigningChain, issue } from "../support/notation/test-pki.ts";
import { startRegistry, type TestRegistry } from "../support/registry.ts";
import { generateSigningKey, type SigningKey } from "../support/signer/keys.ts";
import { pushCosignSignatures } from "../support/signer/registry-signatures.ts";
import { teardown } from "../support/teardown.ts";
import { TestLayouts } from "../support/test-layouts.ts";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
/** Where pods are created through the webhooks. */
const NS = "notation";
/** Where the scanned pods live: created before the webhooks are registered, so they never passed admission. */
const SCAN_NS = "notation-scan";
const PUSHER = { username: "pusher", password: "pusher-secret-1" };
const PULLER = { username: "puller", password: "puller-secret-1" };
const RELEASE_SUBJECT = "C=US, ST=WA, L=Seattle, O=Acme, CN=Release";
const POLICY = "notation-releases";

let dir: string;
let cluster: KubeCluster;
let registry: TestRegistry;
let server: ImprimaturProcess;
let cosignKey: SigningKey;
let release: NotationSigner;
let rootPem: string;
const layouts = new TestLayouts();
/** By repository: the image's digest and, when Notation-signed, the signature manifest's digest. */
const images: Record<string, { digest: string; referrer?: string }> = {};
const uids = new Map<string, string>();

const target = () => ({ url: registry.url, caPem: registry.caPem, ...PUSHER });
const ref = (repository: string) => `${registry.host}/${repository}:1.0`;
const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");

function podJson(name: string, namespace: string, image: string, extra: Record<string, unknown> = {}): string {
  return JSON.stringify({ apiVersion: "v1", kind: "Pod", metadata: { name, namespace }, spec: { containers: [{ name: "app", image }], ...extra } });
}

async function create(name: string, repository: string, extra: Record<string, unknown> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  // A repository's image by tag, or an image reference as given (by digest).
  const image = repository.startsWith(`${registry.host}/`) ? repository : ref(repository);
  return cluster.kubectl(["create", "-o", "json", "-f", "-"], { input: podJson(name, NS, image, extra) });
}

/** A pod that must be admitted: its object as stored (after /mutate). */
async function admitted(name: string, repository: string, extra: Record<string, unknown> = {}): Promise<Record<string, any>> {
  const r = await create(name, repository, extra);
  assert.equal(r.code, 0, `${name} was denied: ${r.stderr}\n${(await server.log()).slice(-3000)}`);
  return JSON.parse(r.stdout) as Record<string, any>;
}

/** A pod that must be denied: the apiserver's message. */
async function denied(name: string, repository: string, extra: Record<string, unknown> = {}): Promise<string> {
  const r = await create(name, repository, extra);
  assert.notEqual(r.code, 0, `${name} was admitted: ${r.stdout}`);
  return r.stderr;
}

/** The pod's record of what admission verified, for its only image. */
function verifiedRecord(pod: Record<string, any>, repository: string): { digest: string; signers: string[] } {
  const annotation = pod.metadata?.annotations?.["imprimatur.dev/verified-images"] as string | undefined;
  assert.ok(annotation, `no verified-images annotation: ${JSON.stringify(pod.metadata)}`);
  const record = (JSON.parse(annotation) as Record<string, { digest: string; signers: string[] }>)[ref(repository)];
  assert.ok(record, `no record for ${ref(repository)}: ${annotation}`);
  return record;
}

/** How the verified-images record and ImageReview name a Notation signer of `repository` (the release certificate). */
function notarySigner(repository: string, envelope: "JWS" | "COSE"): string {
  return `notary release: x509 ${RELEASE_SUBJECT} (${certificateFingerprint(release.leaf)}), identity "x509.subject: C=US, ST=WA, O=Acme", ${envelope} envelope of referrer ${registry.host}/${repository}@${images[repository]!.referrer}`;
}

async function pushImage(repository: string): Promise<string> {
  const { digest } = await layouts.push(registry, repository, "1.0", { seed: `notation-admission:${repository}` });
  images[repository] = { digest };
  return digest;
}

async function notationSign(repository: string, signer: NotationSigner, format: "jws" | "cose" = "jws"): Promise<void> {
  const { subject, referrer } = await signImageWithNotation(registry, target(), repository, "1.0", signer, format);
  assert.equal(subject.digest, images[repository]!.digest);
  images[repository]!.referrer = referrer;
}

async function createScannedPod(name: string, repository: string, extra: Record<string, unknown> = {}): Promise<void> {
  const created = await cluster.kubectl(["create", "-o", "json", "-f", "-"], { input: podJson(name, SCAN_NS, ref(repository), extra) });
  assert.equal(created.code, 0, created.stderr);
  uids.set(name, (JSON.parse(created.stdout) as { metadata: { uid: string } }).metadata.uid);
  // What the kubelet writes once the container runs: the image and the digest it runs (pods/status).
  const kube = loadKubeClient(cluster.kubeconfig);
  const path = `/api/v1/namespaces/${SCAN_NS}/pods/${name}/status`;
  const pod = (await kube.request("GET", path)) as { status?: Record<string, unknown> };
  pod.status = {
    ...pod.status,
    containerStatuses: [
      {
        name: "app",
        image: ref(repository),
        imageID: `${registry.host}/${repository}@${images[repository]!.digest}`,
        ready: true,
        restartCount: 0,
        state: { running: {} },
      },
    ],
  };
  await kube.request("PUT", path, { body: pod });
  await kube.close();
}

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "imprimatur-e2e-notation-admission-"));
  // The cluster starts while the registry is filled.
  const clusterStarting = startKubeCluster({ enableAdmissionPlugins: ["MutatingAdmissionWebhook", "ValidatingAdmissionWebhook"] });
  clusterStarting.catch(() => {});
  registry = await startRegistry({ auth: "token", publicRepositories: ["public/**"], users: [PUSHER, { ...PULLER, pull: ["private/**"], push: false }] });
  cosignKey = generateSigningKey("ecdsa-p256");
  const pki = await codeSigningChain(RELEASE_SUBJECT);
  release = { leaf: pki.leaf, chain: pki.chain };
  // Another CA's leaf with the very same subject: only the store tells them apart.
  const stranger = await codeSigningChain(RELEASE_SUBJECT);
  // The trusted CA's leaf for another organisation: the chain is trusted, the identity is not.
  const otherLeaf = await issue(pki.intermediate, { subject: "C=US, ST=WA, L=Seattle, O=Contoso, CN=Release" });

  for (const repository of [
    "public/jws",
    "public/cose",
    "public/mixed",
    "public/mixed-cosign-only",
    "private/app",
    "public/scan-signed",
    "public/from-secret",
    "public/from-trustroot",
  ])
    await pushImage(repository);
  for (const repository of ["public/unsigned", "public/untrusted", "public/other-identity"]) await pushImage(repository);
  await notationSign("public/jws", release);
  await notationSign("public/cose", release, "cose");
  await notationSign("private/app", release);
  await notationSign("public/scan-signed", release, "cose");
  await notationSign("public/from-secret", release);
  await notationSign("public/from-trustroot", release, "cose");
  await notationSign("public/untrusted", { leaf: stranger.leaf, chain: stranger.chain });
  await notationSign("public/other-identity", { leaf: otherLeaf, chain: [otherLeaf.der, pki.intermediate.der, pki.root.der] });
  await pushCosignSignatures({ registry, pusher: PUSHER, repository: "public/mixed", digest: images["public/mixed"]!.digest, signers: [{ key: cosignKey }] });
  await notationSign("public/mixed", release);
  await pushCosignSignatures({
    registry,
    pusher: PUSHER,
    repository: "public/mixed-cosign-only",
    digest: images["public/mixed-cosign-only"]!.digest,
    signers: [{ key: cosignKey }],
  });

  const host = registry.host;
  const notary = { notary: { name: "release", certs: pki.root.pem, trustedIdentities: ["x509.subject: C=US, ST=WA, O=Acme"] } };
  rootPem = pki.root.pem;
  // The same root kept once in a TrustRoot, for entries that name it.
  const trustRoot = stringify({
    apiVersion: "imprimatur.dev/v1alpha1",
    kind: "TrustRoot",
    metadata: { name: "acme-notation" },
    spec: { notation: { certs: pki.root.pem } },
  });
  await writeFile(
    join(dir, "policies.yaml"),
    `${trustRoot}---\n` +
      stringify({
        apiVersion: "imprimatur.dev/v1alpha1",
        kind: "ImagePolicy",
        metadata: { name: POLICY },
        spec: {
          rules: [
            {
              action: "allow",
              images: [`${host}/public/mixed*`],
              digestMutate: true,
              attestors: [{ count: 2, entries: [{ staticKey: { name: "build", key: cosignKey.publicKeyPem, ignoreTlog: true } }, notary] }],
            },
            // The root read from a Secret of the namespace when a verification needs it; or from the TrustRoot.
            {
              action: "allow",
              images: [`${host}/public/from-secret*`],
              attestors: [{ entries: [{ notary: { name: "from-secret", certsRef: `k8s://${NS}/notation-ca` } }] }],
            },
            {
              action: "allow",
              images: [`${host}/public/from-trustroot*`],
              attestors: [{ entries: [{ notary: { name: "from-trustroot", trustRoot: "acme-notation" } }] }],
            },
            { action: "allow", images: [`${host}/*`], digestMutate: true, attestors: [{ entries: [notary] }] },
          ],
          default: "deny",
        },
      }),
  );
  await writeFile(join(dir, "registries.yaml"), registry.registryConfig());

  cluster = await clusterStarting;
  const crds = await cluster.kubectl(["apply", "-k", join(ROOT, "deploy/crds/reports")]);
  assert.equal(crds.code, 0, crds.stderr);
  for (const ns of [NS, SCAN_NS]) {
    assert.equal((await cluster.kubectl(["create", "namespace", ns])).code, 0);
    await createPullSecret(cluster, ns, "regcred", { host, username: PULLER.username }, PULLER.password);
  }
  assert.equal((await cluster.kubectl(["wait", "--for=condition=Established", "crd", "--all", "--timeout=60s"])).code, 0);
  // Running pods that never passed admission (no webhook yet): the scan must judge them all the same.
  await createScannedPod("scan-signed", "public/scan-signed");
  await createScannedPod("scan-private", "private/app", { imagePullSecrets: [{ name: "regcred" }] });
  await createScannedPod("scan-unsigned", "public/unsigned");
  await createScannedPod("scan-untrusted", "public/untrusted");

  server = await startImprimatur([
    "--policies",
    join(dir, "policies.yaml"),
    "--registries",
    join(dir, "registries.yaml"),
    "--kubeconfig",
    cluster.kubeconfig,
    "--background-scan",
    "--scan-reports",
    "wgpolicyk8s",
    "--scan-rate",
    "100",
    "--scan-lease",
    `${SCAN_NS}/imprimatur-scan`,
  ]);
  for (const file of ["mutating-webhook.yaml", "validating-webhook.yaml"]) {
    const applied = await cluster.kubectl(["apply", "-f", join(server.stateDir, file)]);
    assert.equal(applied.code, 0, applied.stderr);
  }
  await untilWebhookActive(cluster, podJson("probe", NS, ref("public/unsigned")), (probe) => probe.code !== 0 && /Notary Project/.test(probe.stderr), {
    context: () => server.log(),
  });
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

test("webhook: a pod whose image has a trusted Notation signature (JWS or COSE) is admitted, pinned to the digest verified, and records the certificate and referrer", async () => {
  for (const [repository, envelope] of [
    ["public/jws", "JWS"],
    ["public/cose", "COSE"],
  ] as const) {
    const name = repository.slice("public/".length);
    const pod = await admitted(name, repository);
    const digest = images[repository]!.digest;
    assert.equal(pod.spec.containers[0].image, `${ref(repository)}@${digest}`, "pinned to the digest the signature is of");
    const record = verifiedRecord(pod, repository);
    assert.equal(record.digest, digest);
    assert.deepEqual(record.signers, [notarySigner(repository, envelope)]);
  }
});

test("webhook: unsigned, an untrusted chain and a certificate outside trustedIdentities are denied, naming why", async () => {
  const host = registry.host;
  const unsigned = await denied("unsigned", "public/unsigned");
  assert.match(
    unsigned.trim(),
    new RegExp(
      `denied by policy ${POLICY} rules\\[3\\]: no signatures found \\(looked for Notary Project signatures referring to ${images["public/unsigned"]!.digest} in ${escape(host)}/public/unsigned\\); attestors\\[0\\] needs its entry: notary release: no Notary Project signature found$`,
    ),
  );

  const untrusted = await denied("untrusted", "public/untrusted");
  assert.match(
    untrusted,
    new RegExp(`denied by policy ${POLICY} rules\\[3\\]: .*notary release: .*no certificate of the chain is in the certificates of notary release`),
  );

  const otherIdentity = await denied("other-identity", "public/other-identity");
  assert.match(
    otherIdentity,
    new RegExp(
      `denied by policy ${POLICY} rules\\[3\\]: .*notary release: .*the signing certificate's subject .*O=Contoso.* is none of the trusted identities`,
    ),
  );

  // None of them was created.
  const pods = await cluster.kubectl(["get", "pods", "-n", NS, "-o", "name"]);
  assert.equal(pods.code, 0, pods.stderr);
  assert.doesNotMatch(pods.stdout, /unsigned|untrusted|other-identity/);
});

test("webhook: count: 2 over a cosign key and a Notation certificate admits with both signatures, and denies with the key's alone", async () => {
  const pod = await admitted("mixed", "public/mixed");
  const digest = images["public/mixed"]!.digest;
  assert.equal(pod.spec.containers[0].image, `${ref("public/mixed")}@${digest}`);
  const record = verifiedRecord(pod, "public/mixed");
  assert.equal(record.digest, digest);
  assert.equal(record.signers.length, 2, record.signers.join("\n"));
  assert.ok(record.signers.includes(notarySigner("public/mixed", "JWS")), record.signers.join("\n"));
  assert.ok(
    record.signers.some((s) => /^key sha256:[0-9a-f]{64}$/.test(s)),
    record.signers.join("\n"),
  );

  const cosignOnly = await denied("mixed-cosign-only", "public/mixed-cosign-only");
  assert.match(
    cosignOnly,
    new RegExp(`denied by policy ${POLICY} rules\\[0\\]: attestors\\[0\\] needs all 2: key build verified; notary release: no Notary Project signature found`),
  );
});

test("webhook: a private image's Notation signature is read with the pod's pull secret; without it the pod is denied", async () => {
  const pod = await admitted("private", "private/app", { imagePullSecrets: [{ name: "regcred" }] });
  assert.equal(pod.spec.containers[0].image, `${ref("private/app")}@${images["private/app"]!.digest}`);
  assert.deepEqual(verifiedRecord(pod, "private/app").signers, [notarySigner("private/app", "JWS")]);

  // By tag, the tag cannot be resolved; by digest, the signatures cannot be read: both without credentials.
  const byTag = await denied("private-no-secret", "private/app");
  assert.match(byTag, new RegExp(`denied by policy ${POLICY} rules\\[3\\]\\.digestMutate: the tag could not be resolved to a digest \\(unauthorized`));
  const byDigest = await denied("private-no-secret", `${ref("private/app")}@${images["private/app"]!.digest}`);
  assert.match(byDigest, new RegExp(`denied by policy ${POLICY} rules\\[3\\]: no signature could be read .*notary release: .*unauthorized`));
});

test("webhook: a Deployment's pod template is judged at creation: the Notation-signed image is pinned, an untrusted one refused", async () => {
  const deployment = (name: string, repository: string) =>
    JSON.stringify({
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name, namespace: NS },
      spec: {
        selector: { matchLabels: { app: name } },
        template: { metadata: { labels: { app: name } }, spec: { containers: [{ name: "app", image: ref(repository) }] } },
      },
    });
  const signed = await cluster.kubectl(["create", "-o", "json", "-f", "-"], { input: deployment("web", "public/cose") });
  assert.equal(signed.code, 0, `${signed.stderr}\n${(await server.log()).slice(-3000)}`);
  const template = (JSON.parse(signed.stdout) as { spec: { template: { spec: { containers: Array<{ image: string }> } } } }).spec.template.spec;
  assert.equal(template.containers[0]!.image, `${ref("public/cose")}@${images["public/cose"]!.digest}`);

  const untrusted = await cluster.kubectl(["create", "-f", "-"], { input: deployment("untrusted-web", "public/untrusted") });
  assert.notEqual(untrusted.code, 0, untrusted.stdout);
  assert.match(untrusted.stderr, /spec\.template\.spec\.containers\[0\]\.image.*no certificate of the chain is in the certificates of notary release/);
});

test("ImageReview: the signed digest is allowed naming its Notation signer; the unsigned one is denied naming the notary entry", async () => {
  const signed = `${ref("public/jws")}@${images["public/jws"]!.digest}`;
  const allowed = await postJson(`${server.baseUrl}/imagereview`, server.ca, imageReview([signed], NS));
  assert.equal(allowed.status, 200, allowed.text);
  assert.equal(allowed.body.status.allowed, true, allowed.text);
  const verified = JSON.parse(allowed.body.status.auditAnnotations?.["verified-images"] ?? "{}") as Record<string, { digest: string; signers: string[] }>;
  assert.deepEqual(verified[signed], { digest: images["public/jws"]!.digest, signers: [notarySigner("public/jws", "JWS")] }, allowed.text);

  const unsignedImage = `${ref("public/unsigned")}@${images["public/unsigned"]!.digest}`;
  const refused = await postJson(`${server.baseUrl}/imagereview`, server.ca, imageReview([unsignedImage], NS));
  assert.equal(refused.status, 200, refused.text);
  assert.equal(refused.body.status.allowed, false, refused.text);
  assert.match(refused.body.status.reason, new RegExp(`${POLICY} rules\\[3\\]: .*notary release: no Notary Project signature found`));

  const untrusted = await postJson(
    `${server.baseUrl}/imagereview`,
    server.ca,
    imageReview([`${ref("public/untrusted")}@${images["public/untrusted"]!.digest}`], NS),
  );
  assert.equal(untrusted.body.status.allowed, false, untrusted.text);
  assert.match(untrusted.body.status.reason, /no certificate of the chain is in the certificates of notary release/);
});

interface Report {
  metadata: { name: string };
  results?: Array<{ policy: string; rule?: string; result: string; message: string; properties?: Record<string, string> }>;
}

async function reports(): Promise<Map<string, Report>> {
  const got = await cluster.kubectl(["get", "policyreports", "-n", SCAN_NS, "-o", "json"]);
  assert.equal(got.code, 0, got.stderr);
  return new Map((JSON.parse(got.stdout) as { items: Report[] }).items.map((r) => [r.metadata.name, r]));
}

async function until(what: string, check: () => Promise<boolean>, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting: ${what}\n${(await server.log()).slice(-3000)}`);
    await sleep(300);
  }
}

test("background scan: a running pod whose image is not Notation-signed by a trusted certificate is reported, naming the notary entry's failure; signed ones are not", async () => {
  const metric = async (pattern: RegExp) => Number(pattern.exec((await getText(`${server.baseUrl}/metrics`, server.ca)).text)?.[1] ?? 0);
  await until("reports for the unsigned and untrusted pods", async () => {
    const got = await reports();
    return got.has(uids.get("scan-unsigned")!) && got.has(uids.get("scan-untrusted")!);
  });
  // Every pod in view judged at least once: a pod without a report by then passed.
  await until("a full scan", async () => (await metric(/^imprimatur_scan_duration_seconds_count (\d+)$/m)) >= 1);

  const got = await reports();
  const resultsOf = (pod: string) =>
    (got.get(uids.get(pod)!)?.results ?? []).map((r) => [r.policy, r.rule, r.result, r.properties?.image, r.properties?.digest, r.message] as const);

  const unsigned = resultsOf("scan-unsigned");
  assert.equal(unsigned.length, 1, JSON.stringify(unsigned));
  const [policy, rule, result, image, digest, message] = unsigned[0]!;
  assert.deepEqual([policy, rule, result, digest], [POLICY, "rules[3]", "fail", images["public/unsigned"]!.digest]);
  assert.equal(image, `${ref("public/unsigned")}@${images["public/unsigned"]!.digest}`, "judged at the digest its status reports");
  assert.match(
    message,
    /^no signatures found \(looked for Notary Project signatures referring to sha256:[0-9a-f]{64} in .*\/public\/unsigned\); attestors\[0\] needs its entry: notary release: no Notary Project signature found$/,
  );

  const untrusted = resultsOf("scan-untrusted");
  assert.equal(untrusted.length, 1, JSON.stringify(untrusted));
  assert.deepEqual(untrusted[0]!.slice(0, 3), [POLICY, "rules[3]", "fail"]);
  assert.match(untrusted[0]![5], /notary release: .*no certificate of the chain is in the certificates of notary release/);

  assert.equal(got.get(uids.get("scan-signed")!), undefined, `a COSE-signed image passes: ${JSON.stringify(got.get(uids.get("scan-signed")!))}`);
  assert.equal(
    got.get(uids.get("scan-private")!),
    undefined,
    `a private signed image is read with the pod's pull secret: ${JSON.stringify(got.get(uids.get("scan-private")!))}`,
  );
  assert.ok((await metric(/^imprimatur_scan_pods_total\{outcome="pass"\} (\d+)$/m)) >= 2);
});

test("certificates from a Secret of the namespace are read when needed: denied while the Secret is missing, admitted once it holds the root; a TrustRoot's stores serve an entry that names it", async () => {
  const missing = await denied("from-secret-missing", "public/from-secret");
  assert.match(
    missing,
    new RegExp(
      `denied by policy ${POLICY} rules\\[1\\]: notary from-secret: certificates k8s://${NS}/notation-ca/ca\\.crt: cannot read secret ${NS}/notation-ca: .*not found`,
    ),
  );
  const secret = await cluster.kubectl(["create", "-f", "-"], {
    input: JSON.stringify({ apiVersion: "v1", kind: "Secret", metadata: { name: "notation-ca", namespace: NS }, stringData: { "ca.crt": rootPem } }),
  });
  assert.equal(secret.code, 0, secret.stderr);
  // A Secret that could not be read is not remembered: the next admission reads it again.
  const pod = await admitted("from-secret", "public/from-secret");
  const record = verifiedRecord(pod, "public/from-secret");
  assert.equal(record.digest, images["public/from-secret"]!.digest);
  assert.match(
    record.signers[0]!,
    /^notary from-secret: x509 C=US, ST=WA, L=Seattle, O=Acme, CN=Release \(sha256:[0-9a-f]{64}\), identity "\*", JWS envelope of referrer /,
  );

  const fromRoot = await admitted("from-trustroot", "public/from-trustroot");
  assert.match(
    verifiedRecord(fromRoot, "public/from-trustroot").signers[0]!,
    /^notary from-trustroot: x509 C=US, ST=WA, L=Seattle, O=Acme, CN=Release .*COSE envelope/,
  );
});
