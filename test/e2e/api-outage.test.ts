// The Kubernetes API gone while `serve --policy-crds` runs: the policy resources in force stay in force (the
// last set read), reviews go on being answered with them, and once the API is back the watch catches up with
// what changed meanwhile. A real etcd + kube-apiserver; serve reaches it through holding-api-proxy.ts, whose
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

const BLOCKING = {
  apiVersion: "imprimatur.dev/v1alpha1",
  kind: "ImagePolicy",
  metadata: { name: "no-blocked" },
  spec: { rules: [{ action: "deny", images: ["registry.example.com/blocked/*"], message: "blocked" }], default: "allow" },
};

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

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "imprimatur-e2e-api-outage-"));
  cluster = await startKubeCluster({});
  assert.equal((await cluster.kubectl(["apply", "-k", join(ROOT, "deploy/crds")])).code, 0);
  assert.equal((await cluster.kubectl(["wait", "--for=condition=Established", "crd", "--all", "--timeout=60s"])).code, 0);
  // serve's kubeconfig names the proxy (plain HTTP on loopback, which client-node takes only with
  // insecure-skip-tls-verify); the proxy verifies the apiserver with its CA.
  const kubeconfig = parse(await readFile(cluster.kubeconfig, "utf8")) as {
    clusters: Array<{ cluster: Record<string, unknown> }>;
  };
  const caPem = Buffer.from(String(kubeconfig.clusters[0]!.cluster["certificate-authority-data"]), "base64").toString("utf8");
  proxy = await startHoldingApiProxy({ upstream: cluster.url, caPem });
  for (const c of kubeconfig.clusters) c.cluster = { server: proxy.url, "insecure-skip-tls-verify": true };
  await writeFile(join(dir, "proxied.kubeconfig"), stringify(kubeconfig));
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
  const overridable = {
    apiVersion: "imprimatur.dev/v1alpha1",
    kind: "ImagePolicy",
    metadata: { name: "overridable" },
    spec: { rules: [{ action: "deny", images: ["registry.example.com/held/*"], message: "held" }], default: "allow", breakGlass: { allowed: true } },
  };
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
    const policy = {
      apiVersion: "imprimatur.dev/v1alpha1",
      kind: "ImagePolicy",
      metadata: { name: "status-refused" },
      spec: { rules: [{ action: "deny", images: ["registry.example.com/status-refused/*"], message: "refused" }], default: "allow" },
    };
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
  const policy = {
    apiVersion: "imprimatur.dev/v1alpha1",
    kind: "ImagePolicy",
    metadata: { name: "slow-listed" },
    spec: { rules: [{ action: "deny", images: ["registry.example.com/slow-listed/*"], message: "slow" }], default: "allow" },
  };
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
