// Smoke test of the end-to-end harness itself: a real etcd + kube-apiserver, driven with kubectl.
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { test } from "node:test";
import { startKubeCluster } from "../support/kube-cluster.ts";

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

const POD = `apiVersion: v1
kind: Pod
metadata:
  name: smoke
  namespace: e2e-smoke
spec:
  containers:
  - name: app
    image: registry.example.com/app:1.0
`;

test("the harness runs a real apiserver that stores what kubectl applies, and stop() ends it", async (t) => {
  const startedAt = performance.now();
  const cluster = await startKubeCluster();
  t.diagnostic(`cluster started in ${Math.round(performance.now() - startedAt)} ms at ${cluster.url}`);
  const { pids, dir } = cluster;
  try {
    assert.match(cluster.url, /^https:\/\/127\.0\.0\.1:\d+$/);
    assert.ok(isRunning(pids.etcd) && isRunning(pids.apiserver), "both processes run after start");

    const ns = await cluster.kubectl(["create", "namespace", "e2e-smoke"]);
    assert.equal(ns.code, 0, `create namespace failed: ${ns.stderr}\n${cluster.logs()}`);

    const applied = await cluster.apply(POD);
    assert.equal(applied.code, 0, `apply failed: ${applied.stderr}\n${cluster.logs()}`);
    assert.match(applied.stdout, /pod\/smoke created/);

    const got = await cluster.kubectl(["get", "pod", "smoke", "--namespace", "e2e-smoke", "-o", "json"]);
    assert.equal(got.code, 0, `get pod failed: ${got.stderr}`);
    const pod = JSON.parse(got.stdout) as { spec: { containers: { name: string; image: string }[] } };
    assert.deepEqual(
      pod.spec.containers.map((c) => c.image),
      ["registry.example.com/app:1.0"],
    );
  } finally {
    await cluster.stop();
  }

  assert.equal(isRunning(pids.apiserver), false, "kube-apiserver is gone after stop()");
  assert.equal(isRunning(pids.etcd), false, "etcd is gone after stop()");
  assert.equal(existsSync(dir), false, "the cluster dir is removed after stop()");
  await cluster.stop(); // idempotent
});
