// Authenticated callers and clusters sharing one `imprimatur serve`, on two real kube-apiservers v1.20. Each
// apiserver presents its credentials from its --admission-control-config-file: cluster-a a client certificate
// (CN apiserver-a, O cluster-a) issued by the --client-ca, cluster-b a bearer token from the --caller-tokens
// file; both for the validating webhook (the WebhookAdmission kubeConfigFile, whose users are named by the
// webhook's host:port) and for the ImagePolicyWebhook (its own kubeconfig). Each cluster gets its own policies
// (spec.clusters); a webhook the apiserver has no credentials for is refused with 401.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { stringify } from "yaml";
import { tokenDigest } from "../../src/caller-auth/caller-tokens.ts";
import { backendKubeconfig } from "../support/backend-kubeconfig.ts";
import { createClientCa, randomToken, type ClientCa } from "../support/caller-credentials.ts";
import { postJson } from "../support/https-client.ts";
import { startImprimatur, type ImprimaturProcess } from "../support/imprimatur-process.ts";
import { startKubeCluster, untilWebhookActive, urlWebhook, webhookConfiguration, webhookRule, type KubeCluster } from "../support/kube-cluster.ts";
import { podReview } from "../support/admission.ts";
import { podYaml } from "../support/manifests.ts";
import { teardown } from "../support/teardown.ts";

const POLICIES = `apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: { name: cluster-a-rules }
spec:
  clusters: [cluster-a]
  rules:
    - { action: deny, images: ["docker.io/library/nginx*"], message: "cluster-a does not run nginx" }
    - { action: allow, images: ["*"] }
  breakGlass: { allowed: true }
---
apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: { name: cluster-b-rules }
spec:
  clusters: [cluster-b]
  rules:
    - { action: deny, images: ["docker.io/library/busybox*"], message: "cluster-b does not run busybox" }
    - { action: allow, images: ["*"] }
`;
const NGINX = "docker.io/library/nginx:1.25";
const BUSYBOX = "docker.io/library/busybox:1.36";

let dir: string;
let clientCa: ClientCa;
let imprimatur: ImprimaturProcess;
let clusterA: KubeCluster;
let clusterB: KubeCluster;
const tokenB = randomToken();

/** The kubeconfig of the WebhookAdmission configuration: credentials by the webhook's host:port. */
function webhookKubeconfig(users: Array<{ name: string; user: Record<string, string> }>): string {
  return stringify({ apiVersion: "v1", kind: "Config", users });
}

/** The ImagePolicyWebhook's kubeconfig: the server is the /imagereview URL, with our CA and these credentials. */
function imagePolicyKubeconfig(user: Record<string, string>): string {
  return backendKubeconfig({ server: `${imprimatur.baseUrl}/imagereview`, caPem: imprimatur.ca, user });
}

function admissionConfiguration(webhookKubeconfigPath: string, imagePolicyKubeconfigPath: string): string {
  return stringify({
    apiVersion: "apiserver.config.k8s.io/v1",
    kind: "AdmissionConfiguration",
    plugins: [
      {
        name: "ValidatingAdmissionWebhook",
        configuration: { apiVersion: "apiserver.config.k8s.io/v1", kind: "WebhookAdmissionConfiguration", kubeConfigFile: webhookKubeconfigPath },
      },
      {
        name: "ImagePolicyWebhook",
        configuration: { imagePolicy: { kubeConfigFile: imagePolicyKubeconfigPath, allowTTL: 1, denyTTL: 1, retryBackoff: 500, defaultAllow: false } },
      },
    ],
  });
}

/** /validate for Deployments (pods go through the ImagePolicyWebhook), and a webhook on a host with no credentials. */
function webhooks(): string {
  return webhookConfiguration("ValidatingWebhookConfiguration", "imprimatur", [
    urlWebhook("workloads.imprimatur.dev", `${imprimatur.baseUrl}/validate`, { caPem: imprimatur.ca, rules: [webhookRule("apps/deployments")] }),
    // The same server by another name: the apiserver's kubeconfig has no user for localhost, so it sends nothing.
    urlWebhook("uncredentialed.imprimatur.dev", `https://localhost:${imprimatur.port}/validate`, { caPem: imprimatur.ca, rules: [webhookRule("configmaps")] }),
  ]);
}

function deploymentYaml(name: string, images: string[]): string {
  return JSON.stringify({
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name, namespace: "default" },
    spec: {
      selector: { matchLabels: { app: name } },
      template: { metadata: { labels: { app: name } }, spec: { containers: images.map((image, i) => ({ name: `c${i}`, image })) } },
    },
  });
}

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "imprimatur-e2e-callers-"));
  clientCa = await createClientCa();
  const certA = await clientCa.issue("/CN=apiserver-a/O=cluster-a");
  await writeFile(join(dir, "policies.yaml"), POLICIES);
  await writeFile(
    join(dir, "callers.yaml"),
    stringify({
      apiVersion: "imprimatur.dev/v1alpha1",
      kind: "CallerTokens",
      callers: [{ name: "apiserver-b", cluster: "cluster-b", tokenSha256: tokenDigest(tokenB) }],
    }),
  );
  imprimatur = await startImprimatur([
    "--policies",
    join(dir, "policies.yaml"),
    "--client-ca",
    clientCa.certPath,
    "--client-ca-allowed-names",
    "apiserver-a",
    "--caller-tokens",
    join(dir, "callers.yaml"),
  ]);

  const host = `127.0.0.1:${imprimatur.port}`;
  const certUser = {
    "client-certificate-data": Buffer.from(certA.certPem).toString("base64"),
    "client-key-data": Buffer.from(certA.keyPem).toString("base64"),
  };
  const files = {
    webhookA: join(dir, "webhook-a.kubeconfig"),
    imagePolicyA: join(dir, "imagepolicy-a.kubeconfig"),
    webhookB: join(dir, "webhook-b.kubeconfig"),
    imagePolicyB: join(dir, "imagepolicy-b.kubeconfig"),
  };
  await writeFile(files.webhookA, webhookKubeconfig([{ name: host, user: certUser }]));
  await writeFile(files.imagePolicyA, imagePolicyKubeconfig(certUser));
  await writeFile(files.webhookB, webhookKubeconfig([{ name: host, user: { token: tokenB } }]));
  await writeFile(files.imagePolicyB, imagePolicyKubeconfig({ token: tokenB }));

  const plugins = ["ImagePolicyWebhook", "ValidatingAdmissionWebhook"];
  [clusterA, clusterB] = await Promise.all([
    startKubeCluster({ enableAdmissionPlugins: plugins, admissionConfigYaml: admissionConfiguration(files.webhookA, files.imagePolicyA) }),
    startKubeCluster({ enableAdmissionPlugins: plugins, admissionConfigYaml: admissionConfiguration(files.webhookB, files.imagePolicyB) }),
  ]);
  for (const [cluster, denied] of [
    [clusterA, NGINX],
    [clusterB, BUSYBOX],
  ] as const) {
    const applied = await cluster.apply(webhooks());
    assert.equal(applied.code, 0, applied.stderr);
    await untilWebhookActive(cluster, deploymentYaml("probe", [denied]), (probe) => probe.code !== 0, { context: () => imprimatur.log() });
  }
});

after(() =>
  teardown([
    () => clusterA?.stop(),
    () => clusterB?.stop(),
    () => imprimatur?.stop(),
    () => clientCa?.remove(),
    () => dir && rm(dir, { recursive: true, force: true }),
  ]),
);

test("the ImagePolicyWebhook reaches serve with a client certificate (cluster-a) and with a token (cluster-b), each under its own policies", async () => {
  const nginxInA = await clusterA.apply(podYaml("web", "default", [NGINX]));
  assert.notEqual(nginxInA.code, 0);
  assert.match(nginxInA.stderr, /image policy webhook backend denied one or more images: .*cluster-a does not run nginx/);
  const busyboxInA = await clusterA.apply(podYaml("box", "default", [BUSYBOX]));
  assert.equal(busyboxInA.code, 0, busyboxInA.stderr);

  const busyboxInB = await clusterB.apply(podYaml("box", "default", [BUSYBOX]));
  assert.notEqual(busyboxInB.code, 0);
  assert.match(busyboxInB.stderr, /image policy webhook backend denied one or more images: .*cluster-b does not run busybox/);
  const nginxInB = await clusterB.apply(podYaml("web", "default", [NGINX]));
  assert.equal(nginxInB.code, 0, nginxInB.stderr);
});

test("the validating webhook reaches serve with a client certificate (cluster-a) and with a token (cluster-b), each under its own policies", async () => {
  const nginxInA = await clusterA.apply(deploymentYaml("web", [NGINX]));
  assert.notEqual(nginxInA.code, 0);
  assert.match(nginxInA.stderr, /admission webhook "workloads\.imprimatur\.dev" denied the request: .*cluster-a does not run nginx/);
  assert.equal((await clusterA.apply(deploymentYaml("box", [BUSYBOX]))).code, 0);

  const busyboxInB = await clusterB.apply(deploymentYaml("box", [BUSYBOX]));
  assert.notEqual(busyboxInB.code, 0);
  assert.match(busyboxInB.stderr, /admission webhook "workloads\.imprimatur\.dev" denied the request: .*cluster-b does not run busybox/);
  assert.equal((await clusterB.apply(deploymentYaml("web", [NGINX]))).code, 0);
});

test("an audit record names the apiserver that sent the admission and its cluster", async () => {
  // A break-glass attempt over the ImagePolicyWebhook: an ImageReview names no user to ask about, so it is refused
  // (docs/break-glass.md) and the attempt is recorded, with its sender.
  const annotations = { "break-glass.image-policy.k8s.io/reason": "incident", "break-glass.image-policy.k8s.io/ticket": "INC-4242" };
  const res = await clusterA.apply(podYaml("glass", "default", [NGINX], annotations));
  assert.notEqual(res.code, 0);
  assert.match(res.stderr, /an ImageReview names no user to ask about/);
  const records = (await readFile(join(imprimatur.stateDir, "audit.jsonl"), "utf8"))
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l));
  const record = records.find((r) => r.ticket === "INC-4242");
  assert.ok(record, "the break-glass attempt is recorded");
  assert.equal(record.event, "break-glass-refused");
  assert.equal(record.endpoint, "imagereview");
  assert.deepEqual(record.caller, { authenticated: true, authentication: "client-certificate", name: "apiserver-a", cluster: "cluster-a" });
});

test("an AdmissionReview without the required client certificate or token is refused with 401", async () => {
  // Through an apiserver that has no credentials for the webhook's host: the call fails, so the create does.
  const refused = await clusterA.kubectl(["create", "configmap", "settings", "--from-literal=a=b"]);
  assert.notEqual(refused.code, 0);
  assert.match(
    refused.stderr,
    /failed calling webhook "uncredentialed\.imprimatur\.dev": unauthorized: no credentials: present a client certificate or bearer token/,
  );
  const log = await imprimatur.log();
  assert.match(log, /"msg":"caller refused"/);
  assert.match(log, /Callers must authenticate: add kube-apiserver's client certificate or token to these kubeconfigs/, "serve said so at start");
  // And directly, as anyone who can reach the port: 401 on every review endpoint.
  for (const path of ["/validate", "/mutate", "/imagereview"]) {
    const res = await postJson(`${imprimatur.baseUrl}${path}`, imprimatur.ca, podReview({ images: [NGINX] }));
    assert.equal(res.status, 401, path);
    assert.match(res.body.message, /unauthorized: no credentials: present a client certificate or bearer token/);
  }
});
