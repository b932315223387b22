// A pod admitted fail-open is found by the background scan, on a real etcd + kube-apiserver v1.20: the remote
// ImageReview backend is stopped while the pod is created, so `serve --fail-open` admits it (with the fail-open
// audit annotation); the scan, which cannot ask the backend either, reports an error for it (not fully judged),
// and once the backend is back judges it again within --scan-error-retry and reports the backend's denial.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { setTimeout as sleep } from "node:timers/promises";
import { startKubeCluster, untilWebhookActive, type KubeCluster, validatingWebhookConfiguration, webhookRule } from "../support/kube-cluster.ts";
import { startImprimatur, type ImprimaturProcess } from "../support/imprimatur-process.ts";
import { startConfiguredTestBackend, type TestBackend } from "../support/test-imagereview-backend.ts";
import { podYaml } from "../support/manifests.ts";
import { teardown } from "../support/teardown.ts";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const NS = "scan-fail-open";
let dir: string;
let cluster: KubeCluster;
let backend: TestBackend;
let server: ImprimaturProcess;

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "imprimatur-scan-fail-open-"));
  // The decision cache would answer the scan from the admission's fail-open: nothing is cached here.
  ({ backend } = await startConfiguredTestBackend(dir, { token: "token", timeout: "2s" }));
  await writeFile(
    join(dir, "policies.yaml"),
    "apiVersion: imprimatur.dev/v1alpha1\nkind: ImagePolicy\nmetadata: {name: any}\nspec: {rules: [{action: allow, images: ['*']}]}\n",
  );
  cluster = await startKubeCluster({ enableAdmissionPlugins: ["ValidatingAdmissionWebhook"] });
  assert.equal((await cluster.kubectl(["apply", "-k", join(ROOT, "deploy/crds/reports")])).code, 0);
  assert.equal((await cluster.kubectl(["wait", "--for=condition=Established", "crd", "--all", "--timeout=60s"])).code, 0);
  server = await startImprimatur([
    "--policies",
    join(dir, "policies.yaml"),
    "--config",
    join(dir, "config.yaml"),
    "--fail-open",
    "--allow-ttl",
    "0s",
    "--deny-ttl",
    "0s",
    "--kubeconfig",
    cluster.kubeconfig,
    "--background-scan",
    "--scan-error-retry",
    "2s",
    "--scan-lease",
    "default/imprimatur-scan",
  ]);
  const vwc = validatingWebhookConfiguration(server, {
    name: "imprimatur",
    webhookName: "images.imprimatur.dev",
    sideEffects: "NoneOnDryRun",
    rules: [webhookRule("pods", ["CREATE", "UPDATE"])],
    namespaceSelector: { matchLabels: { "scan-test": "yes" } },
  });
  assert.equal((await cluster.apply(vwc)).code, 0);
  assert.equal((await cluster.apply(JSON.stringify({ apiVersion: "v1", kind: "Namespace", metadata: { name: NS, labels: { "scan-test": "yes" } } }))).code, 0);
  await untilWebhookActive(cluster, podYaml("probe", NS, ["registry.example.com/blocked-probe:1"]), (probe) => probe.code !== 0);
});

after(() => teardown([() => server?.stop(), () => cluster?.stop(), () => backend?.stop(), () => dir && rm(dir, { recursive: true, force: true })]));

interface Report {
  metadata: { name: string };
  results?: Array<{ policy: string; rule?: string; result: string; message: string }>;
}

async function report(uid: string): Promise<Report | undefined> {
  const got = await cluster.kubectl(["get", "policyreports", "-n", NS, "-o", "json"]);
  assert.equal(got.code, 0, got.stderr);
  return (JSON.parse(got.stdout) as { items: Report[] }).items.find((r) => r.metadata.name === uid);
}

test("a pod admitted fail-open is reported as not fully judged, then, with the backend back, as the backend's denial", async () => {
  await backend.stop();
  let uid: string;
  try {
    const created = await cluster.kubectl(["create", "-o", "json", "-f", "-"], { input: podYaml("slipped", NS, ["registry.example.com/blocked-app:1"]) });
    assert.equal(created.code, 0, created.stderr);
    assert.match(created.stderr, /Warning: image policy backend scanner was unavailable/);
    uid = (JSON.parse(created.stdout) as { metadata: { uid: string } }).metadata.uid;
    const deadline = Date.now() + 60_000;
    let errored;
    while (!(errored = (await report(uid))?.results?.find((r) => r.result === "error")) && Date.now() < deadline) await sleep(300);
    assert.ok(errored, "an error result while the backend is down");
    assert.match(errored.message, /could not be asked, so this pod is not fully judged/);
  } finally {
    await backend.start();
  }
  const deadline = Date.now() + 60_000;
  let failed;
  while (!(failed = (await report(uid))?.results?.find((r) => r.result === "fail")) && Date.now() < deadline) await sleep(300);
  assert.ok(failed, "judged again with the backend back");
  assert.equal(failed.policy, "backend/scanner");
  assert.match(failed.message, /scanner found critical CVEs in registry\.example\.com\/blocked-app:1/);
  assert.equal(
    (await report(uid))?.results?.some((r) => r.result === "error"),
    false,
    "the error result is gone",
  );
});
