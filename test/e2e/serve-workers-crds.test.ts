// `imprimatur serve --workers 2 --policy-crds` on a real etcd + kube-apiserver: the primary alone reads the policy
// resources and writes their status; an ImagePolicy applied with kubectl is enforced by every worker, and its
// deletion lifts it everywhere. (Reviews are posted to the server directly: which process answers is in its log.)
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { podReview } from "../support/admission.ts";
import { postJson } from "../support/https-client.ts";
import { startImprimatur, type ImprimaturProcess } from "../support/imprimatur-process.ts";
import { startKubeCluster, type KubeCluster } from "../support/kube-cluster.ts";
import { installPolicyCrds } from "../support/policy-crds.ts";
import { teardown } from "../support/teardown.ts";

let cluster: KubeCluster;
let server: ImprimaturProcess;
let dir: string;

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "imprimatur-serve-workers-crds-"));
  cluster = await startKubeCluster();
  await installPolicyCrds(cluster);
  // Plain admissions are logged at debug: which process answered each is in its log line.
  process.env.IMPRIMATUR_LOG_LEVEL = "debug";
  server = await startImprimatur(["--workers", "2", "--kubeconfig", cluster.kubeconfig, "--policy-crds"]).finally(
    () => delete process.env.IMPRIMATUR_LOG_LEVEL,
  );
});

after(() => teardown([() => server?.stop(), () => cluster?.stop(), () => rm(dir, { recursive: true, force: true })]));

/** Each review over a new connection, so that the workers share them out; the answers, and who gave them. */
async function review(count: number, image: string): Promise<boolean[]> {
  const answers: boolean[] = [];
  for (let i = 0; i < count; i++) {
    const r = await postJson(`${server.baseUrl}/validate`, server.ca, podReview({ images: [image] }));
    assert.equal(r.status, 200, r.text);
    answers.push(r.body.response.allowed as boolean);
  }
  return answers;
}

/** The pids of the processes that logged `msg`. */
async function loggedBy(msg: string): Promise<Set<number>> {
  const pids = new Set<number>();
  for (const line of (await server.log()).split("\n"))
    if (line.startsWith("{") && line.includes(`"msg":"${msg}"`)) pids.add((JSON.parse(line) as { pid: number }).pid);
  return pids;
}

async function until(what: string, check: () => Promise<boolean>, ms = 20_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) assert.fail(`${what}: not within ${ms / 1000} s\n${await server.log()}`);
    await new Promise((r) => setTimeout(r, 150));
  }
}

const policy = JSON.stringify({
  apiVersion: "imprimatur.dev/v1alpha1",
  kind: "ImagePolicy",
  metadata: { name: "no-nginx" },
  spec: { rules: [{ action: "deny", images: ["docker.io/library/nginx*"], message: "no nginx here" }], default: "allow" },
});

test("an ImagePolicy resource is enforced by every worker, its status written by the primary; deleted, it is lifted everywhere", async () => {
  assert.ok(
    (await review(6, "nginx:1.27")).every((a) => a),
    "no policy yet: admitted",
  );
  const applied = await cluster.apply(policy);
  assert.equal(applied.code, 0, applied.stderr);
  await until("every answer denies", async () => (await review(6, "nginx:1.27")).every((a) => !a));
  // Routine log lines are written within a second, not at once.
  await until("both workers log a denial", async () => (await loggedBy("denied")).size === 2);
  const workers = await loggedBy("denied");
  assert.ok(!workers.has(server.pid));
  await until("the primary and each worker log the reload", async () => (await loggedBy("policies reloaded")).size === 3);
  assert.deepEqual([...(await loggedBy("policies reloaded"))].sort(), [server.pid, ...workers].sort());

  const ready = await cluster.kubectl(["get", "imagepolicy", "no-nginx", "-o", "jsonpath={.status.conditions[?(@.type=='Ready')].status}"]);
  assert.equal(ready.stdout, "True", ready.stderr);

  assert.equal((await cluster.kubectl(["delete", "imagepolicy", "no-nginx"])).code, 0);
  await until("every answer admits again", async () => (await review(6, "nginx:1.27")).every((a) => a));
});
