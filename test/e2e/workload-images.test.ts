// Fail fast at the workload: through a real etcd + kube-apiserver v1.20 and kubectl, with the validating
// webhook configuration `imprimatur serve` writes, a Deployment (and a CronJob) whose image breaks an
// ImagePolicy is refused at `kubectl create`, with the very message `imprimatur check` prints for the same
// file; a compliant one is admitted. The CLI gate and the cluster cannot disagree: they share one pipeline.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { stringify } from "yaml";
import { startKubeCluster, untilWebhookActive, type KubeCluster } from "../support/kube-cluster.ts";
import { startImprimatur, type ImprimaturProcess } from "../support/imprimatur-process.ts";
import { teardown } from "../support/teardown.ts";

const POLICIES = fileURLToPath(new URL("../fixtures/e2e-policies/", import.meta.url));
const BIN = fileURLToPath(new URL("../../bin/imprimatur.js", import.meta.url));
let dir: string;
let cluster: KubeCluster;
let server: ImprimaturProcess;

function deployment(name: string, image: string) {
  return {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name, namespace: "default" },
    spec: {
      selector: { matchLabels: { app: name } },
      template: { metadata: { labels: { app: name } }, spec: { containers: [{ name: "app", image }] } },
    },
  };
}

/** `imprimatur check` on the file, as CI would run it: its denial lines, without the "FILE Kind/name: denied: " prefix. */
function checkDenials(file: string): { code: number | null; denials: string[] } {
  const r = spawnSync(process.execPath, [BIN, "check", "--policies", POLICIES, "-f", file], { encoding: "utf8" });
  const denials = r.stdout
    .split("\n")
    .filter((l) => l.includes(": denied: "))
    .map((l) => l.slice(l.indexOf(": denied: ") + ": denied: ".length));
  return { code: r.status, denials };
}

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "imprimatur-e2e-workloads-"));
  cluster = await startKubeCluster({ enableAdmissionPlugins: ["ValidatingAdmissionWebhook"] });
  server = await startImprimatur(["--policies", POLICIES]);
  const applied = await cluster.kubectl(["apply", "-f", join(server.stateDir, "validating-webhook.yaml")]);
  assert.equal(applied.code, 0, applied.stderr);
  // Webhook configurations take effect asynchronously; wait until a denied Deployment is really refused.
  const probe = JSON.stringify(deployment("probe", "docker.io/library/nginx:1.25"));
  await untilWebhookActive(cluster, probe, (r) => r.code !== 0, { context: () => server.log() });
});

after(() => teardown([() => server?.stop(), () => cluster?.stop(), () => dir && rm(dir, { recursive: true, force: true })]));

test("a Deployment with a denied image is refused at creation with the message check prints for the same file", async () => {
  const file = join(dir, "bad-deploy.yaml");
  await writeFile(file, stringify(deployment("web", "docker.io/library/nginx:1.25")));
  const check = checkDenials(file);
  assert.equal(check.code, 1);
  assert.deepEqual(check.denials, [
    'image "docker.io/library/nginx:1.25" (spec.template.spec.containers[0].image) denied by policy trusted-registries default: only images from registry.example.com may run',
  ]);

  const created = await cluster.kubectl(["create", "-f", file]);
  assert.notEqual(created.code, 0, "the Deployment must be refused");
  assert.ok(created.stderr.includes(check.denials[0]!), `kubectl said: ${created.stderr}`);
  const listed = await cluster.kubectl(["get", "deployment", "web", "--ignore-not-found", "-o", "name"]);
  assert.equal(listed.stdout.trim(), "", "nothing was stored");
});

test("a compliant Deployment is admitted, and check agrees", async () => {
  const file = join(dir, "good-deploy.yaml");
  await writeFile(file, stringify(deployment("api", "registry.example.com/team/api:2.1")));
  assert.equal(checkDenials(file).code, 0);
  const created = await cluster.kubectl(["create", "-f", file]);
  assert.equal(created.code, 0, created.stderr);
});

test("a CronJob's pod template and a Pod get the same treatment; updates that change no image are not judged", async () => {
  const cron = {
    apiVersion: "batch/v1beta1",
    kind: "CronJob",
    metadata: { name: "nightly", namespace: "default" },
    spec: {
      schedule: "0 3 * * *",
      jobTemplate: { spec: { template: { spec: { restartPolicy: "Never", containers: [{ name: "job", image: "busybox:latest" }] } } } },
    },
  };
  const file = join(dir, "cron.yaml");
  await writeFile(file, stringify(cron));
  const check = checkDenials(file);
  assert.equal(check.code, 1);
  const created = await cluster.kubectl(["create", "-f", file]);
  assert.notEqual(created.code, 0);
  for (const d of check.denials) assert.ok(created.stderr.includes(d), `expected ${d} in ${created.stderr}`);

  // The admitted Deployment from the previous test: a label change passes without re-judging its image.
  const labelled = await cluster.kubectl(["label", "deployment", "api", "tier=backend"]);
  assert.equal(labelled.code, 0, labelled.stderr);
  const retagged = await cluster.kubectl(["set", "image", "deployment/api", "app=docker.io/library/nginx:1.25"]);
  assert.notEqual(retagged.code, 0, "a changed image is judged again");
  assert.match(retagged.stderr, /spec\.template\.spec\.containers\[0\]\.image\) denied by policy trusted-registries default/);
});
