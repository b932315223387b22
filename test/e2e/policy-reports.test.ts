// Policy reports on a real etcd + kube-apiserver v1.20, with a real kube-controller-manager running only its
// garbage collector: the CRDs of deploy/crds/reports are accepted and served; the writer (src/kube/
// policy-report-writer.ts) writes one report per resource in both formats, which kubectl lists with their
// counts and which read back exactly as built (nothing pruned); a rescan with the same findings writes nothing,
// a changed one replaces the report, a fixed resource's report goes; deleting the owner lets the garbage
// collector remove its reports; a report at the name that Imprimatur did not write is reclaimed; and the errors carry
// codes (CRD missing, forbidden).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { setTimeout as sleep } from "node:timers/promises";
import { startKubeCluster, type KubeCluster } from "../support/kube-cluster.ts";
import { smallClusterToolPaths } from "../support/small-cluster.ts";
import { spawnLogged, terminate, type LoggedProcess } from "../support/logged-process.ts";
import { tailFile } from "../support/log-tail.ts";
import { loadKubeClient } from "../../src/kube/kube-connection.ts";
import { PolicyReportWriter, type ReportWriteOutcome } from "../../src/kube/policy-report-writer.ts";
import { buildPolicyReport } from "../../src/core/policy-reports/policy-report-objects.ts";
import type { ReportedResource, ResourceScan, ScanResult } from "../../src/core/policy-reports/resource-scan.ts";
import { hasErrorCode } from "../../src/errors/imprimatur-error.ts";
import { teardown } from "../support/teardown.ts";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const NS = "reports-e2e";
const NODE = "report-node";
let cluster: KubeCluster;
let gc: LoggedProcess | undefined;

before(async () => {
  cluster = await startKubeCluster({ nodes: [NODE] });
  // Before the CRDs are installed, a write says so, with the command that installs them.
  const early = new PolicyReportWriter(loadKubeClient(cluster.kubeconfig), { formats: ["wgpolicyk8s", "openreports"] });
  await assert.rejects(
    early.write(scan({ apiVersion: "v1", kind: "Pod", name: "x", namespace: "default", uid: "00000000-0000-4000-8000-000000000000" }, [finding()])),
    (e: unknown) => hasErrorCode(e, "crd-missing") && /kubectl apply -k deploy\/crds\/reports/.test(e.message),
  );
  const applied = await cluster.kubectl(["apply", "-k", join(ROOT, "deploy/crds/reports")]);
  assert.equal(applied.code, 0, applied.stderr);
  const established = await cluster.kubectl(["wait", "--for=condition=Established", "crd", "--all", "--timeout=60s"]);
  assert.equal(established.code, 0, established.stderr);
  const ns = await cluster.kubectl(["create", "namespace", NS]);
  assert.equal(ns.code, 0, ns.stderr);
  // The garbage collector of a real kube-controller-manager (the other controllers are not needed here), started
  // after the CRDs so that its first discovery sees the report kinds.
  gc = spawnLogged(
    "controller-manager",
    smallClusterToolPaths().controllerManager,
    [`--kubeconfig=${cluster.kubeconfig}`, "--controllers=garbagecollector", "--leader-elect=false", "--port=0", "--secure-port=0", "-v=1"],
    { dir: cluster.dir, env: { PATH: process.env.PATH ?? "/usr/bin:/bin" }, killAtExit: true },
  );
});

after(() => teardown([() => gc && terminate(gc, 15_000), () => cluster?.stop()]));

const AT = { seconds: 1_790_000_000, nanos: 123_000_000 };

function finding(over: Partial<ScanResult> = {}): ScanResult {
  return {
    policy: "signed-images",
    rule: "prod-registry",
    result: "fail",
    severity: "high",
    category: "Supply chain",
    message: "no valid signature for registry.example/shop/web:1.2",
    timestamp: AT,
    properties: { image: "registry.example/shop/web:1.2", digest: `sha256:${"c".repeat(64)}`, field: "spec.containers[0].image" },
    ...over,
  };
}

function scan(resource: ReportedResource, results: ScanResult[]): ResourceScan {
  return { resource, results };
}

async function kubectlJson<T>(args: string[]): Promise<T> {
  const res = await cluster.kubectl([...args, "-o", "json"]);
  assert.equal(res.code, 0, res.stderr);
  return JSON.parse(res.stdout) as T;
}

/** Creates a Pod object (never scheduled: there is no scheduler or kubelet) and returns it as a report names it. */
async function createPod(name: string): Promise<ReportedResource> {
  const pod = {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace: NS },
    spec: { containers: [{ name: "web", image: "registry.example/shop/web:1.2" }] },
  };
  const created = await cluster.kubectl(["create", "-o", "json", "-f", "-"], { input: JSON.stringify(pod) });
  assert.equal(created.code, 0, created.stderr);
  const uid = (JSON.parse(created.stdout) as { metadata: { uid: string } }).metadata.uid;
  return { apiVersion: "v1", kind: "Pod", name, namespace: NS, uid };
}

const writer = () => new PolicyReportWriter(loadKubeClient(cluster.kubeconfig), { formats: ["wgpolicyk8s", "openreports"] });
const actions = (outcomes: ReportWriteOutcome[]) => outcomes.map((o) => `${o.kind}:${o.action}`);

type Stored = Record<string, unknown> & {
  metadata: { name: string; namespace?: string; resourceVersion: string; ownerReferences?: unknown[]; labels?: Record<string, string> };
};

async function until(what: string, check: () => Promise<boolean>, timeoutMs = 90_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting: ${what}\n${gc ? tailFile(gc.logPath, 30) : ""}`);
    await sleep(500);
  }
}

test("the report CRDs are served with their kinds and short names", async () => {
  const wg = await cluster.kubectl(["api-resources", "--api-group=wgpolicyk8s.io"]);
  assert.equal(wg.code, 0, wg.stderr);
  assert.match(wg.stdout, /clusterpolicyreports +cpolr +wgpolicyk8s\.io\/v1alpha2 +false +ClusterPolicyReport/);
  assert.match(wg.stdout, /policyreports +polr +wgpolicyk8s\.io\/v1alpha2 +true +PolicyReport/);
  const open = await cluster.kubectl(["api-resources", "--api-group=openreports.io"]);
  assert.equal(open.code, 0, open.stderr);
  assert.match(open.stdout, /clusterreports +creps +openreports\.io\/v1alpha1 +false +ClusterReport/);
  assert.match(open.stdout, /reports +reps +openreports\.io\/v1alpha1 +true +Report/);
});

test("a pod's findings become one report per format, named by its UID, listed by kubectl with their counts", async () => {
  const pod = await createPod("web-0");
  const results = [
    finding(),
    finding({ rule: "pinned", result: "pass", message: "pinned by digest", severity: undefined }),
    finding({ policy: "restricted", rule: "", result: "warn", message: "runs as root" }),
  ];
  const outcomes = await writer().write(scan(pod, results));
  assert.deepEqual(actions(outcomes), ["PolicyReport:created", "Report:created"]);

  const listed = await cluster.kubectl(["get", "policyreports", "-n", NS]);
  assert.equal(listed.code, 0, listed.stderr);
  assert.match(listed.stdout, /NAME +PASS +FAIL +WARN +ERROR +SKIP +AGE/);
  assert.match(listed.stdout, new RegExp(`${pod.uid} +1 +1 +1 +0 +0 `));
  const wide = await cluster.kubectl(["get", "polr", "-n", NS, "-o", "wide"]);
  assert.match(wide.stdout, new RegExp(`${pod.uid} +Pod +web-0 +1 +1 +1 +0 +0 `), wide.stdout);
  const openListed = await cluster.kubectl(["get", "reports.openreports.io", "-n", NS]);
  assert.equal(openListed.code, 0, openListed.stderr);
  assert.match(openListed.stdout, new RegExp(`${pod.uid} +1 +1 +1 +0 +0 `));

  // Read back exactly as built: the apiserver kept every field (none pruned), and owns only its metadata.
  for (const [format, resource] of [
    ["wgpolicyk8s", "policyreports.wgpolicyk8s.io"],
    ["openreports", "reports.openreports.io"],
  ] as const) {
    const stored = await kubectlJson<Stored>(["get", resource, "-n", NS, pod.uid]);
    const built = buildPolicyReport(format, scan(pod, results));
    const { metadata, ...body } = stored;
    const { metadata: builtMetadata, ...builtBody } = built;
    assert.deepEqual(body, JSON.parse(JSON.stringify(builtBody)), resource);
    assert.deepEqual(metadata.ownerReferences, builtMetadata.ownerReferences);
    assert.deepEqual(metadata.labels, { "app.kubernetes.io/managed-by": "imprimatur" });
    assert.equal(metadata.namespace, NS);
  }
});

test("a rescan with the same findings writes nothing; a changed finding replaces the report and keeps first-found times", async () => {
  const pod = await createPod("web-1");
  const w = writer();
  await w.write(scan(pod, [finding(), finding({ rule: "pinned", result: "pass", message: "pinned" })]));
  const before = await kubectlJson<Stored>(["get", "policyreports", "-n", NS, pod.uid]);

  // A later scan (a resync, or a new leader scanning everything again), same findings, new times: nothing written.
  const later = { seconds: AT.seconds + 3600, nanos: 0 };
  const again = await writer().write(
    scan(pod, [finding({ rule: "pinned", result: "pass", message: "pinned", timestamp: later }), finding({ timestamp: later })]),
  );
  assert.deepEqual(actions(again), ["PolicyReport:unchanged", "Report:unchanged"]);
  const same = await kubectlJson<Stored>(["get", "policyreports", "-n", NS, pod.uid]);
  assert.equal(same.metadata.resourceVersion, before.metadata.resourceVersion, "not bumped");

  // The pinned check now fails: replaced, counts follow, the still-failing result keeps when it was first found.
  const changed = await w.write(
    scan(pod, [finding({ timestamp: later }), finding({ rule: "pinned", result: "fail", message: "tag moved", timestamp: later })]),
  );
  assert.deepEqual(actions(changed), ["PolicyReport:replaced", "Report:replaced"]);
  const after = await kubectlJson<Stored & { summary: Record<string, number>; results: Array<{ rule: string; timestamp: { seconds: number } }> }>([
    "get",
    "reports.openreports.io",
    "-n",
    NS,
    pod.uid,
  ]);
  assert.deepEqual(after.summary, { pass: 0, fail: 2, warn: 0, error: 0, skip: 0 });
  assert.deepEqual(
    after.results.map((r) => [r.rule, r.timestamp.seconds]),
    [
      ["pinned", later.seconds],
      ["prod-registry", AT.seconds],
    ],
  );
  const list = await kubectlJson<{ items: unknown[] }>([
    "get",
    "policyreports",
    "-n",
    NS,
    "-l",
    "app.kubernetes.io/managed-by=imprimatur",
    "--field-selector",
    `metadata.name=${pod.uid}`,
  ]);
  assert.equal(list.items.length, 1, "one report per resource, never a duplicate");
});

test("two writers racing on one resource (a leader change mid-scan) leave one report and no error", async () => {
  const pod = await createPod("web-2");
  const [a, b] = [writer(), writer()];
  const results = [finding(), finding({ rule: "pinned", result: "pass", message: "pinned" })];
  const outcomes = await Promise.all([a.write(scan(pod, results)), b.write(scan(pod, results)), a.write(scan(pod, results)), b.write(scan(pod, results))]);
  const wg = outcomes.flat().filter((o) => o.kind === "PolicyReport");
  assert.equal(wg.filter((o) => o.action === "created").length, 1, JSON.stringify(wg));
  assert.ok(
    wg.every((o) => o.action === "created" || o.action === "unchanged"),
    JSON.stringify(wg),
  );
  const report = await kubectlJson<{ results: unknown[] }>(["get", "policyreports", "-n", NS, pod.uid]);
  assert.equal(report.results.length, 2);
  // A new writer (the next leader) finds the reports written so far through its paged list: nothing to write.
  const paged = new PolicyReportWriter(loadKubeClient(cluster.kubeconfig), { formats: ["wgpolicyk8s", "openreports"], listPageSize: 1 });
  assert.deepEqual(actions(await paged.write(scan(pod, results))), ["PolicyReport:unchanged", "Report:unchanged"]);
});

test("the index sees another writer's change at the next refresh; without the index every write reads first", async () => {
  const pod = await createPod("web-8");
  const w = writer();
  const results = [finding()];
  await w.write(scan(pod, results));
  // Someone else edits the report (an old leader finishing its write, a person).
  const edited = await cluster.kubectl(["patch", "policyreports", "-n", NS, pod.uid, "--type=merge", "-p", JSON.stringify({ summary: { pass: 9 } })]);
  assert.equal(edited.code, 0, edited.stderr);
  assert.deepEqual(actions(await w.write(scan(pod, results))), ["PolicyReport:unchanged", "Report:unchanged"], "the index has not seen it yet");
  await w.refreshIndex();
  assert.deepEqual(actions(await w.write(scan(pod, results))), ["PolicyReport:replaced", "Report:unchanged"], "seen after the refresh");
  const fixed = await kubectlJson<{ summary: { pass: number } }>(["get", "policyreports", "-n", NS, pod.uid]);
  assert.equal(fixed.summary.pass, 0);

  const direct = new PolicyReportWriter(loadKubeClient(cluster.kubeconfig), { formats: ["wgpolicyk8s", "openreports"], index: false });
  const again = await cluster.kubectl(["patch", "reports.openreports.io", "-n", NS, pod.uid, "--type=merge", "-p", JSON.stringify({ summary: { skip: 3 } })]);
  assert.equal(again.code, 0, again.stderr);
  assert.deepEqual(actions(await direct.write(scan(pod, results))), ["PolicyReport:unchanged", "Report:replaced"]);
  assert.deepEqual(actions(await direct.clear(pod)), ["PolicyReport:deleted", "Report:deleted"]);
  assert.deepEqual(actions(await direct.clear(pod)), ["PolicyReport:absent", "Report:absent"]);
});

test("a fixed resource's reports are deleted, and clearing again is no error", async () => {
  const pod = await createPod("web-3");
  const w = writer();
  await w.write(scan(pod, [finding()]));
  assert.deepEqual(actions(await w.write(scan(pod, []))), ["PolicyReport:deleted", "Report:deleted"]);
  for (const resource of ["policyreports.wgpolicyk8s.io", "reports.openreports.io"]) {
    const got = await cluster.kubectl(["get", resource, "-n", NS, pod.uid]);
    assert.notEqual(got.code, 0);
    assert.match(got.stderr, /NotFound|not found/);
  }
  assert.deepEqual(actions(await w.clear(pod)), ["PolicyReport:absent", "Report:absent"]);
});

test("a cluster-scoped resource gets a ClusterPolicyReport and a ClusterReport", async () => {
  const ns = await kubectlJson<{ metadata: { uid: string } }>(["get", "namespace", NS]);
  const resource: ReportedResource = { apiVersion: "v1", kind: "Namespace", name: NS, uid: ns.metadata.uid };
  const outcomes = await writer().write(scan(resource, [finding({ policy: "pod-security-labels", rule: "enforce", result: "skip", message: "no label" })]));
  assert.deepEqual(actions(outcomes), ["ClusterPolicyReport:created", "ClusterReport:created"]);
  const listed = await cluster.kubectl(["get", "clusterpolicyreports", "-o", "wide"]);
  assert.match(listed.stdout, new RegExp(`${resource.uid} +Namespace +${NS} +0 +0 +0 +0 +1 `), listed.stdout);
  const open = await cluster.kubectl(["get", "clusterreports.openreports.io"]);
  assert.match(open.stdout, new RegExp(`${resource.uid} +0 +0 +0 +0 +1 `), open.stdout);
  assert.deepEqual(actions(await writer().clear(resource)), ["ClusterPolicyReport:deleted", "ClusterReport:deleted"]);
});

test("deleting the pod lets the garbage collector remove its reports, even one written after the pod was gone", async () => {
  const pod = await createPod("web-4");
  await writer().write(scan(pod, [finding()]));
  const deleted = await cluster.kubectl(["delete", "pod", "-n", NS, pod.name, "--wait=true"]);
  assert.equal(deleted.code, 0, deleted.stderr);
  // A scan that finished after the deletion writes for an owner that is gone: accepted, and collected too.
  const stale = await createPod("web-5");
  const gone = await cluster.kubectl(["delete", "pod", "-n", NS, stale.name, "--wait=true"]);
  assert.equal(gone.code, 0, gone.stderr);
  assert.deepEqual(actions(await writer().write(scan(stale, [finding()]))), ["PolicyReport:created", "Report:created"]);

  for (const uid of [pod.uid, stale.uid]) {
    for (const resource of ["policyreports.wgpolicyk8s.io", "reports.openreports.io"]) {
      await until(`the garbage collector removes ${resource} ${uid}`, async () => {
        const got = await cluster.kubectl(["get", resource, "-n", NS, uid, "--ignore-not-found", "-o", "name"]);
        return got.code === 0 && got.stdout.trim() === "";
      });
    }
  }
});

test("a resource whose namespace is gone is reported as such, and nothing is written", async () => {
  const resource: ReportedResource = {
    apiVersion: "v1",
    kind: "Pod",
    name: "ghost",
    namespace: "no-such-namespace",
    uid: "11111111-2222-4333-8444-555555555555",
  };
  assert.deepEqual(actions(await writer().write(scan(resource, [finding()]))), ["PolicyReport:owner-gone", "Report:owner-gone"]);
  assert.deepEqual(actions(await writer().clear(resource)), ["PolicyReport:absent", "Report:absent"]);
});

test("a report at the resource's name that Imprimatur did not write is reclaimed whole, whoever it claims to be managed by", async () => {
  const pod = await createPod("web-6");
  // Another tool's per-resource report (as Kyverno writes one), or a tenant's copy of it: nothing tells them apart.
  const theirs = {
    apiVersion: "wgpolicyk8s.io/v1alpha2",
    kind: "PolicyReport",
    metadata: {
      name: pod.uid,
      namespace: NS,
      labels: { "app.kubernetes.io/managed-by": "kyverno" },
      annotations: { "example.com/note": "theirs" },
      ownerReferences: [{ apiVersion: "v1", kind: "Pod", name: pod.name, uid: pod.uid }],
    },
    scope: { apiVersion: "v1", kind: "Pod", name: pod.name, namespace: NS, uid: pod.uid },
    results: [{ source: "kyverno", policy: "require-labels", result: "pass", timestamp: { seconds: 1, nanos: 0 } }],
  };
  const created = await cluster.kubectl(["create", "-f", "-"], { input: JSON.stringify(theirs) });
  assert.equal(created.code, 0, created.stderr);
  const w = new PolicyReportWriter(loadKubeClient(cluster.kubeconfig), { formats: ["wgpolicyk8s"] });
  const [outcome] = await w.write(scan(pod, [finding()]));
  assert.deepEqual(outcome, {
    format: "wgpolicyk8s",
    kind: "PolicyReport",
    namespace: NS,
    name: pod.uid,
    action: "reclaimed",
    squatter: { managedBy: "kyverno", ownedByResource: true },
  });
  const now = await kubectlJson<Stored & { results: Array<{ source: string; result: string }> }>(["get", "policyreports", "-n", NS, pod.uid]);
  assert.deepEqual(
    now.results.map((r) => [r.source, r.result]),
    [["imprimatur", "fail"]],
  );
  assert.deepEqual(now.metadata.labels, { "app.kubernetes.io/managed-by": "imprimatur" });
  assert.equal((now.metadata as { annotations?: unknown }).annotations, undefined);
  // Imprimatur's from now on: the next write with the same findings is unchanged.
  assert.deepEqual(actions(await w.write(scan(pod, [finding()]))), ["PolicyReport:unchanged"]);
});

test("an identity without RBAC for the report groups gets forbidden, naming the missing permission", async () => {
  const pod = await createPod("web-7");
  const w = new PolicyReportWriter(loadKubeClient(cluster.nodeKubeconfig(NODE)), { formats: ["openreports"] });
  await assert.rejects(w.write(scan(pod, [finding()])), (e: unknown) => hasErrorCode(e, "forbidden") && /reports.*openreports\.io/.test(e.message));
});
