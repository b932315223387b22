// Clusters sharing one `imprimatur serve` read each their own cluster: two real kube-apiservers v1.20 hold the
// namespaces and pull secrets, one serve judges their callers' AdmissionReviews (each cluster's apiserver
// presents its bearer token). serve's own kubeconfig is cluster-a's (--cluster-name cluster-a); cluster-b's
// comes with --cluster-kubeconfig; cluster-c has none. Namespace `apps` is exempt from a namespaceSelector-bound
// policy in cluster-a only, and a `regcred` Secret holds the registry's password in cluster-a, a wrong one in
// cluster-b: each cluster's pods are judged by their own cluster's labels and pinned with their own cluster's
// secrets, and cluster-c's reviews that need a read are refused with the reason, never answered from cluster-a.
// A `k8s://apps/signing` key holds the key that signed an image in cluster-a, another key in cluster-b. serve reads
// policy resources from each cluster (--policy-crds): a namespace owner's NamespacedImagePolicy in cluster-a is
// cluster-a's, and cluster-b's own ImagePolicies and NamespacedImagePolicies judge cluster-b's requests only.
// With --pod-security, namespace `psa` enforces baseline in cluster-b only, where a privileged pod runs.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { stringify } from "yaml";
import { randomToken } from "../support/caller-credentials.ts";
import { postJson } from "../support/https-client.ts";
import { startImprimatur, type ImprimaturProcess } from "../support/imprimatur-process.ts";
import { createPullSecret, startKubeCluster, type KubeCluster } from "../support/kube-cluster.ts";
import { podReview } from "../support/admission.ts";
import { buildOciLayout } from "../support/oci-layout.ts";
import { startRegistry, type TestRegistry } from "../support/registry.ts";
import { generateSigningKey } from "../support/signer/keys.ts";
import { createMockSigstore } from "../support/signer/mock-sigstore.ts";
import { pushCosignSignatures } from "../support/signer/registry-signatures.ts";
import { teardown } from "../support/teardown.ts";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const NS = "apps";
const PSA = "psa";
const PULLER = { username: "puller", password: "puller-secret-1" };
const NGINX = "docker.io/library/nginx:1.25";
const tokens = { a: randomToken(), b: randomToken(), c: randomToken() };

let dir: string;
let registry: TestRegistry;
let clusterA: KubeCluster;
let clusterB: KubeCluster;
let imprimatur: ImprimaturProcess;
let privateImage: string;
/** Signed by the key cluster-a's Secret holds (by digest: a rule with attestors verifies digests). */
let keyedImage: string;
/** Signed by cluster-b's release key, its signature logged in the Rekor of cluster-b's own TrustRoot. */
let loggedImage: string;

function policies(host: string): string {
  return [
    {
      apiVersion: "imprimatur.dev/v1alpha1",
      kind: "ImagePolicy",
      metadata: { name: "no-nginx-unless-exempt" },
      spec: {
        namespaceSelector: { matchExpressions: [{ key: "exempt", operator: "NotIn", values: ["true"] }] },
        rules: [{ action: "deny", images: ["docker.io/library/nginx*"], message: "nginx runs in exempt namespaces only" }],
        default: "allow",
      },
    },
    {
      apiVersion: "imprimatur.dev/v1alpha1",
      kind: "ImagePolicy",
      metadata: { name: "signed-by-the-cluster-key" },
      spec: {
        rules: [
          { action: "allow", images: [`${host}/keyed/*`], attestors: [{ entries: [{ staticKey: { keyRef: `k8s://${NS}/signing`, ignoreTlog: true } }] }] },
        ],
        default: "allow",
      },
    },
    {
      apiVersion: "imprimatur.dev/v1alpha1",
      kind: "ImagePolicy",
      metadata: { name: "pin-private" },
      spec: { rules: [{ action: "allow", images: [`${host}/private/*`], digestMutate: true }], default: "allow" },
    },
  ]
    .map((p) => stringify(p))
    .join("---\n");
}

/** A pod review of `images` in NS, naming the `regcred` pull secret unless `pullSecret` is false. */
function review(images: string[], pullSecret: boolean) {
  const body = podReview({ images, namespace: NS });
  if (pullSecret) (body.request.object.spec as Record<string, unknown>).imagePullSecrets = [{ name: "regcred" }];
  return body;
}

async function ask(path: "/validate" | "/mutate", token: string, images: string[], pullSecret = true) {
  const res = await postJson(`${imprimatur.baseUrl}${path}`, imprimatur.ca, review(images, pullSecret), { headers: { authorization: `Bearer ${token}` } });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body.response as { allowed: boolean; status?: { message?: string }; patch?: string };
}

/** The reasons of the Events in NS. */
async function eventReasons(cluster: KubeCluster): Promise<string[]> {
  const r = await cluster.kubectl(["get", "events", "-n", NS, "-o", "json"]);
  assert.equal(r.code, 0, r.stderr);
  return (JSON.parse(r.stdout) as { items: Array<{ reason: string }> }).items.map((e) => e.reason);
}

async function until(what: string, check: () => Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

async function kubectlOk(cluster: KubeCluster, args: string[]): Promise<void> {
  const r = await cluster.kubectl(args);
  assert.equal(r.code, 0, r.stderr);
}

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "imprimatur-e2e-cluster-reads-"));
  registry = await startRegistry({
    auth: "token",
    publicRepositories: ["keyed/app", "logged/app"],
    users: [
      { username: "pusher", password: "pusher-secret-1" },
      { ...PULLER, pull: ["private/**"], push: false },
    ],
  });
  const layout = buildOciLayout({ tag: "1.0", seed: "cluster-reads-1" });
  await registry.push(layout.layoutDir, "1.0", "private/app", "1.0");
  await rm(layout.layoutDir, { recursive: true, force: true });
  privateImage = `${registry.host}/private/app:1.0`;
  const [signingKey, otherKey] = [generateSigningKey("ecdsa-p256"), generateSigningKey("ecdsa-p256")];
  const keyed = buildOciLayout({ tag: "1", seed: "cluster-reads-keyed" });
  await registry.push(keyed.layoutDir, "1", "keyed/app", "1");
  await rm(keyed.layoutDir, { recursive: true, force: true });
  await pushCosignSignatures({ registry, repository: "keyed/app", digest: keyed.digest, signers: [{ key: signingKey, hash: "sha256" }] });
  keyedImage = `${registry.host}/keyed/app@${keyed.digest}`;
  // cluster-b's own TrustRoot (a mock Sigstore) holds the log that vouches for this signature: only a
  // verification against that root, which no other cluster has, can admit it.
  const sigstore = await createMockSigstore({ name: "cluster-b" });
  const releaseKey = generateSigningKey("ecdsa-p256");
  const logged = buildOciLayout({ tag: "1", seed: "cluster-reads-logged" });
  await registry.push(logged.layoutDir, "1", "logged/app", "1");
  await rm(logged.layoutDir, { recursive: true, force: true });
  await pushCosignSignatures({ registry, repository: "logged/app", digest: logged.digest, signers: [{ key: releaseKey, rekor: sigstore, hash: "sha256" }] });
  loggedImage = `${registry.host}/logged/app@${logged.digest}`;

  [clusterA, clusterB] = await Promise.all([startKubeCluster(), startKubeCluster()]);
  for (const cluster of [clusterA, clusterB]) await kubectlOk(cluster, ["create", "namespace", NS]);
  await kubectlOk(clusterA, ["label", "namespace", NS, "exempt=true"]);
  for (const cluster of [clusterA, clusterB]) await kubectlOk(cluster, ["create", "namespace", PSA]);
  await kubectlOk(clusterB, ["label", "namespace", PSA, "pod-security.kubernetes.io/enforce=baseline"]);
  // Created straight through the API (no webhook in front of it): a pod that baseline refuses.
  const priv = {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "priv", namespace: PSA },
    spec: { containers: [{ name: "c", image: NGINX, securityContext: { privileged: true } }] },
  };
  assert.equal((await clusterB.apply(JSON.stringify(priv))).code, 0);
  for (const cluster of [clusterA, clusterB]) {
    await kubectlOk(cluster, ["apply", "-k", join(ROOT, "deploy/crds")]);
    await kubectlOk(cluster, ["wait", "--for=condition=Established", "crd", "--all", "--timeout=60s"]);
  }
  // cluster-b's own: an ImagePolicy named as one of the server's, one that narrows itself to cluster-a (which it
  // cannot reach), and a namespace owner's policy.
  // cluster-b's TrustRoot, and its policy that needs it.
  for (const object of [
    { apiVersion: "imprimatur.dev/v1alpha1", kind: "TrustRoot", metadata: { name: "b-root" }, spec: { trustedRoot: sigstore.trustedRoot } },
    {
      apiVersion: "imprimatur.dev/v1alpha1",
      kind: "ImagePolicy",
      metadata: { name: "b-release" },
      spec: {
        rules: [
          {
            action: "allow",
            images: [`${registry.host}/logged/*`],
            attestors: [{ entries: [{ staticKey: { key: releaseKey.publicKeyPem, trustRoot: "b-root" } }] }],
          },
        ],
        default: "allow",
      },
    },
  ]) {
    const applied = await clusterB.apply(JSON.stringify(object));
    assert.equal(applied.code, 0, applied.stderr);
  }
  for (const [kind, name, image, clusters] of [
    ["ImagePolicy", "no-nginx-unless-exempt", "docker.io/library/httpd*", undefined],
    ["ImagePolicy", "reach-a", "docker.io/library/postgres*", ["cluster-a"]],
    ["NamespacedImagePolicy", "no-memcached", "docker.io/library/memcached*", undefined],
  ] as const) {
    const spec = {
      ...(clusters ? { clusters } : {}),
      rules: [{ action: "deny", images: [image], message: `${name}: cluster-b's own` }],
      default: "allow",
    };
    const metadata = kind === "NamespacedImagePolicy" ? { name, namespace: NS } : { name };
    const applied = await clusterB.apply(JSON.stringify({ apiVersion: "imprimatur.dev/v1alpha1", kind, metadata, spec }));
    assert.equal(applied.code, 0, applied.stderr);
  }
  // cluster-a's namespace owner: one policy for its namespace, and one that names cluster-b to reach its namespace too.
  for (const [name, image, clusters] of [
    ["no-busybox", "docker.io/library/busybox*", undefined],
    ["reach-b", "docker.io/library/redis*", ["cluster-b"]],
  ] as const) {
    const spec = {
      ...(clusters ? { clusters } : {}),
      rules: [{ action: "deny", images: [image], message: `${name}: a tenant of cluster-a` }],
      default: "allow",
    };
    const applied = await clusterA.apply(
      JSON.stringify({ apiVersion: "imprimatur.dev/v1alpha1", kind: "NamespacedImagePolicy", metadata: { name, namespace: NS }, spec }),
    );
    assert.equal(applied.code, 0, applied.stderr);
  }
  await createPullSecret(clusterA, NS, "regcred", { host: registry.host, username: PULLER.username }, PULLER.password);
  await createPullSecret(clusterB, NS, "regcred", { host: registry.host, username: PULLER.username }, "not-the-password");
  for (const [cluster, key] of [
    [clusterA, signingKey],
    [clusterB, otherKey],
  ] as const)
    await kubectlOk(cluster, ["create", "secret", "generic", "signing", "-n", NS, `--from-literal=cosign.pub=${key.publicKeyPem}`]);

  await writeFile(join(dir, "policies.yaml"), policies(registry.host));
  await writeFile(join(dir, "registries.yaml"), registry.registryConfig());
  await writeFile(
    join(dir, "callers.yaml"),
    stringify({
      apiVersion: "imprimatur.dev/v1alpha1",
      kind: "CallerTokens",
      callers: [
        { name: "apiserver-a", cluster: "cluster-a", token: tokens.a },
        { name: "apiserver-b", cluster: "cluster-b", token: tokens.b },
        { name: "apiserver-c", cluster: "cluster-c", token: tokens.c },
      ],
    }),
  );
  imprimatur = await startImprimatur([
    "--policies",
    join(dir, "policies.yaml"),
    "--registries",
    join(dir, "registries.yaml"),
    "--kubeconfig",
    clusterA.kubeconfig,
    "--cluster-name",
    "cluster-a",
    "--cluster-kubeconfig",
    `cluster-b=${clusterB.kubeconfig}`,
    "--caller-tokens",
    join(dir, "callers.yaml"),
    "--policy-crds",
    "--pod-security",
  ]);
});

after(() =>
  teardown([
    () => imprimatur?.stop(),
    () => clusterA?.stop(),
    () => clusterB?.stop(),
    () => registry?.stop(),
    () => dir && rm(dir, { recursive: true, force: true }),
  ]),
);

test("another cluster's pods are judged by that cluster's namespace labels, never the server's own cluster's", async () => {
  assert.equal((await ask("/validate", tokens.a, [NGINX])).allowed, true, "apps is exempt in cluster-a");
  const inB = await ask("/validate", tokens.b, [NGINX]);
  assert.equal(inB.allowed, false, "apps is not exempt in cluster-b");
  assert.match(inB.status?.message ?? "", /nginx runs in exempt namespaces only/);
});

test("another cluster's pod naming regcred is pinned with that cluster's regcred, never the server's own cluster's, and its Event goes to its cluster", async () => {
  const inA = await ask("/mutate", tokens.a, [privateImage]);
  assert.equal(inA.allowed, true, JSON.stringify(inA));
  assert.match(Buffer.from(inA.patch ?? "", "base64").toString("utf8"), /@sha256:/, "cluster-a's regcred reads the private image");
  const inB = await ask("/mutate", tokens.b, [privateImage]);
  const patched = Buffer.from(inB.patch ?? "", "base64").toString("utf8");
  assert.doesNotMatch(patched, /@sha256:/, "cluster-b's regcred holds a wrong password: nothing is pinned with cluster-a's");
  assert.equal(inB.allowed, false, "the tag cannot be resolved with cluster-b's secret, and the server fails closed");
  // Each pin's Event goes to the pod's own cluster.
  await until("cluster-b's ImageTagUnresolved Event", async () => (await eventReasons(clusterB)).includes("ImageTagUnresolved"));
  await until("cluster-a's ImagesPinned Event", async () => (await eventReasons(clusterA)).includes("ImagesPinned"));
  assert.deepEqual(await eventReasons(clusterA), ["ImagesPinned"]);
  assert.deepEqual(await eventReasons(clusterB), ["ImageTagUnresolved"]);
});

test("a cluster with no kubeconfig: a review that needs its namespace labels is refused with the reason", async () => {
  const inC = await ask("/validate", tokens.c, [NGINX]);
  assert.equal(inC.allowed, false);
  assert.match(inC.status?.message ?? "", /cluster "cluster-c".*no kubeconfig.*--cluster-kubeconfig cluster-c=FILE/);
  const pinned = await ask("/mutate", tokens.c, [privateImage]);
  assert.equal(pinned.allowed, false);
  assert.match(pinned.status?.message ?? "", /cluster "cluster-c".*no kubeconfig/);
  assert.doesNotMatch(Buffer.from(pinned.patch ?? "", "base64").toString("utf8"), /@sha256:/, "never pinned with cluster-a's regcred");
});

test("another cluster's k8s:// key is read from that cluster's Secret, never the server's own cluster's", async () => {
  const inA = await ask("/validate", tokens.a, [keyedImage], false);
  assert.equal(inA.allowed, true, JSON.stringify(inA));
  const inB = await ask("/validate", tokens.b, [keyedImage], false);
  assert.equal(inB.allowed, false, "cluster-b's Secret holds another key");
  assert.match(inB.status?.message ?? "", /key k8s:\/\/apps\/signing: no signature by this key/);
});

test("a namespace owner's policy of the server's own cluster never judges another cluster's namespace of the same name", async () => {
  const busybox = "docker.io/library/busybox:1.36";
  await until("cluster-a's NamespacedImagePolicy in force", async () => !(await ask("/validate", tokens.a, [busybox], false)).allowed);
  assert.equal((await ask("/validate", tokens.b, [busybox], false)).allowed, true, "cluster-b's apps is not cluster-a's");
  const redis = "docker.io/library/redis:7";
  assert.equal((await ask("/validate", tokens.b, [redis], false)).allowed, true, "naming cluster-b in spec.clusters does not reach it");
});

test("another cluster's own policy resources judge that cluster's requests only, under the cluster's name, with their status written there", async () => {
  const httpd = "docker.io/library/httpd:2.4";
  const inB = await ask("/validate", tokens.b, [httpd], false);
  assert.equal(inB.allowed, false, "cluster-b's own ImagePolicy");
  assert.match(inB.status?.message ?? "", /cluster-b:no-nginx-unless-exempt/);
  assert.match(inB.status?.message ?? "", /no-nginx-unless-exempt: cluster-b's own/);
  assert.equal((await ask("/validate", tokens.a, [httpd], false)).allowed, true, "cluster-b's policy never judges cluster-a");
  // The server's policy of the same name still judges cluster-b: both are in force there.
  assert.match((await ask("/validate", tokens.b, [NGINX])).status?.message ?? "", /nginx runs in exempt namespaces only/);

  const memcached = "docker.io/library/memcached:1.6";
  const tenant = await ask("/validate", tokens.b, [memcached], false);
  assert.equal(tenant.allowed, false, "cluster-b's namespace owner decides for cluster-b's apps");
  assert.match(tenant.status?.message ?? "", /no-memcached: cluster-b's own/);
  assert.equal((await ask("/validate", tokens.a, [memcached], false)).allowed, true, "cluster-a's apps is not cluster-b's");

  const postgres = "docker.io/library/postgres:16";
  assert.equal((await ask("/validate", tokens.a, [postgres], false)).allowed, true, "naming cluster-a in spec.clusters does not reach it");
  assert.equal((await ask("/validate", tokens.b, [postgres], false)).allowed, true, "nor cluster-b, which it narrowed itself away from");

  // Its status is written in cluster-b (by the server, soon after the load).
  await until("cluster-b's ImagePolicy Ready=True", async () => {
    const r = await clusterB.kubectl(["get", "imagepolicy", "no-nginx-unless-exempt", "-o", "json"]);
    assert.equal(r.code, 0, r.stderr);
    const conditions = (JSON.parse(r.stdout) as { status?: { conditions?: Array<{ type: string; status: string }> } }).status?.conditions ?? [];
    return conditions.some((c) => c.type === "Ready" && c.status === "True");
  });

  // cluster-b's own TrustRoot verifies the signature its policy needs: the log that vouches for it is in no other
  // cluster's roots (nor the server's), so only a verification against cluster-b's admits the image.
  const logged = await ask("/validate", tokens.b, [loggedImage], false);
  assert.equal(logged.allowed, true, JSON.stringify(logged));
  assert.equal((await ask("/validate", tokens.a, [loggedImage], false)).allowed, true, "cluster-a has no such policy");

  // Deleted in cluster-b: its requests are no longer judged by it.
  await kubectlOk(clusterB, ["delete", "imagepolicy", "no-nginx-unless-exempt"]);
  await until("cluster-b's deleted policy out of force", async () => (await ask("/validate", tokens.b, [httpd], false)).allowed);
});

/** A privileged pod in PSA, as kube-apiserver sends it. */
function privilegedPodReview() {
  const body = podReview({ images: ["docker.io/library/alpine:3.20"], namespace: PSA });
  (body.request.object.spec.containers[0] as Record<string, unknown>).securityContext = { privileged: true };
  return body;
}

/** An update of namespace PSA that sets its enforce level to baseline. */
function namespaceUpdateReview() {
  const namespace = (labels: Record<string, string>) => ({ apiVersion: "v1", kind: "Namespace", metadata: { name: PSA, labels } });
  return {
    apiVersion: "admission.k8s.io/v1",
    kind: "AdmissionReview",
    request: {
      uid: "namespace-update",
      kind: { group: "", version: "v1", kind: "Namespace" },
      resource: { group: "", version: "v1", resource: "namespaces" },
      name: PSA,
      operation: "UPDATE",
      userInfo: { username: "alice" },
      object: namespace({ "pod-security.kubernetes.io/enforce": "baseline" }),
      oldObject: namespace({}),
    },
  };
}

test("Pod Security Admission reads the caller's cluster: its namespace's level, and its pods for a namespace check", async () => {
  const post = async (token: string, body: unknown) => {
    const res = await postJson(`${imprimatur.baseUrl}/validate`, imprimatur.ca, body, { headers: { authorization: `Bearer ${token}` } });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    return res.body.response as { allowed: boolean; status?: { message?: string }; warnings?: string[] };
  };
  assert.equal((await post(tokens.a, privilegedPodReview())).allowed, true, "psa enforces nothing in cluster-a");
  const inB = await post(tokens.b, privilegedPodReview());
  assert.equal(inB.allowed, false, "psa enforces baseline in cluster-b");
  assert.match(inB.status?.message ?? "", /violates PodSecurity "baseline:latest"/);
  const checkedInB = await post(tokens.b, namespaceUpdateReview());
  assert.match((checkedInB.warnings ?? []).join("\n"), /priv/, "cluster-b's privileged pod is named");
  const checkedInA = await post(tokens.a, namespaceUpdateReview());
  assert.doesNotMatch((checkedInA.warnings ?? []).join("\n"), /priv/, "cluster-a has no such pod");
});
