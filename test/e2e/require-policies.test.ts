// `serve --policy-crds --require-policies` (as deploy/ runs it) on a real kube-apiserver v1.20: a fresh install
// has no policy yet; instead of admitting everything the server says it is not ready and refuses every review,
// naming the flag, until deploy/default-policies is applied; deleting the last policy closes the gate again.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { startKubeCluster, type KubeCluster } from "../support/kube-cluster.ts";
import { startImprimatur, type ImprimaturProcess } from "../support/imprimatur-process.ts";
import { imageReview, podReview } from "../support/admission.ts";
import { getText, postJson } from "../support/https-client.ts";
import { teardown } from "../support/teardown.ts";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
let cluster: KubeCluster;
let server: ImprimaturProcess;

before(async () => {
  cluster = await startKubeCluster();
  const installed = await cluster.kubectl(["apply", "-k", `${ROOT}deploy/crds`]);
  assert.equal(installed.code, 0, installed.stderr);
  const established = await cluster.kubectl(["wait", "--for=condition=Established", "crd", "--all", "--timeout=60s"]);
  assert.equal(established.code, 0, established.stderr);
  server = await startImprimatur(["--kubeconfig", cluster.kubeconfig, "--policy-crds", "--require-policies"], { until: "healthy" });
});

after(() => teardown([() => server?.stop(), () => cluster?.stop()]));

const validate = async (image: string) =>
  (await postJson(`${server.baseUrl}/validate`, server.ca, podReview({ images: [image], namespace: "team" }))).body.response;
const review = async (image: string) => (await postJson(`${server.baseUrl}/imagereview`, server.ca, imageReview([image], "team"))).body.status;
const readyz = () => getText(`${server.baseUrl}/readyz`, server.ca);

async function until(what: string, check: () => Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}\n${await server.log()}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

test("with no policy in force: not ready, and every review refused with the reason", async () => {
  const ready = await readyz();
  assert.equal(ready.status, 503);
  assert.match(ready.text, /no policy is in force yet \(--require-policies\)/);
  const response = await validate("registry.example.com/app:1.0");
  assert.equal(response.allowed, false);
  assert.match(response.status.message, /no policy is in force yet, and the server requires one \(serve --require-policies\)/);
  const status = await review("registry.example.com/app:1.0");
  assert.equal(status.allowed, false);
  assert.match(status.reason, /serve --require-policies/);
  assert.match(await server.log(), /no policy is loaded: every request is refused until one is \(--require-policies\)/);
});

test("deploy/default-policies puts the default policy in force: ready, and pods judged by it", async () => {
  const applied = await cluster.kubectl(["apply", "-k", `${ROOT}deploy/default-policies`]);
  assert.equal(applied.code, 0, applied.stderr);
  await until("/readyz to answer 200", async () => (await readyz()).status === 200);
  assert.equal((await validate("registry.example.com/app:1.0")).allowed, true);
  const latest = await validate("registry.example.com/app:latest");
  assert.equal(latest.allowed, false);
  assert.match(latest.status.message, /pinned-versions/);
});

test("deleting the last policy closes the gate again", async () => {
  const deleted = await cluster.kubectl(["delete", "-k", `${ROOT}deploy/default-policies`]);
  assert.equal(deleted.code, 0, deleted.stderr);
  await until("/readyz to answer 503", async () => (await readyz()).status === 503);
  const response = await validate("registry.example.com/app:1.0");
  assert.equal(response.allowed, false);
  assert.match(response.status.message, /serve --require-policies/);
});
