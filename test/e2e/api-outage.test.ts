// The Kubernetes API gone while `serve --policy-crds` runs: the policy resources in force stay in force (the
// last set read), reviews go on being answered with them, and once the API is back the watch catches up with
// what changed meanwhile. Writes refused (a policy's status, its Events, the background scan's reports) cost
// nothing but the write: each is logged, and retried where the documentation says so. A real etcd + kube-apiserver; serve reaches it through holding-api-proxy.ts, whose
// cut() drops every connection of serve's (its watches included) and refuses new ones, which the apiserver cannot
// be told to do for one client.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parse, stringify } from "yaml";
import { startKubeCluster, type KubeCluster } from "../support/kube-cluster.ts";
import { startHoldingApiProxy, type HoldingApiProxy } from "../support/holding-api-proxy.ts";
import { startImprimatur, type ImprimaturProcess } from "../support/imprimatur-process.ts";
import { podReview } from "../support/admission.ts";
import { getText, postJson } from "../support/https-client.ts";
import { teardown } from "../support/teardown.ts";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
let cluster: KubeCluster;
let proxy: HoldingApiProxy;
let server: ImprimaturProcess;
let dir: string;

/** An ImagePolicy `name` that denies the images under registry.example.com/`prefix`/ with `message`, and allows the rest. */
function denying(name: string, prefix: string, message: string, extra: Record<string, unknown> = {}) {
  return {
    apiVersion: "imprimatur.dev/v1alpha1",
    kind: "ImagePolicy",
    metadata: { name },
    spec: { rules: [{ action: "deny", images: [`registry.example.com/${prefix}/*`], message }], default: "allow", ...extra },
  };
}

const BLOCKING = denying("no-blocked", "blocked", "blocked");

async function admits(image: string): Promise<boolean> {
  const res = await postJson(`${server.baseUrl}/validate`, server.ca, podReview({ images: [image] }));
  assert.equal(res.status, 200, res.text);
  return res.body.response.allowed === true;
}

async function until(what: string, check: () => Promise<boolean>, seconds = 60): Promise<void> {
  for (let i = 0; ; i++) {
    if (await check()) return;
    if (i > seconds * 5) throw new Error(`${what} did not happen; serve log:\n${(await server?.log())?.slice(-4000)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/**
 * A holding proxy in front of the cluster, and a kubeconfig in `dir` that names it (plain HTTP on loopback, which
 * client-node takes only with insecure-skip-tls-verify); the proxy verifies the apiserver with its CA.
 */
async function proxied(file: string): Promise<HoldingApiProxy> {
  const kubeconfig = parse(await readFile(cluster.kubeconfig, "utf8")) as {
    clusters: Array<{ cluster: Record<string, unknown> }>;
  };
  const caPem = Buffer.from(String(kubeconfig.clusters[0]!.cluster["certificate-authority-data"]), "base64").toString("utf8");
  const started = await startHoldingApiProxy({ upstream: cluster.url, caPem });
  for (const c of kubeconfig.clusters) c.cluster = { server: started.url, "insecure-skip-tls-verify": true };
  await writeFile(join(dir, file), stringify(kubeconfig));
  return started;
}

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "imprimatur-e2e-api-outage-"));
  cluster = await startKubeCluster({});
  assert.equal((await cluster.kubectl(["apply", "-k", join(ROOT, "deploy/crds")])).code, 0);
  assert.equal((await cluster.kubectl(["wait", "--for=condition=Established", "crd", "--all", "--timeout=60s"])).code, 0);
  // serve's kubeconfig names the proxy (plain HTTP on loopback, which client-node takes only with
  // insecure-skip-tls-verify); the proxy verifies the apiserver with its CA.
  proxy = await proxied("proxied.kubeconfig");
  assert.equal((await cluster.apply(stringify(BLOCKING))).code, 0);
  server = await startImprimatur(["--kubeconfig", join(dir, "proxied.kubeconfig"), "--policy-crds"]);
  await until("the policy resource in force", async () => !(await admits("registry.example.com/blocked/app:1")));
});

after(() => teardown([() => server?.stop(), () => proxy?.stop(), () => cluster?.stop(), () => (dir ? rm(dir, { recursive: true, force: true }) : undefined)]));

test("the API gone: the policy resources in force stay in force and reviews are answered; back, the watch catches up", async () => {
  proxy.cut();
  // Meanwhile the policy is deleted: serve cannot see it, and keeps enforcing what it last read.
  assert.equal((await cluster.kubectl(["delete", "imagepolicy", "no-blocked"])).code, 0);
  const outageEnds = Date.now() + 12_000;
  let reviews = 0;
  while (Date.now() < outageEnds) {
    assert.equal(await admits("registry.example.com/blocked/app:1"), false, "the policy in force before the outage still denies");
    assert.equal(await admits("registry.example.com/fine/app:1"), true);
    reviews++;
    await new Promise((r) => setTimeout(r, 500));
  }
  assert.ok(reviews >= 10);
  assert.equal((await getText(`${server.baseUrl}/readyz`, server.ca)).status, 200, "still ready: it answers with the set in force");
  assert.match(await server.log(), /policy resources.*failed; restarting after backoff/);
  proxy.restore();
  // Back: the watch lists or resumes, and the deletion made during the outage takes effect.
  await until("the deletion made during the outage takes effect", () => admits("registry.example.com/blocked/app:1"), 60);
});

test("the API not answering: a break-glass request is refused by the review's deadline with the reason, not answered late", async () => {
  const overridable = denying("overridable", "held", "held", { breakGlass: { allowed: true } });
  assert.equal((await cluster.apply(stringify(overridable))).code, 0);
  await until("the overridable policy in force", async () => !(await admits("registry.example.com/held/app:1")));
  const annotations = { "break-glass.image-policy.k8s.io/reason": "outage", "break-glass.image-policy.k8s.io/ticket": "INC-9" };
  // The admin (system:masters) may break glass: answered, the override is used.
  const asAdmin = podReview({ images: ["registry.example.com/held/app:1"], annotations, userInfo: { username: "admin", groups: ["system:masters"] } });
  const used = await postJson(`${server.baseUrl}/validate?timeout=3s`, server.ca, asAdmin);
  assert.equal(used.body.response.allowed, true, used.text);

  proxy.hold();
  try {
    // Another user, never asked about: the SubjectAccessReview waits at the proxy.
    const started = Date.now();
    const held = await postJson(
      `${server.baseUrl}/validate?timeout=2s`,
      server.ca,
      podReview({ images: ["registry.example.com/held/app:1"], annotations, userInfo: { username: "bob", groups: ["system:authenticated"] } }),
    );
    const took = Date.now() - started;
    assert.equal(held.status, 200);
    assert.equal(held.body.response.allowed, false);
    assert.match(
      held.body.response.status.message,
      /break-glass was requested by "bob", who may not use it on this policy: the authorizer did not answer before the review's deadline/,
    );
    assert.ok(took < 2_000, `answered within the request's timeout (took ${took} ms)`);
    assert.ok(
      proxy.requests.some((r) => r.held && r.path.includes("subjectaccessreviews")),
      "the question was sent and held",
    );
  } finally {
    proxy.release();
  }
});

test("policy status writes refused: the policy is enforced at once, and its status is written once the API takes writes again", async () => {
  const statusWrites = (r: { method: string; path: string }) => r.method === "PATCH" && r.path.endsWith("/imagepolicies/status-refused/status");
  proxy.refuse(statusWrites, 500);
  try {
    const policy = denying("status-refused", "status-refused", "refused");
    assert.equal((await cluster.apply(stringify(policy))).code, 0);
    await until("the policy in force although its status cannot be written", async () => !(await admits("registry.example.com/status-refused/app:1")));
    await until("a refused status write tried again", async () => proxy.requests.filter((r) => statusWrites(r) && r.status === 500).length >= 2, 30);
    assert.match(await server.log(), /could not write the status of a policy resource; trying again/);
    const ready = await cluster.kubectl(["get", "imagepolicy", "status-refused", "-o", 'jsonpath={.status.conditions[?(@.type=="Ready")].status}']);
    assert.equal(ready.stdout, "", "no status yet");
  } finally {
    proxy.refuse(undefined);
  }
  // Nothing else changes: the retry alone writes it (the backoff is at most a minute).
  await until(
    "the status written by a retry",
    async () =>
      (await cluster.kubectl(["get", "imagepolicy", "status-refused", "-o", 'jsonpath={.status.conditions[?(@.type=="Ready")].status}'])).stdout === "True",
    90,
  );
});

test("a slow LIST that does answer: a replica starting meanwhile waits for it, then enforces what it listed", async (t) => {
  const policy = denying("slow-listed", "slow-listed", "slow");
  assert.equal((await cluster.apply(stringify(policy))).code, 0);
  // Every list of policy resources (not the watches) takes 2.5 s: well under the 10 s a first list may take.
  const LIST_DELAY_MS = 2_500;
  proxy.delay((r) => r.method === "GET" && r.url.startsWith("/apis/imprimatur.dev/") && !/[?&]watch=(true|1)/.test(r.url), LIST_DELAY_MS);
  t.after(() => proxy.delay(undefined));
  const started = Date.now();
  const late = await startImprimatur(["--kubeconfig", join(dir, "proxied.kubeconfig"), "--policy-crds"]);
  t.after(() => late.stop());
  const tookMs = Date.now() - started;
  assert.ok(tookMs >= LIST_DELAY_MS, `ready only once the lists answered (took ${tookMs} ms)`);
  const res = await postJson(`${late.baseUrl}/validate`, late.ca, podReview({ images: ["registry.example.com/slow-listed/app:1"] }));
  assert.equal(res.body.response.allowed, false, "the policy it listed is enforced");
  assert.match(res.body.response.status.message, /denied by policy slow-listed/);
});

/** The Events written about the cluster-scoped ImagePolicy `name` (they go to the default namespace). */
async function eventsAbout(name: string): Promise<Array<{ reason: string; message: string }>> {
  const got = await cluster.kubectl(["get", "events", "-n", "default", "--field-selector", `involvedObject.name=${name}`, "-o", "json"]);
  assert.equal(got.code, 0, got.stderr);
  return (JSON.parse(got.stdout) as { items: Array<{ reason: string; message: string }> }).items;
}

test("Event writes refused: the Warning Event is dropped with a log line, the policy's status says why all the same, reviews go on", async () => {
  const eventWrites = (r: { method: string; path: string }) => r.method === "POST" && r.path.startsWith("/api/v1/namespaces/default/events");
  const broken = (pattern: string) => ({
    apiVersion: "imprimatur.dev/v1alpha1",
    kind: "ImagePolicy",
    metadata: { name: "event-refused" },
    spec: { rules: [{ action: "deny", images: [pattern] }], default: "allow" },
  });
  proxy.refuse(eventWrites, 500);
  try {
    assert.equal((await cluster.apply(stringify(broken("[registry.example.com/app")))).code, 0);
    await until(
      "the status says the policy is invalid",
      async () =>
        (await cluster.kubectl(["get", "imagepolicy", "event-refused", "-o", 'jsonpath={.status.conditions[?(@.type=="Ready")].reason}'])).stdout ===
        "InvalidPolicy",
    );
    await until("the refused Event logged", async () => /could not write a Kubernetes Event/.test(await server.log()), 30);
    assert.ok(
      proxy.requests.some((r) => eventWrites(r) && r.status === 500),
      "the Event was sent and refused",
    );
    assert.equal(await admits("registry.example.com/fine/app:1"), true, "reviews are answered meanwhile");
  } finally {
    proxy.refuse(undefined);
  }
  // Best effort: the dropped Event is not written later; the next generation's is.
  await new Promise((r) => setTimeout(r, 2_000));
  assert.deepEqual(await eventsAbout("event-refused"), [], "a dropped Event is not tried again");
  assert.equal((await cluster.apply(stringify(broken("[registry.example.com/other")))).code, 0);
  await until("the next generation's Event written", async () => (await eventsAbout("event-refused")).length === 1, 30);
  const [event] = await eventsAbout("event-refused");
  assert.equal(event!.reason, "InvalidPolicy");
  assert.match(event!.message, /other/);
  assert.equal((await cluster.kubectl(["delete", "imagepolicy", "event-refused"])).code, 0);
});

/** A namespace for the background scan, with the report CRDs, and the policy file the scanners judge it by. */
async function scanNamespace(namespace: string): Promise<{ policies: string }> {
  assert.equal((await cluster.kubectl(["apply", "-k", join(ROOT, "deploy/crds/reports")])).code, 0);
  assert.equal((await cluster.kubectl(["wait", "--for=condition=Established", "crd", "--all", "--timeout=60s"])).code, 0);
  assert.equal((await cluster.kubectl(["create", "namespace", namespace])).code, 0);
  const policies = join(dir, `${namespace}-policies.yaml`);
  await writeFile(policies, stringify(denying("retired", "retired", "retired")));
  return { policies };
}

/** A pod the scan reports (its image is retired); its uid, which names its report. */
async function createRetiredPod(namespace: string, name: string): Promise<string> {
  const pod = {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace },
    spec: { containers: [{ name: "app", image: "registry.example.com/retired/app:1" }] },
  };
  const created = await cluster.kubectl(["create", "-o", "json", "-f", "-"], { input: JSON.stringify(pod) });
  assert.equal(created.code, 0, created.stderr);
  return (JSON.parse(created.stdout) as { metadata: { uid: string } }).metadata.uid;
}

/** The names of the PolicyReports in `namespace` (each a pod's uid). */
async function reportNames(namespace: string): Promise<string[]> {
  const got = await cluster.kubectl(["get", "policyreports", "-n", namespace, "-o", "json"]);
  assert.equal(got.code, 0, got.stderr);
  return (JSON.parse(got.stdout) as { items: Array<{ metadata: { name: string } }> }).items.map((r) => r.metadata.name);
}

test("PolicyReport writes refused: logged, counted, and written by a retry once the API takes writes; a pod watch dropped meanwhile catches up", async (t) => {
  const NS = "scan-outage";
  const { policies } = await scanNamespace(NS);
  const uids = new Map<string, string>();
  const createPod = async (name: string) => uids.set(name, await createRetiredPod(NS, name));
  const reported = async (pod: string) => (await reportNames(NS)).includes(uids.get(pod)!);
  await createPod("first");
  const reportWrites = (r: { method: string; path: string }) => r.method !== "GET" && r.path.startsWith("/apis/wgpolicyk8s.io/");
  proxy.refuse(reportWrites, 500);
  const scanner = await startImprimatur([
    "--policies",
    policies,
    "--kubeconfig",
    join(dir, "proxied.kubeconfig"),
    "--background-scan",
    "--scan-rate",
    "100",
    "--scan-error-retry",
    "1s",
    "--scan-lease",
    `${NS}/imprimatur-scan`,
  ]);
  t.after(() => scanner.stop());
  try {
    await until("a refused report write logged", async () => /background scan: policy report not written/.test(await scanner.log()), 60);
    const metrics = (await getText(`${scanner.baseUrl}/metrics`, scanner.ca)).text;
    const failures = Number(/^imprimatur_scan_report_write_failures_total (\d+)/m.exec(metrics)?.[1] ?? "0");
    assert.ok(failures >= 1, `counted: ${failures}`);
    // Tried again after --scan-error-retry, not at the next rescan an hour later.
    await until("the write tried again", async () => proxy.requests.filter((r) => reportWrites(r) && r.status === 500).length >= 2, 30);
    assert.equal(await reported("first"), false);
  } finally {
    proxy.refuse(undefined);
  }
  await until("the report written by a retry, the pod unchanged", () => reported("first"), 30);

  // The pod watch dropped (every connection of serve's cut): a pod created meanwhile is judged once it resumes.
  proxy.cut();
  await createPod("second");
  await until("the dropped pod watch logged", async () => /pods: watch failed; restarting after backoff/.test(await scanner.log()), 30);
  proxy.restore();
  await until("the pod created while the watch was down reported", () => reported("second"), 60);
});

test("kill -9 during a status write: the write never lands, the restarted server writes it, and rewrites no status that already says the same", async (t) => {
  // The victim reaches the API through a proxy of its own, which holds its status write until the victim is dead.
  const victimProxy = await proxied("victim.kubeconfig");
  t.after(() => victimProxy.stop());
  const args = ["--kubeconfig", join(dir, "victim.kubeconfig"), "--policy-crds"];
  // Its own state folder, kept for the restart (as a pod's volume outlives its container).
  const stateDir = await mkdtemp(join(dir, "victim-"));
  const victim = await startImprimatur(args, { stateDir });
  const statusPath = "/apis/imprimatur.dev/v1alpha1/imagepolicies/killed-mid-write/status";
  const statusWrite = (r: { method: string; path: string }) => r.method === "PATCH" && r.path === statusPath;
  victimProxy.delay((r) => r.method === "PATCH" && r.url.startsWith(statusPath), 3_000);
  // Every replica writes the status: the file's own server is refused it for the test, so that only the
  // victim's write could land.
  proxy.refuse(statusWrite, 500);
  t.after(() => proxy.refuse(undefined));
  const policy = denying("killed-mid-write", "killed", "killed");
  assert.equal((await cluster.apply(stringify(policy))).code, 0);
  await until("the victim's status write in flight", async () => victimProxy.requests.some((r) => statusWrite(r) && r.status === 0), 30);
  process.kill(victim.pid, "SIGKILL");
  await victim.stop();
  await until("the write dropped: its writer is dead", async () => victimProxy.requests.some((r) => statusWrite(r) && r.dropped === true), 10);
  victimProxy.delay(undefined);
  const ready = async () =>
    (await cluster.kubectl(["get", "imagepolicy", "killed-mid-write", "-o", 'jsonpath={.status.conditions[?(@.type=="Ready")].status}'])).stdout;
  assert.equal(await ready(), "", "nothing landed");

  const before = victimProxy.requests.length;
  const restarted = await startImprimatur(args, { stateDir });
  t.after(() => restarted.stop());
  await until("the restarted server writes the status", async () => (await ready()) === "True", 60);
  // Every other policy's status already says what the restarted server would write: none is written again.
  const rewritten = victimProxy.requests.slice(before).filter((r) => r.method === "PATCH" && r.path.endsWith("/status") && r.path !== statusPath);
  assert.deepEqual(
    rewritten.map((r) => r.path),
    [],
  );
});

test("kill -9 during a PolicyReport write: the write never lands, and the restarted scanner writes the one report", async (t) => {
  const NS = "scan-kill";
  const { policies } = await scanNamespace(NS);
  const uid = await createRetiredPod(NS, "retired");
  const reports = () => reportNames(NS);
  const victimProxy = await proxied("scan-victim.kubeconfig");
  t.after(() => victimProxy.stop());
  const reportWrite = (r: { method: string; path: string }) => r.method !== "GET" && r.path.startsWith(`/apis/wgpolicyk8s.io/v1alpha2/namespaces/${NS}/`);
  victimProxy.delay((r) => reportWrite({ method: r.method, path: r.url.split("?")[0]! }), 3_000);
  const args = [
    "--policies",
    policies,
    "--kubeconfig",
    join(dir, "scan-victim.kubeconfig"),
    "--background-scan",
    "--scan-rate",
    "100",
    "--scan-lease",
    `${NS}/imprimatur-scan`,
  ];
  const stateDir = await mkdtemp(join(dir, "scan-victim-"));
  const victim = await startImprimatur(args, { stateDir });
  await until("the victim's report write in flight", async () => victimProxy.requests.some((r) => reportWrite(r) && r.status === 0), 60);
  process.kill(victim.pid, "SIGKILL");
  await victim.stop();
  await until("the write dropped: its writer is dead", async () => victimProxy.requests.some((r) => reportWrite(r) && r.dropped === true), 10);
  victimProxy.delay(undefined);
  assert.deepEqual(await reports(), [], "nothing landed");
  // The restart takes the scan Lease once the dead holder's expires, judges every pod, and writes its report.
  const restarted = await startImprimatur(args, { stateDir });
  t.after(() => restarted.stop());
  await until("the restarted scanner writes the report", async () => (await reports()).length > 0, 90);
  assert.deepEqual(await reports(), [uid], "one report, named for the pod");
});
