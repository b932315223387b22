// A tenant squatting a pod's policy report, on a real etcd + kube-apiserver v1.20 with RBAC: a namespace editor
// who may create PolicyReports writes one under its pod's UID (the name Imprimatur gives that pod's report) saying
// "pass", before the background scan judges the pod. `imprimatur serve --background-scan` must not leave it: a
// report is Imprimatur's only with both its managed-by label and an owner reference to the pod, so the tenant's is
// replaced with Imprimatur's findings, and the squatting is reported (a Warning Event PolicyReportSquatted on the
// pod, imprimatur_policy_report_squatted_total, a log line). Where Imprimatur's own RBAC forbids the update, the
// report stays, reported once per judgment, and the server carries on.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { setTimeout as sleep } from "node:timers/promises";
import { startKubeCluster, type KubeCluster } from "../support/kube-cluster.ts";
import { startImprimatur, type ImprimaturProcess } from "../support/imprimatur-process.ts";
import { getText } from "../support/https-client.ts";
import { teardown } from "../support/teardown.ts";
import { parse as parseYaml, stringify as stringifyYaml } from "yaml";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
/** Scanned by a server whose RBAC allows updating reports. */
const OPEN = "tenant-open";
/** Scanned by a server that may create reports but not update them. */
const LOCKED = "tenant-locked";
const TENANT = "tenant-editor";
const LIMITED_SERVER = "imprimatur-without-update";

let cluster: KubeCluster;
let dir: string;
const servers: ImprimaturProcess[] = [];

const POLICY = `
apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: registries}
spec:
  rules:
    - {action: allow, images: ["registry.example.com/*"]}
  default: deny
  defaultMessage: only registry.example.com
`;

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "imprimatur-squat-e2e-"));
  cluster = await startKubeCluster();
  const applied = await cluster.kubectl(["apply", "-k", join(ROOT, "deploy/crds/reports")]);
  assert.equal(applied.code, 0, applied.stderr);
  assert.equal((await cluster.kubectl(["wait", "--for=condition=Established", "crd", "--all", "--timeout=60s"])).code, 0);
  await writeFile(join(dir, "policies.yaml"), POLICY);
  const rbac = [
    ...[OPEN, LOCKED].flatMap((namespace) => [
      { apiVersion: "v1", kind: "Namespace", metadata: { name: namespace } },
      // What a namespace editor may have: pods, and (where a policy tool's aggregated role grants it) reports.
      {
        apiVersion: "rbac.authorization.k8s.io/v1",
        kind: "Role",
        metadata: { name: "editor", namespace },
        rules: [
          { apiGroups: [""], resources: ["pods"], verbs: ["get", "list", "create"] },
          { apiGroups: ["wgpolicyk8s.io"], resources: ["policyreports"], verbs: ["get", "list", "create"] },
        ],
      },
      {
        apiVersion: "rbac.authorization.k8s.io/v1",
        kind: "RoleBinding",
        metadata: { name: "editor", namespace },
        roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: "editor" },
        subjects: [{ apiGroup: "rbac.authorization.k8s.io", kind: "User", name: TENANT }],
      },
    ]),
    // A server identity that reads everything and creates reports, Events and its Lease, but may not update reports.
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRole",
      metadata: { name: LIMITED_SERVER },
      rules: [
        { apiGroups: ["*"], resources: ["*"], verbs: ["get", "list", "watch"] },
        { apiGroups: ["wgpolicyk8s.io"], resources: ["policyreports", "clusterpolicyreports"], verbs: ["create", "delete"] },
        { apiGroups: [""], resources: ["events"], verbs: ["create", "patch"] },
        { apiGroups: ["coordination.k8s.io"], resources: ["leases"], verbs: ["create", "update"] },
      ],
    },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRoleBinding",
      metadata: { name: LIMITED_SERVER },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: LIMITED_SERVER },
      subjects: [{ apiGroup: "rbac.authorization.k8s.io", kind: "User", name: LIMITED_SERVER }],
    },
  ];
  const created = await cluster.apply(JSON.stringify({ apiVersion: "v1", kind: "List", items: rbac }));
  assert.equal(created.code, 0, created.stderr);
});

after(() => teardown([...servers.map((s) => () => s.stop()), () => cluster?.stop(), () => dir && rm(dir, { recursive: true, force: true })]));

/** kubectl as the tenant (impersonated: it has only the Role above). */
const asTenant = (args: string[], input?: string) => cluster.kubectl([`--as=${TENANT}`, ...args], input === undefined ? {} : { input });

/** The tenant's pod, which the policy denies (it never passed admission: no webhook is registered). */
async function tenantPod(namespace: string, name: string): Promise<{ name: string; uid: string }> {
  const pod = { apiVersion: "v1", kind: "Pod", metadata: { name, namespace }, spec: { containers: [{ name: "app", image: "docker.io/library/nginx:1.25" }] } };
  const created = await asTenant(["create", "-o", "json", "-f", "-"], JSON.stringify(pod));
  assert.equal(created.code, 0, created.stderr);
  return { name, uid: (JSON.parse(created.stdout) as { metadata: { uid: string } }).metadata.uid };
}

/** The tenant's own "all passed" report under the pod's UID, with the labels and owner references it chooses. */
async function squat(namespace: string, pod: { name: string; uid: string }, metadata: { labels?: Record<string, string>; ownedByPod?: boolean }) {
  const report = {
    apiVersion: "wgpolicyk8s.io/v1alpha2",
    kind: "PolicyReport",
    metadata: {
      name: pod.uid,
      namespace,
      ...(metadata.labels ? { labels: metadata.labels } : {}),
      ...(metadata.ownedByPod ? { ownerReferences: [{ apiVersion: "v1", kind: "Pod", name: pod.name, uid: pod.uid }] } : {}),
      annotations: { "tenant.example/note": "all good" },
    },
    scope: { apiVersion: "v1", kind: "Pod", name: pod.name, namespace, uid: pod.uid },
    summary: { pass: 1, fail: 0, warn: 0, error: 0, skip: 0 },
    results: [{ source: "imprimatur", policy: "registries", result: "pass", scored: true, message: "fine", timestamp: { seconds: 1, nanos: 0 } }],
  };
  const created = await asTenant(["create", "-f", "-"], JSON.stringify(report));
  assert.equal(created.code, 0, created.stderr);
}

/** `imprimatur serve --background-scan` with `kubeconfig`, scanning `namespace` only (the other is excluded). */
async function startScanner(kubeconfig: string, namespace: string): Promise<ImprimaturProcess> {
  const other = namespace === OPEN ? LOCKED : OPEN;
  const server = await startImprimatur([
    "--policies",
    join(dir, "policies.yaml"),
    "--kubeconfig",
    kubeconfig,
    "--background-scan",
    "--scan-reports",
    "wgpolicyk8s",
    "--scan-rate",
    "100",
    "--scan-lease",
    `${namespace}/imprimatur-scan`,
    "--scan-exclude-namespace",
    other,
  ]);
  servers.push(server);
  return server;
}

interface StoredReport {
  metadata: {
    resourceVersion: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    ownerReferences?: Array<{ kind: string; uid: string }>;
  };
  results?: Array<{ source: string; policy: string; result: string; message: string }>;
  summary?: Record<string, number>;
}

async function reportAt(namespace: string, uid: string): Promise<StoredReport> {
  const got = await cluster.kubectl(["get", "policyreports", "-n", namespace, uid, "-o", "json"]);
  assert.equal(got.code, 0, got.stderr);
  return JSON.parse(got.stdout) as StoredReport;
}

interface EventItem {
  reason: string;
  type: string;
  message: string;
  involvedObject: { kind: string; name: string; uid?: string };
}

async function squatEvents(namespace: string, pod: string): Promise<EventItem[]> {
  const got = await cluster.kubectl(["get", "events", "-n", namespace, "-o", "json"]);
  assert.equal(got.code, 0, got.stderr);
  return (JSON.parse(got.stdout) as { items: EventItem[] }).items.filter(
    (e) => e.reason === "PolicyReportSquatted" && e.involvedObject.kind === "Pod" && e.involvedObject.name === pod,
  );
}

async function until(what: string, check: () => Promise<boolean>, server: ImprimaturProcess, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting: ${what}\n${(await server.log()).slice(-3000)}`);
    await sleep(300);
  }
}

async function metricsOf(server: ImprimaturProcess): Promise<string> {
  const got = await getText(`${server.baseUrl}/metrics`, server.ca);
  assert.equal(got.status, 200);
  return got.text;
}

test("a namespace editor's PolicyReport at its pod's UID is replaced with Imprimatur's findings, and the squatting is reported", async () => {
  // Imprimatur's label without the owner reference, and the owner reference under another tool's label: neither
  // makes a report Imprimatur's.
  const labelled = await tenantPod(OPEN, "labelled");
  await squat(OPEN, labelled, { labels: { "app.kubernetes.io/managed-by": "imprimatur" } });
  const owned = await tenantPod(OPEN, "owned");
  await squat(OPEN, owned, { labels: { "app.kubernetes.io/managed-by": "kyverno" }, ownedByPod: true });

  const server = await startScanner(cluster.kubeconfig, OPEN);
  for (const pod of [labelled, owned]) {
    await until(`the report of ${pod.name} holds Imprimatur's findings`, async () => (await reportAt(OPEN, pod.uid)).summary?.fail === 1, server);
    const report = await reportAt(OPEN, pod.uid);
    assert.deepEqual(
      report.results?.map((r) => [r.source, r.policy, r.result, r.message]),
      [["imprimatur", "registries", "fail", "only registry.example.com"]],
      "nothing of the tenant's results is kept",
    );
    assert.deepEqual(report.summary, { pass: 0, fail: 1, warn: 0, error: 0, skip: 0 });
    assert.deepEqual(report.metadata.labels, { "app.kubernetes.io/managed-by": "imprimatur" });
    assert.deepEqual(
      report.metadata.ownerReferences?.map((o) => [o.kind, o.uid]),
      [["Pod", pod.uid]],
    );
    assert.equal(report.metadata.annotations?.["tenant.example/note"], undefined, "nothing of the tenant's metadata is kept");
    await until(`a PolicyReportSquatted Event on ${pod.name}`, async () => (await squatEvents(OPEN, pod.name)).length > 0, server);
    const [event] = await squatEvents(OPEN, pod.name);
    assert.equal(event!.type, "Warning");
    assert.equal(event!.involvedObject.uid, pod.uid);
    assert.match(event!.message, new RegExp(`PolicyReport ${OPEN}/${pod.uid}`));
    assert.match(event!.message, /overwritten/);
  }
  assert.match((await squatEvents(OPEN, "labelled"))[0]!.message, /managed by "imprimatur" but has no owner reference to this pod/);
  assert.match((await squatEvents(OPEN, "owned"))[0]!.message, /managed by "kyverno"/);
  assert.match(await metricsOf(server), /imprimatur_policy_report_squatted_total\{format="wgpolicyk8s",outcome="overwritten"\} 2\b/);
  const logged = (await server.log()).split("\n").filter((line) => line.includes("policy report squatted"));
  assert.equal(logged.length, 2, "one log line per squatted report");
});

test("where Imprimatur's RBAC forbids updating reports, a squatted report is reported and left, and the server carries on", async () => {
  const pod = await tenantPod(LOCKED, "locked");
  await squat(LOCKED, pod, {});
  const before = await reportAt(LOCKED, pod.uid);

  // The harness's kubeconfig, its current user impersonating LIMITED_SERVER (`as:`).
  const limited = parseYaml(await readFile(cluster.kubeconfig, "utf8")) as {
    "current-context": string;
    contexts: Array<{ name: string; context: { user: string } }>;
    users: Array<{ name: string; user: Record<string, unknown> }>;
  };
  const user = limited.contexts.find((c) => c.name === limited["current-context"])!.context.user;
  for (const u of limited.users) if (u.name === user) u.user.as = LIMITED_SERVER;
  const kubeconfig = join(dir, "limited.kubeconfig");
  await writeFile(kubeconfig, stringifyYaml(limited), { mode: 0o600 });
  const server = await startScanner(kubeconfig, LOCKED);

  await until("a PolicyReportSquatted Event on the pod", async () => (await squatEvents(LOCKED, pod.name)).length > 0, server);
  const [event] = await squatEvents(LOCKED, pod.name);
  assert.equal(event!.type, "Warning");
  assert.match(event!.message, /has no managed-by label/);
  assert.match(event!.message, /left: .*forbidden/);
  // Judged once: reported once, not retried in a loop (the next judgment is at the pod's next change or rescan).
  await sleep(3000);
  assert.match(await metricsOf(server), /imprimatur_policy_report_squatted_total\{format="wgpolicyk8s",outcome="left"\} 1\b/);
  assert.equal((await squatEvents(LOCKED, pod.name)).length, 1);
  assert.equal((await reportAt(LOCKED, pod.uid)).metadata.resourceVersion, before.metadata.resourceVersion, "left as the tenant wrote it");
  assert.equal((await getText(`${server.baseUrl}/healthz`, server.ca)).status, 200);
  assert.match(await server.log(), /policy report squatted/);
});
