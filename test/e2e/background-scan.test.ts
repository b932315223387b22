// The post-creation audit on a real etcd + kube-apiserver v1.20: `imprimatur serve --background-scan` (two
// replicas sharing one Lease) judges pods that exist already and pods as they change, writes policy reports in
// both formats (CRDs of deploy/crds/reports), re-judges every pod when a policy changes, clears a report when its
// pod is fixed or deleted, and a leader change writes no report twice.
//
// The pods are objects only (no kubelet runs here): what the kubelet would report in status (the imageID each
// container runs) is written through the pods/status subresource, as the kubelet writes it. Static pods and a tag
// that moves under a restarted container need a real node: test/e2e/background-scan-node.test.ts.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { setTimeout as sleep } from "node:timers/promises";
import { startKubeCluster, type KubeCluster } from "../support/kube-cluster.ts";
import { startImprimatur, type ImprimaturProcess } from "../support/imprimatur-process.ts";
import { getText } from "../support/https-client.ts";
import { imprimatur } from "../support/cli-process.ts";
import { teardown } from "../support/teardown.ts";
import { pino } from "pino";
import { DEFAULT_SERVER_CONFIG } from "../../src/config/server-config.ts";
import { buildEngine } from "../../src/engine/engine-builder.ts";
import { loadKubeClient } from "../../src/kube/kube-connection.ts";
import type { PolicyReportSink } from "../../src/kube/policy-report-writer.ts";
import { parsePolicyText } from "../../src/policy/load-policies.ts";
import { PodInformer } from "../../src/kube/pod-informer.ts";
import { AuditScanner, MAX_JUDGMENTS_IN_FLIGHT, MAX_REPORT_WRITES_WAITING } from "../../src/scan/audit-scanner.ts";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const NS = "scan-e2e";
const D1 = `sha256:${"1".repeat(64)}`;
const D2 = `sha256:${"2".repeat(64)}`;

let cluster: KubeCluster;
let dir: string;
let first: ImprimaturProcess | undefined;
let second: ImprimaturProcess | undefined;
const uids = new Map<string, string>();

const POLICY = (extraDeny: string) => `
apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: registries}
spec:
  rules:
${extraDeny}    - {action: allow, images: ["registry.example.com/*"]}
    - {action: deny, images: ["quay.io/*"], message: quay is retired, validationActions: [Warn]}
  default: deny
  defaultMessage: only registry.example.com
`;

// The scan judges the server's own cluster (--cluster-name cluster-a): by this-cluster, never by other-cluster.
const CLUSTER_POLICIES = `
apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: this-cluster}
spec:
  clusters: [cluster-a]
  rules: [{action: deny, images: ["docker.io/library/nginx*"], message: cluster-a runs no nginx}]
  default: allow
---
apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: other-cluster}
spec:
  clusters: [cluster-b]
  rules: [{action: deny, images: ["*"], message: cluster-b runs nothing}]
  default: allow
`;

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "imprimatur-scan-e2e-"));
  cluster = await startKubeCluster();
  const applied = await cluster.kubectl(["apply", "-k", join(ROOT, "deploy/crds/reports")]);
  assert.equal(applied.code, 0, applied.stderr);
  assert.equal((await cluster.kubectl(["wait", "--for=condition=Established", "crd", "--all", "--timeout=60s"])).code, 0);
  assert.equal((await cluster.kubectl(["create", "namespace", NS])).code, 0);
  await writeFile(join(dir, "policies.yaml"), POLICY(""));
  await writeFile(join(dir, "clusters.yaml"), CLUSTER_POLICIES);
  // Pods that never passed admission (no webhook is registered): the scan must find them all the same.
  await createPod("outsider", "docker.io/library/nginx:1.25");
  await createPod("good", "registry.example.com/app:1.0");
  await createPod("quay", "quay.io/team/app:1.0");
  await createPod("drifted", "registry.example.com/web:1.0", {
    "imprimatur.dev/verified-images": JSON.stringify({ "registry.example.com/web:1.0": { digest: D1, signers: ["key sha256:ab"] } }),
  });
  await setImageId("drifted", "registry.example.com/web", D2);
  first = await startScanner("imprimatur-scan-e2e-a");
});

after(() => teardown([() => first?.stop(), () => second?.stop(), () => cluster?.stop(), () => dir && rm(dir, { recursive: true, force: true })]));

/** A replica named as its pod would be (POD_NAME, its identity in the Lease), so the test can name the holder. */
async function startScanner(podName: string): Promise<ImprimaturProcess> {
  const saved = process.env.POD_NAME;
  process.env.POD_NAME = podName;
  try {
    return await startScannerProcess();
  } finally {
    if (saved === undefined) delete process.env.POD_NAME;
    else process.env.POD_NAME = saved;
  }
}

function startScannerProcess(): Promise<ImprimaturProcess> {
  return startImprimatur([
    // The folder: policies.yaml, which imprimatur audit reads alone, and clusters.yaml.
    "--policies",
    dir,
    "--kubeconfig",
    cluster.kubeconfig,
    "--cluster-name",
    "cluster-a",
    "--background-scan",
    "--scan-reports",
    "both",
    "--scan-rate",
    "100",
    "--scan-lease",
    `${NS}/imprimatur-scan`,
  ]);
}

async function createPod(name: string, image: string, annotations: Record<string, string> = {}): Promise<void> {
  const pod = { apiVersion: "v1", kind: "Pod", metadata: { name, namespace: NS, annotations }, spec: { containers: [{ name: "app", image }] } };
  const created = await cluster.kubectl(["create", "-o", "json", "-f", "-"], { input: JSON.stringify(pod) });
  assert.equal(created.code, 0, created.stderr);
  uids.set(name, (JSON.parse(created.stdout) as { metadata: { uid: string } }).metadata.uid);
}

/** What the kubelet writes once the container runs: the image and the digest it runs (pods/status). */
async function setImageId(name: string, repository: string, digest: string): Promise<void> {
  const kube = loadKubeClient(cluster.kubeconfig);
  const path = `/api/v1/namespaces/${NS}/pods/${name}/status`;
  const pod = (await kube.request("GET", path)) as { spec: { containers: Array<{ image: string }> }; status?: Record<string, unknown> };
  const image = pod.spec.containers[0]!.image;
  pod.status = {
    ...pod.status,
    containerStatuses: [{ name: "app", image, imageID: `${repository}@${digest}`, ready: true, restartCount: 0, state: { running: {} } }],
  };
  await kube.request("PUT", path, { body: pod });
  await kube.close();
}

interface Report {
  metadata: { name: string; resourceVersion: string; ownerReferences?: Array<{ uid: string; kind: string }> };
  results?: Array<{ policy: string; rule?: string; result: string; message: string; source?: string; properties?: Record<string, string> }>;
  summary?: Record<string, number>;
}

async function reports(resource: "policyreports" | "reports.openreports.io"): Promise<Map<string, Report>> {
  const got = await cluster.kubectl(["get", resource, "-n", NS, "-o", "json"]);
  assert.equal(got.code, 0, got.stderr);
  return new Map((JSON.parse(got.stdout) as { items: Report[] }).items.map((r) => [r.metadata.name, r]));
}

async function until(what: string, check: () => Promise<boolean>, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting: ${what}\n${(await first?.log())?.slice(-3000) ?? ""}`);
    await sleep(300);
  }
}

const reportOf = async (pod: string, resource: "policyreports" | "reports.openreports.io" = "policyreports") => (await reports(resource)).get(uids.get(pod)!);

test("pods that never passed admission are judged as they run: a report per breaking pod, in both formats, owned by the pod, by the policies of the server's cluster (spec.clusters)", async () => {
  await until("reports for outsider, quay and drifted", async () => {
    const wg = await reports("policyreports");
    const open = await reports("reports.openreports.io");
    return ["outsider", "quay", "drifted"].every((p) => wg.has(uids.get(p)!) && open.has(uids.get(p)!));
  });
  const outsider = (await reportOf("outsider"))!;
  assert.deepEqual(
    outsider.results?.map((r) => [r.policy, r.rule, r.result, r.message, r.properties?.image]).sort(),
    [
      ["registries", "default", "fail", "only registry.example.com", "docker.io/library/nginx:1.25"],
      ["this-cluster", "rules[0]", "fail", "cluster-a runs no nginx", "docker.io/library/nginx:1.25"],
    ],
    "cluster-a's policy applies, cluster-b's does not",
  );
  assert.equal(outsider.summary?.fail, 2);
  assert.deepEqual(
    outsider.metadata.ownerReferences?.map((o) => [o.kind, o.uid]),
    [["Pod", uids.get("outsider")]],
  );
  const quay = (await reportOf("quay", "reports.openreports.io"))!;
  assert.deepEqual(
    quay.results?.map((r) => [r.rule, r.result]),
    [["rules[1]", "warn"]],
    "a Warn failure is a warn result",
  );
  const drifted = (await reportOf("drifted"))!;
  assert.deepEqual(
    drifted.results?.map((r) => [r.policy, r.rule, r.result, r.properties?.digest, r.properties?.expected]),
    [["imprimatur", "runningDigest", "fail", D2, D1]],
    "the digest that runs is not the one admission verified",
  );
  assert.equal(await reportOf("good"), undefined, "a pod that passes has no report (other-cluster would deny it)");
  const listed = await cluster.kubectl(["get", "policyreports", "-n", NS]);
  assert.equal(listed.code, 0, listed.stderr);
  assert.match(listed.stdout, new RegExp(uids.get("outsider")!));
});

test("imprimatur audit judges the same pods once, from a kubeconfig: one line per finding, exit 1", async () => {
  const text = await imprimatur(["audit", "--kubeconfig", cluster.kubeconfig, "--policies", join(dir, "policies.yaml"), "-n", NS]);
  assert.equal(text.code, 1, text.stderr);
  const lines = text.stdout.trimEnd().split("\n");
  assert.ok(lines.includes(`${NS}/outsider: fail: registries default: only registry.example.com (docker.io/library/nginx:1.25)`), text.stdout);
  assert.ok(lines.includes(`${NS}/quay: warn: registries rules[1]: quay is retired (quay.io/team/app:1.0)`), text.stdout);
  assert.ok(
    lines.some((l) => l.startsWith(`${NS}/drifted: fail: imprimatur runningDigest: runs ${D2}`)),
    text.stdout,
  );
  assert.equal(lines.at(-1), "4 pods: 1 passed, 2 failed, 1 warned");
  const json = await imprimatur([
    "audit",
    "--kubeconfig",
    cluster.kubeconfig,
    "--policies",
    join(dir, "policies.yaml"),
    "-n",
    NS,
    "-l",
    "missing=label",
    "-o",
    "json",
  ]);
  assert.equal(json.code, 0, json.stderr);
  assert.deepEqual(JSON.parse(json.stdout), { pods: [], summary: { pods: 0, passed: 0, failed: 0, warned: 0, errors: 0 } });
  const usage = await imprimatur(["audit", "-o", "xml"]);
  assert.equal(usage.code, 2);
});

test("a pod created and changed while the scan runs is judged as it changes; a fixed pod's report goes", async () => {
  await createPod("late", "docker.io/library/redis:7");
  await until("a report for the late pod", async () => (await reportOf("late")) !== undefined);
  // Containers' images may change on a running pod: fixing it clears its report.
  const fixed = await cluster.kubectl(["set", "image", "-n", NS, "pod/late", "app=registry.example.com/redis:7"]);
  assert.equal(fixed.code, 0, fixed.stderr);
  await until(
    "the fixed pod's reports cleared",
    async () => (await reportOf("late")) === undefined && (await reportOf("late", "reports.openreports.io")) === undefined,
  );
});

test("a deleted pod's reports go", async () => {
  assert.equal((await cluster.kubectl(["delete", "pod", "-n", NS, "drifted", "--wait=false"])).code, 0);
  await until(
    "the deleted pod's reports cleared",
    async () => (await reportOf("drifted")) === undefined && (await reportOf("drifted", "reports.openreports.io")) === undefined,
  );
});

test("a policy change re-judges every pod: an admitted pod that breaks the new policy is reported", async () => {
  await writeFile(join(dir, "policies.yaml"), POLICY('    - {action: deny, images: ["registry.example.com/app:1.0"], message: app 1.0 is withdrawn}\n'));
  await until("a report for the pod the new rule breaks", async () => (await reportOf("good")) !== undefined);
  assert.deepEqual(
    (await reportOf("good"))!.results?.map((r) => [r.rule, r.result, r.message]),
    [["rules[0]", "fail", "app 1.0 is withdrawn"]],
  );
  const metrics = await getText(`${first!.baseUrl}/metrics`, first!.ca);
  assert.match(metrics.text, /imprimatur_scan_pods_total\{outcome="fail"\} [1-9]/);
  assert.match(metrics.text, /imprimatur_scan_results\{policy="registries",result="fail"\} 2/);
});

test("a leader change: the other replica takes the scan over and writes no report twice", async () => {
  second = await startScanner("imprimatur-scan-e2e-b");
  const before = await reports("policyreports");
  assert.ok(before.size >= 3);
  // The leader hands its Lease back as it stops; the second replica then takes it over and lists and judges every
  // pod again.
  await first!.stop();
  first = undefined;
  await until("the new leader's full scan", async () => /"background scan: every pod judged"/.test(await second!.log()), 90_000);
  const tookOver = (await second!.log()).split("\n").find((line) => line.includes('"msg":"leader election: took over the Lease"'));
  assert.ok(tookOver, "the second replica took the Lease over rather than scanning beside the leader");
  assert.equal((JSON.parse(tookOver) as { reason?: string }).reason, "released", "taken over because the leader handed it back, not after it expired");
  const after = await reports("policyreports");
  assert.deepEqual([...after.keys()].sort(), [...before.keys()].sort(), "the same reports, one per pod");
  for (const [name, report] of after)
    assert.equal(report.metadata.resourceVersion, before.get(name)!.metadata.resourceVersion, `report ${name} was not rewritten: nothing changed`);
});

test("judging waits for the report writes: a held writer holds the scan at its bound, and every pod is reported once it lets go", async () => {
  // The scanner itself, on the pods of its own namespace in this apiserver, with a report writer the test holds
  // (the real writer's requests are the tests above): what is bounded is the scanner's queue, not the API.
  const ns = "scan-backpressure";
  const pods = MAX_REPORT_WRITES_WAITING * 3;
  assert.equal((await cluster.kubectl(["create", "namespace", ns])).code, 0);
  const items = Array.from({ length: pods }, (_, i) => ({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: `held-${i}`, namespace: ns },
    spec: { containers: [{ name: "app", image: "docker.io/library/nginx:1.25" }] },
  }));
  const created = await cluster.kubectl(["create", "-f", "-"], { input: JSON.stringify({ apiVersion: "v1", kind: "List", items }) });
  assert.equal(created.code, 0, created.stderr);

  const parsed = parsePolicyText(POLICY(""), "policies.yaml");
  assert.deepEqual(parsed.errors, []);
  const engine = await buildEngine({ config: structuredClone(DEFAULT_SERVER_CONFIG), policies: parsed.policies, offline: true });
  let judged = 0;
  let held: Array<() => void> | undefined = [];
  const written = new Map<string, number>();
  const reports: PolicyReportSink = {
    async write(scan) {
      if (held) await new Promise<void>((resolve) => held!.push(resolve));
      written.set(scan.resource.name, (written.get(scan.resource.name) ?? 0) + 1);
      return [];
    },
    clear: async () => [],
    refreshIndex: async () => {},
  };
  const scanner = new AuditScanner({
    engine,
    kube: loadKubeClient(cluster.kubeconfig),
    logger: pino({ level: "silent" }),
    reports,
    namespace: ns,
    podsPerSecond: 10_000,
    recorder: { podScanned: () => void judged++, fullScan() {}, watchRestarted() {}, reportWriteFailed() {}, reportSquatted() {} },
  });
  try {
    scanner.start();
    await until("the writer holding as many writes as the scanner lets wait", async () => held!.length >= MAX_REPORT_WRITES_WAITING);
    await sleep(500);
    // Judgments already under way when the bound was reached may each add one more.
    assert.ok(held!.length <= MAX_REPORT_WRITES_WAITING + MAX_JUDGMENTS_IN_FLIGHT, `${held!.length} writes waiting`);
    assert.ok(judged <= MAX_REPORT_WRITES_WAITING + MAX_JUDGMENTS_IN_FLIGHT, `${judged} of ${pods} pods judged while the writes waited`);
    const waiting = held!;
    held = undefined;
    for (const release of waiting) release();
    await until("every pod judged and reported", async () => written.size === pods && scanner.pending === 0);
    assert.equal(judged, pods);
    assert.deepEqual([...new Set(written.values())], [1], "each pod's report written once");
  } finally {
    // A scanner closes once its writes end: let go of any still held.
    const waiting = held ?? [];
    held = undefined;
    for (const release of waiting) release();
    await scanner.close();
    await engine.close();
  }
});

test("a list of several pages is kept as the scanner keeps pods, each page before the next is asked for: a large cluster's list never holds every parsed pod at once", async () => {
  const kube = loadKubeClient(cluster.kubeconfig);
  const events: string[] = [];
  // The real client, its page reads counted: each is one page of the list.
  const counted = new Proxy(kube, {
    get(target, name, receiver) {
      if (name !== "read") return Reflect.get(target, name, receiver);
      return (path: string, options?: Parameters<typeof kube.read>[1]) => {
        if (path.endsWith("/pods")) events.push("page");
        return target.read(path, options);
      };
    },
  });
  let listed: readonly string[] | undefined;
  const informer = new PodInformer<string>(
    counted,
    { upsert() {}, remove() {}, keep: (pod) => (events.push("kept"), `${pod.metadata?.name}`), listed: (pods) => (listed = pods) },
    { logger: pino({ level: "silent" }), namespace: NS, pageSize: 2 },
  );
  try {
    const names = await informer.list();
    assert.ok(names.length >= 4, `${names.length} pods in ${NS}`);
    assert.deepEqual(listed, names, "the table gets what it kept of every pod");
    const pages = events.join(" ").split("page ").filter(Boolean);
    assert.equal(pages.length, Math.ceil(names.length / 2), events.join(" "));
    // Each page's pods are kept before the next page is read.
    for (const [i, page] of pages.entries()) assert.equal(page.trim(), i < pages.length - 1 || names.length % 2 === 0 ? "kept kept" : "kept", events.join(" "));
  } finally {
    await informer.close();
    await kube.close();
  }
});
