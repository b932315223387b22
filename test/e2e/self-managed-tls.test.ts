// Self-managed TLS (`serve --tls-secret`) on a real etcd + kube-apiserver: two Imprimatur replicas in-process share
// one Secret; the Lease holder creates and rotates it and writes the ValidatingWebhookConfiguration's caBundle; the
// apiserver calls both replicas (one webhook each, at 127.0.0.1) for every pod admission. The rotation timeline is
// shortened to seconds (CA 60 s renewed 35 s early, serving certificate 30 s renewed 12 s early) so that a CA
// rotation, serving-certificate switches and the old CA's expiry all happen during one stream of admissions.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createHash, X509Certificate } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { connect } from "node:tls";
import { fileURLToPath } from "node:url";
import { AdmissionregistrationV1Api, CoordinationV1Api, CoreV1Api, KubeConfig, V1MicroTime } from "@kubernetes/client-node";
import { pino, type Logger } from "pino";
import { DEFAULT_SERVER_CONFIG } from "../../src/config/server-config.ts";
import { hasStatus } from "../../src/kube/api-requests.ts";
import { KubeClient } from "../../src/kube/kube-client.ts";
import { loadKubeClient, loadKubeConnection } from "../../src/kube/kube-connection.ts";
import { startApp, type App } from "../../src/server/app.ts";
import { bundleFingerprints, parseCertificateBundle, parseRotationTimeline } from "../../src/tls/tls-rotation-plan.ts";
import { createCertificateAuthority, issueCertificate } from "../../src/tls/tls-bootstrap.ts";
import { startSelfManagedTls, type RunningSelfManagedTls } from "../../src/tls/tls-secret-manager.ts";
import { startKubeCluster, untilWebhookActive, urlWebhook, webhookConfiguration, webhookRule, type KubeCluster } from "../support/kube-cluster.ts";
import { teardown } from "../support/teardown.ts";
import { getText } from "../support/https-client.ts";
import { startHoldingApiProxy } from "../support/holding-api-proxy.ts";
import { watchTls } from "../support/tls-rotation-watch.ts";
import { podYaml } from "../support/manifests.ts";
import { freePort } from "../support/ports.ts";

const BIN = fileURLToPath(new URL("../../bin/imprimatur.js", import.meta.url));
const POLICIES = fileURLToPath(new URL("../fixtures/e2e-policies/", import.meta.url));
const NAMESPACE = "imprimatur";
const SECRET = "imprimatur-tls";
const LEASE = "imprimatur";
const CONFIGURATION = "imprimatur";
const TIMELINE = parseRotationTimeline("ca=60s/35s,cert=30s/12s,propagation=3s");
const SYNC_MS = 500;
const LEASE_MS = 3000;
const ALLOWED = podYaml("allowed", "e2e-tls", ["registry.example.com/app:1.0"]);
const DENIED = podYaml("denied", "e2e-tls", ["nginx:latest"]);

interface Replica {
  identity: string;
  tls: RunningSelfManagedTls;
  app: App;
  stateDir: string;
  logs: string[];
  stop(opts?: { release?: boolean }): Promise<void>;
}

let cluster: KubeCluster;
/** The replicas' client; the test's own reads and writes go through the generated clients below. */
let kube: KubeClient;
let core: CoreV1Api;
let admission: AdmissionregistrationV1Api;
let coordination: CoordinationV1Api;
const replicas = new Map<string, Replica>();

function logger(lines: string[]): Logger {
  return pino({ level: "info" }, { write: (line: string) => void lines.push(line) });
}

/** startSelfManagedTls in NAMESPACE with this file's timeline, sync interval and Lease duration. */
function startTls(o: { kube: KubeClient; secret: string; configuration: string; lease: string; identity: string; logger: Logger }) {
  return startSelfManagedTls({
    kube: o.kube,
    secret: { namespace: NAMESPACE, name: o.secret },
    webhookConfiguration: o.configuration,
    lease: { namespace: NAMESPACE, name: o.lease, identity: o.identity, durationMs: LEASE_MS },
    hosts: [],
    rotation: TIMELINE,
    syncIntervalMs: SYNC_MS,
    logger: o.logger,
  });
}

/** A replica (TLS and the app) of this file's Secret, or of `of`'s; `metricsPort` serves /readyz over plain HTTP. */
async function startReplica(
  identity: string,
  of: { secret: string; configuration: string; lease: string; metricsPort?: number } = { secret: SECRET, configuration: CONFIGURATION, lease: LEASE },
): Promise<Replica> {
  const logs: string[] = [];
  const log = logger(logs);
  const tls = await startTls({ kube, secret: of.secret, configuration: of.configuration, lease: of.lease, identity, logger: log });
  const stateDir = await mkdtemp(join(tmpdir(), `imprimatur-tls-${identity}-`));
  const app = await startApp({
    policies: POLICIES,
    host: "127.0.0.1",
    port: 0,
    stateDir,
    tls: { cert: tls.initial.cert, key: tls.initial.key },
    tlsUpdates: tls.tls,
    tlsHosts: [],
    config: DEFAULT_SERVER_CONFIG,
    logger: log,
    watchPolicies: false,
    ...(of.metricsPort !== undefined ? { metricsPort: of.metricsPort } : {}),
  });
  const replica: Replica = {
    identity,
    tls,
    app,
    stateDir,
    logs,
    stop: async (opts = {}) => {
      replicas.delete(identity);
      await app.close();
      await tls.close(opts);
      await rm(stateDir, { recursive: true, force: true });
    },
  };
  replicas.set(identity, replica);
  return replica;
}

async function readSecret() {
  const secret = await core.readNamespacedSecret({ namespace: NAMESPACE, name: SECRET });
  const data = Object.fromEntries(Object.entries(secret.data ?? {}).map(([k, v]) => [k, Buffer.from(v, "base64").toString("utf8")]));
  return { secret, data };
}

/** Fingerprints of each webhook's caBundle in the ValidatingWebhookConfiguration. */
async function webhookBundles(): Promise<string[][]> {
  const config = await admission.readValidatingWebhookConfiguration({ name: CONFIGURATION });
  return (config.webhooks ?? []).map((w) => bundleFingerprints(Buffer.from(w.clientConfig.caBundle ?? "", "base64").toString("utf8")));
}

async function leaseHolder(): Promise<string | undefined> {
  return (await coordination.readNamespacedLease({ namespace: NAMESPACE, name: LEASE })).spec?.holderIdentity;
}

/** The certificate a replica presents in a TLS handshake now (new connections), as PEM-independent DER. */
function servedCertificate(port: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: "127.0.0.1", port, rejectUnauthorized: false }, () => {
      const raw = socket.getPeerCertificate().raw;
      socket.end();
      resolve(raw);
    });
    socket.on("error", reject);
  });
}

const der = (pem: string) => new X509Certificate(pem).raw;
/** The fingerprint bundleFingerprints gives (SHA-256 of the DER, hex). */
const fingerprintOf = (cert: X509Certificate) => createHash("sha256").update(cert.raw).digest("hex");

async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe().catch(() => undefined);
    if (value !== undefined) return value;
    if (Date.now() > deadline)
      throw new Error(`timed out waiting for ${what}; logs:\n${[...replicas.values()].map((r) => `${r.identity}:\n${r.logs.slice(-20).join("")}`).join("\n")}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

function leader(): Replica {
  const r = [...replicas.values()].find((x) => x.tls.elector.isLeader());
  assert.ok(r, "one replica leads");
  return r;
}

/**
 * Pod admissions through the apiserver, one after another until stopped, alternating the allowed pod (must pass)
 * and the denied one (must be denied with the policy's message); anything else (a TLS error calling a webhook
 * among them) is a failure. `completed` holds when each admission ended.
 */
function admissionStream(): { completed: number[]; stop(): Promise<{ failures: string[]; completed: number[] }> } {
  const failures: string[] = [];
  const completed: number[] = [];
  let stopped = false;
  const running = (async () => {
    for (let i = 0; !stopped; i++) {
      const allowed = i % 2 === 0;
      const r = await cluster.kubectl(["create", "--dry-run=server", "-f", "-"], { input: allowed ? ALLOWED : DENIED });
      completed.push(Date.now());
      if (allowed ? r.code !== 0 : !r.stderr.includes("pin a version"))
        failures.push(`${allowed ? "allowed" : "denied"} pod at ${new Date().toISOString()}: ${r.stderr.trim()}`);
    }
  })();
  return {
    completed,
    async stop() {
      stopped = true;
      await running;
      return { failures, completed };
    },
  };
}

before(async () => {
  cluster = await startKubeCluster({ enableAdmissionPlugins: ["ValidatingAdmissionWebhook"] });
  kube = loadKubeClient(cluster.kubeconfig);
  const admin = new KubeConfig();
  admin.loadFromFile(cluster.kubeconfig);
  core = admin.makeApiClient(CoreV1Api);
  admission = admin.makeApiClient(AdmissionregistrationV1Api);
  coordination = admin.makeApiClient(CoordinationV1Api);
  for (const ns of [NAMESPACE, "e2e-tls"]) {
    const created = await cluster.apply(JSON.stringify({ apiVersion: "v1", kind: "Namespace", metadata: { name: ns } }));
    assert.equal(created.code, 0, created.stderr);
  }
});

after(() => teardown([...[...replicas.values()].map((r) => () => r.stop()), () => cluster?.stop()]));

test("one leader creates the Secret and writes the caBundle; both replicas serve the Secret's certificate", async () => {
  const [a, b] = await Promise.all([startReplica("replica-a"), startReplica("replica-b")]);
  const { secret, data } = await readSecret();
  assert.equal(secret.type, "kubernetes.io/tls");
  assert.deepEqual(Object.keys(data).sort(), ["ca.crt", "ca.key", "tls.crt", "tls.key"]);
  assert.equal(secret.metadata?.labels?.["app.kubernetes.io/managed-by"], "imprimatur");
  const holder = await leaseHolder();
  assert.ok(holder === "replica-a" || holder === "replica-b", `the Lease is held by a replica (${holder})`);
  assert.equal([a, b].filter((r) => r.tls.elector.isLeader()).length, 1, "exactly one replica leads");
  for (const r of [a, b]) assert.deepEqual(await servedCertificate(r.app.port), der(data["tls.crt"]!), `${r.identity} serves the Secret's certificate`);

  // The configuration is installed without a caBundle, one webhook per replica, as a Deployment's would be.
  const webhook = (r: Replica) =>
    urlWebhook(`${r.identity}.imprimatur.dev`, `https://127.0.0.1:${r.app.port}/validate`, {
      sideEffects: "NoneOnDryRun",
      rules: [webhookRule("pods")],
      namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "e2e-tls" } },
    });
  // v1.20 does not label namespaces with their name yet: label it.
  assert.equal((await cluster.kubectl(["label", "namespace", "e2e-tls", "kubernetes.io/metadata.name=e2e-tls", "--overwrite"])).code, 0);
  const applied = await cluster.apply(webhookConfiguration("ValidatingWebhookConfiguration", CONFIGURATION, [webhook(a), webhook(b)]));
  assert.equal(applied.code, 0, applied.stderr);

  const caFingerprints = bundleFingerprints((await readSecret()).data["ca.crt"]!);
  await until("the caBundle written by the leader", async () => {
    const bundles = await webhookBundles();
    return bundles.length === 2 && bundles.every((f) => f.join() === caFingerprints.join()) ? true : undefined;
  });
  await untilWebhookActive(cluster, DENIED, (probe) => probe.code !== 0 && probe.stderr.includes("pin a version"));
  const allowed = await cluster.kubectl(["create", "--dry-run=server", "-f", "-"], { input: ALLOWED });
  assert.equal(allowed.code, 0, allowed.stderr);
});

test("a CA rotation during a stream of admissions fails none; the old CA stays in the caBundle until it expires", async () => {
  const { data: before } = await readSecret();
  const oldCa = new X509Certificate(before["ca.crt"]!);
  const oldFingerprint = bundleFingerprints(before["ca.crt"]!)[0]!;
  const oldExpiry = oldCa.validToDate.getTime();
  const follower = [...replicas.values()].find((r) => !r.tls.elector.isLeader())!;

  let sawBothCas = false;
  let oldCaLeftAt: number | undefined;
  let followerSwitchedAt: number | undefined;
  const stream = admissionStream();
  const watch = (async () => {
    // Until the old CA has left every caBundle (and a little longer, for admissions after the switch).
    const deadline = oldExpiry + 60_000;
    while (Date.now() < deadline) {
      const bundles = await webhookBundles();
      if (bundles.every((f) => f.length >= 2 && f.includes(oldFingerprint))) sawBothCas = true;
      if (oldCaLeftAt === undefined && bundles.every((f) => !f.includes(oldFingerprint))) oldCaLeftAt = Date.now();
      const served = new X509Certificate(await servedCertificate(follower.app.port));
      if (!served.checkIssued(oldCa)) followerSwitchedAt ??= Date.now();
      if (oldCaLeftAt !== undefined && Date.now() > oldCaLeftAt + 5_000) break;
      await new Promise((r) => setTimeout(r, 250));
    }
  })();
  await watch;
  const { failures, completed } = await stream.stop();
  const admissions = completed.length;
  const admissionsAfterSwitch = completed.filter((at) => followerSwitchedAt !== undefined && at > followerSwitchedAt).length;

  assert.deepEqual(failures, [], `no admission failed (${admissions} in all)`);
  assert.ok(
    admissions - admissionsAfterSwitch > 0 && admissionsAfterSwitch > 0,
    `admissions ran before and after the switch to the new CA (${admissions} in all)`,
  );
  assert.ok(sawBothCas, "the new CA was trusted beside the old one");
  assert.ok(oldCaLeftAt !== undefined, "the old CA left the caBundle");
  assert.ok(oldCaLeftAt >= oldExpiry, `the old CA stayed in the caBundle until it expired (left ${oldCaLeftAt - oldExpiry} ms after)`);
  assert.ok(followerSwitchedAt !== undefined, `the follower (${follower.identity}) serves a certificate of the new CA, without a restart`);
  const { data: after } = await readSecret();
  assert.notEqual(bundleFingerprints(after["ca.crt"]!)[0], oldFingerprint, "the Secret's newest CA is a new one");
});

/** Each webhook's caBundle in the ValidatingWebhookConfiguration `name`, as certificates. */
async function webhookCaCertificates(name = CONFIGURATION): Promise<X509Certificate[][]> {
  const config = await admission.readValidatingWebhookConfiguration({ name });
  return (config.webhooks ?? []).map((w) =>
    parseCertificateBundle(Buffer.from(w.clientConfig.caBundle ?? "", "base64").toString("utf8")).map((ca) => new X509Certificate(ca.pem)),
  );
}

const issuedBy = (cert: X509Certificate, ca: X509Certificate) => cert.checkIssued(ca) && cert.verify(ca.publicKey);

test("the Secret deleted during a stream of admissions: none fails, and no replica serves a certificate whose CA the caBundle lacks", async () => {
  const serving = [...replicas.values()];
  assert.equal(serving.length, 2, "both replicas run");
  // watchTls reads the Secret and both configurations in one kubectl call: an empty MutatingWebhookConfiguration
  // of the name makes that read whole (the replicas write every webhook's caBundle, of which it has none).
  assert.equal((await cluster.apply(webhookConfiguration("MutatingWebhookConfiguration", CONFIGURATION, []))).code, 0);
  const watch = watchTls(cluster, { secret: `${NAMESPACE}/${SECRET}`, configuration: CONFIGURATION }, { intervalMs: 250 });
  // Served first, the caBundle read after: a certificate whose CA joined the bundle meanwhile is still judged
  // trusted, one whose CA the bundle lacks is caught.
  const untrusted: string[] = [];
  let servingChecks = 0;
  let checking = true;
  const checker = (async () => {
    while (checking) {
      try {
        const served = await Promise.all(serving.map(async (r) => ({ r, cert: new X509Certificate(await servedCertificate(r.app.port)) })));
        const bundles = await webhookCaCertificates();
        for (const { r, cert } of served)
          bundles.forEach((bundle, i) => {
            if (!bundle.some((ca) => issuedBy(cert, ca)))
              untrusted.push(
                `${new Date().toISOString()}: ${r.identity} serves ${cert.fingerprint256.slice(0, 17)} (by ${cert.issuer}), not signed by a CA of webhook ${i}'s caBundle`,
              );
          });
        servingChecks++;
      } catch {
        // a read that failed (a busy apiserver) is skipped
      }
      await sleep(100);
    }
  })();
  const stream = admissionStream();
  try {
    await until("admissions before the deletion", async () => (stream.completed.length >= 4 ? true : undefined));
    const { data: before } = await readSecret();
    const oldCas = bundleFingerprints(before["ca.crt"]!);
    await core.deleteNamespacedSecret({ namespace: NAMESPACE, name: SECRET });
    const deletedAt = Date.now();
    // The leader makes a new CA; every replica ends up serving a certificate it signed, without a restart.
    const newCa = await until("a new CA in the recreated Secret", async () => {
      const ca = parseCertificateBundle((await readSecret()).data["ca.crt"]!)[0]!;
      return oldCas.includes(ca.fingerprint) ? undefined : new X509Certificate(ca.pem);
    });
    for (const r of serving)
      await until(`${r.identity} serving a certificate of the new CA`, async () =>
        issuedBy(new X509Certificate(await servedCertificate(r.app.port)), newCa) ? true : undefined,
      );
    const switchedAt = Date.now();
    await until("admissions after the switch", async () => (stream.completed.filter((at) => at > switchedAt).length >= 4 ? true : undefined));
    const { failures, completed } = await stream.stop();
    checking = false;
    await checker;
    await watch.stop();
    assert.deepEqual(failures, [], `no admission failed (${completed.length} in all, ${completed.filter((at) => at > deletedAt).length} after the deletion)`);
    assert.deepEqual(untrusted, [], `every certificate served was signed by a CA of every caBundle (${servingChecks} checks)`);
    assert.ok(servingChecks > 0, "the served certificates were checked");
    assert.deepEqual(watch.violations, [], "no CA left ca.crt or a caBundle before it expired, and the Secret's certificate was always trusted");
  } finally {
    checking = false;
    await Promise.allSettled([stream.stop(), checker, watch.stop()]);
  }
});

test("when the leader stops without handing the Lease back, the other replica takes over and keeps the caBundle", async () => {
  const old = leader();
  const other = [...replicas.values()].find((r) => r !== old)!;
  await old.stop({ release: false });
  await until("the Lease taken over", async () => ((await leaseHolder()) === other.identity && other.tls.elector.isLeader() ? true : undefined), LEASE_MS * 5);
  // The new leader is the writer now: a caBundle changed behind its back is written again.
  const config = await admission.readValidatingWebhookConfiguration({ name: CONFIGURATION });
  for (const w of config.webhooks ?? []) w.clientConfig.caBundle = Buffer.from(`${(await readSecret()).data["tls.crt"]}`).toString("base64");
  await admission.replaceValidatingWebhookConfiguration({ name: CONFIGURATION, body: config });
  const wanted = bundleFingerprints((await readSecret()).data["ca.crt"]!).join();
  await until("the caBundle restored by the new leader", async () => ((await webhookBundles()).every((f) => f.join() === wanted) ? true : undefined));
});

test("a restarted replica keeps the CA: the Secret's CA and the caBundle are unchanged, the certificate it serves is the Secret's", async () => {
  for (const r of [...replicas.values()]) await r.stop();
  const { data: before } = await readSecret();
  const restarted = await startReplica("replica-c");
  await until("the restarted replica leading", async () => (restarted.tls.elector.isLeader() ? true : undefined), LEASE_MS * 5);
  // A few leader rounds.
  await new Promise((r) => setTimeout(r, SYNC_MS * 4));
  const { data: after } = await readSecret();
  // Every CA from before the restart is still there (unless it expired meanwhile: the timeline is short).
  const kept = bundleFingerprints(after["ca.crt"]!);
  for (const ca of parseCertificateBundle(before["ca.crt"]!))
    if (ca.notAfter > Date.now()) assert.ok(kept.includes(ca.fingerprint), "the CA from before the restart is kept");
  // The timeline is short: the leader may rotate the certificate at any moment, and a replica swaps it in a
  // moment later. What must hold is that it serves the Secret's certificate, not one of its own.
  await until("the restarted replica serving the Secret's certificate", async () =>
    Buffer.compare(await servedCertificate(restarted.app.port), der((await readSecret()).data["tls.crt"]!)) === 0 ? true : undefined,
  );
  await until("the caBundle holding the Secret's CAs", async () => {
    const wanted = bundleFingerprints((await readSecret()).data["ca.crt"]!).join();
    return (await webhookBundles()).every((f) => f.join() === wanted) ? true : undefined;
  });
});

/** Grants `account` `namespaced` rules in NAMESPACE (a Role) and `cluster` rules (a ClusterRole), both named `name`. */
async function grant(name: string, account: string, rules: { namespaced: object[]; cluster: object[] }): Promise<void> {
  const subjects = [{ kind: "User", name: account }];
  const rbac = [
    { apiVersion: "rbac.authorization.k8s.io/v1", kind: "Role", metadata: { name, namespace: NAMESPACE }, rules: rules.namespaced },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "RoleBinding",
      metadata: { name, namespace: NAMESPACE },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name },
      subjects,
    },
    { apiVersion: "rbac.authorization.k8s.io/v1", kind: "ClusterRole", metadata: { name }, rules: rules.cluster },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRoleBinding",
      metadata: { name },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name },
      subjects,
    },
  ];
  const applied = await cluster.apply(JSON.stringify({ apiVersion: "v1", kind: "List", items: rbac }));
  assert.equal(applied.code, 0, applied.stderr);
}

/** The admin credentials, impersonating `account` (which then has only what it was granted). */
function impersonating(account: string): KubeClient {
  return new KubeClient({ ...loadKubeConnection(cluster.kubeconfig), impersonate: account });
}

/** The same, as a kubeconfig file's text (`as: account`). */
function impersonatingKubeconfig(account: string): string {
  const limited = new KubeConfig();
  limited.loadFromFile(cluster.kubeconfig);
  const user = limited.getCurrentUser()!.name;
  limited.users = limited.users.map((u) => (u.name === user ? { ...u, impersonateUser: account } : u));
  return limited.exportConfig();
}

/** `imprimatur serve --tls-secret NAMESPACE/secret` as a command, as pod `podName`, with its output collected. */
function spawnServe(opts: { port: number; stateDir: string; kubeconfig: string; secret: string; lease: string; podName: string; extra?: string[] }) {
  const child = spawn(
    process.execPath,
    [
      BIN,
      "serve",
      "--host",
      "127.0.0.1",
      "--port",
      String(opts.port),
      "--state-dir",
      opts.stateDir,
      "--policies",
      POLICIES,
      "--kubeconfig",
      opts.kubeconfig,
      "--tls-secret",
      `${NAMESPACE}/${opts.secret}`,
      "--webhook-configuration",
      CONFIGURATION,
      "--leader-election-namespace",
      NAMESPACE,
      "--leader-election-id",
      opts.lease,
      ...(opts.extra ?? []),
    ],
    { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, POD_NAME: opts.podName, POD_NAMESPACE: "" } },
  );
  let output = "";
  child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  return { child, exited, output: () => output };
}

test("serve --tls-secret as a command: waits for the Lease, serves the Secret's certificate, hands the Lease back on SIGTERM", async () => {
  for (const r of [...replicas.values()]) await r.stop();
  const port = await freePort();
  const stateDir = await mkdtemp(join(tmpdir(), "imprimatur-tls-cli-"));
  const { child, exited, output } = spawnServe({
    port,
    stateDir,
    kubeconfig: cluster.kubeconfig,
    secret: SECRET,
    lease: LEASE,
    podName: "serve-cli",
    extra: ["--drain", "0", "--tls-timeline", "ca=60s/35s,cert=30s/12s,propagation=3s", "--tls-sync-interval", "500ms"],
  });
  try {
    await until(
      "serve's /readyz through the Secret's CA bundle",
      async () => ((await getText(`https://127.0.0.1:${port}/readyz`, (await readSecret()).data["ca.crt"]!)).status === 200 ? true : undefined),
      30_000,
    ).catch((e: Error) => assert.fail(`${e.message}\n${output()}`));
    assert.equal(await leaseHolder(), "serve-cli", output());
    // Two reads are two moments: with this timeline the leader renews the certificate every 18 s, and serve takes
    // the Secret's new one up to a sync interval (500 ms) later. Serving the Secret's certificate means both agree
    // within a few intervals, not at one instant that may fall between a renewal and serve's next sync.
    let served: Buffer | undefined;
    let stored: Buffer | undefined;
    await until(
      "serve serves the Secret's certificate",
      async () => {
        served = await servedCertificate(port);
        stored = der((await readSecret()).data["tls.crt"]!);
        return served.equals(stored) ? true : undefined;
      },
      5_000,
    ).catch(() => assert.deepEqual(served, stored, output()));
    assert.doesNotMatch(output(), /caBundle: /, "no configuration to apply by hand is printed: the caBundle is written through the API");
  } finally {
    child.kill("SIGTERM");
    assert.equal(await exited, 0, output());
    await rm(stateDir, { recursive: true, force: true });
  }
  assert.equal(await leaseHolder(), "", "the Lease was handed back");
});

test("kill -9 of the leading serve process during a CA rotation: the other takes the Lease once it expires, keeps every CA in the caBundle, and finishes the rotation", async () => {
  for (const r of [...replicas.values()]) await r.stop();
  const extra = ["--drain", "0", "--tls-timeline", "ca=60s/35s,cert=30s/12s,propagation=3s", "--tls-sync-interval", "500ms"];
  const stateDir = await mkdtemp(join(tmpdir(), "imprimatur-tls-kill-"));
  const processes = new Map<string, ReturnType<typeof spawnServe> & { port: number }>();
  for (const podName of ["serve-a", "serve-b"]) {
    const port = await freePort();
    const running = spawnServe({ port, stateDir: join(stateDir, podName), kubeconfig: cluster.kubeconfig, secret: SECRET, lease: LEASE, podName, extra });
    processes.set(podName, { ...running, port });
  }
  const outputs = () => [...processes].map(([name, p]) => `${name}:\n${p.output().slice(-3000)}`).join("\n");
  try {
    const holder = await until("a leader among the two processes", async () => {
      const name = await leaseHolder();
      return name !== undefined && processes.has(name) ? name : undefined;
    }).catch((e: Error) => assert.fail(`${e.message}\n${outputs()}`));
    // The moment: a CA the Secret did not hold joins it (the leader has begun a rotation; with this timeline one
    // begins every 25 s), and the leader is killed before it can hand anything over.
    const casAtStart = bundleFingerprints((await readSecret()).data["ca.crt"]!);
    await until(
      "a CA rotation begun",
      async () => (bundleFingerprints((await readSecret()).data["ca.crt"]!).some((f) => !casAtStart.includes(f)) ? true : undefined),
      60_000,
    ).catch((e: Error) => assert.fail(`${e.message}\n${outputs()}`));
    const leading = processes.get(holder)!;
    leading.child.kill("SIGKILL");
    await leading.exited;
    const killedAt = Date.now();
    const secretAtKill = parseCertificateBundle((await readSecret()).data["ca.crt"]!);
    const survivor = [...processes.keys()].find((name) => name !== holder)!;
    await until("the survivor takes the Lease", async () => ((await leaseHolder()) === survivor ? true : undefined), 40_000).catch((e: Error) =>
      assert.fail(`${e.message}\n${outputs()}`),
    );
    // The Lease lasts 15 s and is not handed back by a killed holder; the survivor reads it every sync interval.
    const tookMs = Date.now() - killedAt;
    assert.ok(tookMs <= 15_000 + 5_000, `taken over ${tookMs} ms after the kill: within the Lease's 15 s and a few sync intervals`);
    // Nothing the dead leader published is lost: every CA of the Secret at the kill that has not expired is in every
    // webhook's caBundle. The leader writes a new CA to the Secret before it publishes the caBundle (a serving
    // certificate waits for the caBundle, so that order is safe); killed between the two, it leaves the caBundle to
    // the survivor, which publishes it in the round it takes the Lease in, a moment after the Lease reads as taken.
    let missing: string[] = [];
    await until(
      "every CA of the Secret at the kill in every caBundle",
      async () => {
        const bundles = await webhookBundles();
        missing = secretAtKill.filter((ca) => ca.notAfter > Date.now() && !bundles.every((b) => b.includes(ca.fingerprint))).map((ca) => ca.fingerprint);
        return missing.length === 0 ? true : undefined;
      },
      3 * 500 + 2_000,
    ).catch(() => assert.fail(`the caBundle lost ${missing.join(", ")} after the survivor took the Lease\n${outputs()}`));
    // The new leader carries the rotation on: the Secret's certificate is served by the survivor, under a CA the caBundles hold.
    const { port } = processes.get(survivor)!;
    await until(
      "the survivor serves the Secret's certificate, trusted by every caBundle",
      async () => {
        const { data } = await readSecret();
        if (!(await servedCertificate(port)).equals(der(data["tls.crt"]!))) return undefined;
        const issuer = parseCertificateBundle(data["ca.crt"]!).find((ca) => new X509Certificate(data["tls.crt"]!).checkIssued(new X509Certificate(ca.pem)));
        return issuer && (await webhookBundles()).every((b) => b.includes(issuer.fingerprint)) ? true : undefined;
      },
      60_000,
    ).catch((e: Error) => assert.fail(`${e.message}\n${outputs()}`));
  } finally {
    for (const p of processes.values()) if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill("SIGTERM");
    await Promise.all([...processes.values()].map((p) => p.exited));
    await rm(stateDir, { recursive: true, force: true });
  }
});

test("serve --tls-secret stopped while it waits for a certificate that cannot come hands the Lease back and exits 0", async () => {
  // An identity that may hold the Lease but not read or create the Secret: as leader it can never write the
  // certificate, so start-up waits; SIGTERM then must not leave the Lease held until it expires.
  const account = "system:serviceaccount:imprimatur:lease-only";
  const lease = "stuck-lease";
  await grant("lease-only", account, {
    namespaced: [
      { apiGroups: ["coordination.k8s.io"], resources: ["leases"], verbs: ["create"] },
      { apiGroups: ["coordination.k8s.io"], resources: ["leases"], resourceNames: [lease], verbs: ["get", "update"] },
    ],
    // The policies bind by namespaceSelector: serve reads the namespaces' labels before it waits for TLS.
    cluster: [{ apiGroups: [""], resources: ["namespaces"], verbs: ["get", "list", "watch"] }],
  });
  const stateDir = await mkdtemp(join(tmpdir(), "imprimatur-tls-stuck-"));
  const kubeconfig = join(stateDir, "lease-only.kubeconfig");
  await writeFile(kubeconfig, impersonatingKubeconfig(account));
  const holder = async () => (await coordination.readNamespacedLease({ namespace: NAMESPACE, name: lease })).spec?.holderIdentity;
  const { child, exited, output } = spawnServe({ port: await freePort(), stateDir, kubeconfig, secret: "out-of-reach-tls", lease, podName: "serve-stuck" });
  try {
    await until("the stuck replica holds the Lease", async () => ((await holder().catch(() => undefined)) === "serve-stuck" ? true : undefined), 30_000).catch(
      (e: Error) => assert.fail(`${e.message}\n${output()}`),
    );
    assert.match(output(), /waiting for the serving certificate/);
  } finally {
    child.kill("SIGTERM");
    assert.equal(await exited, 0, output());
    await rm(stateDir, { recursive: true, force: true });
  }
  assert.match(output(), /stopped before serving/);
  assert.equal(await holder(), "", `the Lease was handed back at once, not left to expire\n${output()}`);
});

test("the documented RBAC is enough: a replica whose identity has only those verbs creates the Secret and the Lease and writes the caBundle", async () => {
  for (const r of [...replicas.values()]) await r.stop();
  const account = "system:serviceaccount:imprimatur:tls-writer";
  await grant("tls-writer", account, {
    namespaced: [
      // create cannot be limited by name; get and update can.
      { apiGroups: [""], resources: ["secrets"], verbs: ["create"] },
      { apiGroups: [""], resources: ["secrets"], resourceNames: ["rbac-tls"], verbs: ["get", "update"] },
      { apiGroups: ["coordination.k8s.io"], resources: ["leases"], verbs: ["create"] },
      { apiGroups: ["coordination.k8s.io"], resources: ["leases"], resourceNames: ["rbac-lease"], verbs: ["get", "update"] },
    ],
    cluster: [
      {
        apiGroups: ["admissionregistration.k8s.io"],
        resources: ["validatingwebhookconfigurations", "mutatingwebhookconfigurations"],
        resourceNames: [CONFIGURATION],
        verbs: ["get", "update"],
      },
    ],
  });

  // The admin credentials, impersonating an identity that has only the rules above.
  const limited = impersonating(account);
  const logs: string[] = [];
  const running = await startSelfManagedTls({
    kube: limited,
    secret: { namespace: NAMESPACE, name: "rbac-tls" },
    webhookConfiguration: CONFIGURATION,
    lease: { namespace: NAMESPACE, name: "rbac-lease", identity: "replica-rbac", durationMs: LEASE_MS },
    hosts: [],
    rotation: TIMELINE,
    syncIntervalMs: SYNC_MS,
    logger: logger(logs),
  });
  try {
    const secret = await core.readNamespacedSecret({ namespace: NAMESPACE, name: "rbac-tls" });
    const ca = Buffer.from(secret.data!["ca.crt"]!, "base64").toString("utf8");
    assert.equal((await coordination.readNamespacedLease({ namespace: NAMESPACE, name: "rbac-lease" })).spec?.holderIdentity, "replica-rbac");
    assert.ok(bundleFingerprints(ca).length > 0, "the Secret holds a CA");
    // Compared with the Secret as it stands: the new Secret keeps the CAs the shared configuration trusted (the
    // other Secret's), which expire within the short timeline and then leave it.
    await until("the caBundle written under the limited identity", async () => {
      const wanted = bundleFingerprints(
        Buffer.from((await core.readNamespacedSecret({ namespace: NAMESPACE, name: "rbac-tls" })).data!["ca.crt"]!, "base64").toString(),
      );
      return (await webhookBundles()).every((f) => f.join() === wanted.join()) ? true : undefined;
    }).catch((e: Error) => assert.fail(`${e.message}\n${logs.join("")}`));
    // The Lease is renewed (update) under the same identity.
    const firstRenewal = String((await coordination.readNamespacedLease({ namespace: NAMESPACE, name: "rbac-lease" })).metadata?.resourceVersion);
    await until("a renewal of the Lease", async () =>
      (await coordination.readNamespacedLease({ namespace: NAMESPACE, name: "rbac-lease" })).metadata?.resourceVersion !== firstRenewal ? true : undefined,
    );
    assert.doesNotMatch(logs.join(""), /forbidden|HTTP 403/i, "no request was refused");
    // The identity really is limited: the other Secret is out of its reach.
    await assert.rejects(limited.read(`/api/v1/namespaces/${NAMESPACE}/secrets/${SECRET}`), (e: unknown) => hasStatus(e, 403));
  } finally {
    await running.close();
  }
});

test("a stalled leader that lost the Lease cannot write the caBundle it planned over a newer one", async () => {
  // A real apiserver cannot be told to pause one client between its read and its write: the stalled replica's
  // API calls go through holding-api-proxy.ts, which holds them from the moment the replica announces that it
  // is about to write the caBundle. Its own Secret, Lease and configuration keep it apart from the other tests.
  const config = "imprimatur-stall";
  const secret = "stall-tls";
  const lease = "stall-lease";
  const { ca, ...current } = loadKubeConnection(cluster.kubeconfig);
  assert.ok(ca && "pem" in ca, "the admin kubeconfig holds its CA inline");
  const proxy = await startHoldingApiProxy({ upstream: current.server, caPem: ca.pem });
  // The hop to the proxy is plain HTTP on loopback; the proxy verifies the apiserver.
  const proxied = new KubeClient({ ...current, server: proxy.url });
  // A webhook nothing calls (no namespace has the label): only its caBundle matters here.
  const stall = urlWebhook("stall.imprimatur.dev", "https://127.0.0.1:1/validate", {
    rules: [webhookRule("pods")],
    namespaceSelector: { matchLabels: { "imprimatur.dev/never": "true" } },
  });
  assert.equal((await cluster.apply(webhookConfiguration("ValidatingWebhookConfiguration", config, [stall]))).code, 0);
  const secretCas = async () =>
    bundleFingerprints(Buffer.from((await core.readNamespacedSecret({ namespace: NAMESPACE, name: secret })).data!["ca.crt"]!, "base64").toString());
  const bundleIs = async (wanted: string[]) =>
    (await webhookCaCertificates(config)).every((b) => b.map((c) => fingerprintOf(c)).join() === wanted.join()) ? true : undefined;

  let armed = false;
  const stalledLogs: string[] = [];
  const stalledLogger = pino(
    { level: "info" },
    {
      write: (line: string) => {
        stalledLogs.push(line);
        // pino writes as the replica logs: the hold starts before the replica's next request.
        if (armed && line.includes('"step":"publish-ca-bundle"')) proxy.hold();
      },
    },
  );
  const setup = (client: KubeClient, identity: string, log: Logger) => startTls({ kube: client, secret, configuration: config, lease, identity, logger: log });
  const nextLogs: string[] = [];
  let stalled: RunningSelfManagedTls | undefined;
  let next: RunningSelfManagedTls | undefined;
  try {
    stalled = await Promise.race([
      setup(proxied, "stalled-leader", stalledLogger),
      sleep(30_000, undefined, { ref: false }).then(() => assert.fail(`the proxied replica never served\n${stalledLogs.join("")}`)),
    ]);
    assert.ok(stalled.elector.isLeader(), "the proxied replica leads");
    const oldCas = await secretCas();
    await until("the first caBundle", () => bundleIs(oldCas));
    next = await setup(kube, "next-leader", logger(nextLogs));

    // A caBundle edited behind the leader's back: it plans to write the Secret's bundle again, and stalls there.
    armed = true;
    const edited = await admission.readValidatingWebhookConfiguration({ name: config });
    for (const w of edited.webhooks ?? []) w.clientConfig.caBundle = "";
    await admission.replaceValidatingWebhookConfiguration({ name: config, body: edited });
    await until("the leader stalled as it writes the caBundle", async () => (proxy.requests.some((r) => r.held) ? true : undefined));

    // Meanwhile the other replica takes the Lease, the Secret is deleted, and the new leader publishes a new CA
    // and serves a certificate it signed.
    await until("the other replica leading", async () => (next!.elector.isLeader() ? true : undefined), LEASE_MS * 5);
    await until("the caBundle restored by the new leader", () => bundleIs(oldCas));
    await core.deleteNamespacedSecret({ namespace: NAMESPACE, name: secret });
    const newCa = await until("a new CA in the recreated Secret", async () => {
      const ca = parseCertificateBundle(
        Buffer.from((await core.readNamespacedSecret({ namespace: NAMESPACE, name: secret })).data!["ca.crt"]!, "base64").toString(),
      )[0]!;
      return oldCas.includes(ca.fingerprint) ? undefined : new X509Certificate(ca.pem);
    });
    await until("the new leader serving a certificate of the new CA", async () =>
      issuedBy(new X509Certificate(next!.tls.current()!.cert), newCa) ? true : undefined,
    ).catch((e: Error) => assert.fail(`${e.message}\n${nextLogs.join("")}`));

    // The stalled leader wakes up and finishes the step it planned before it lost the Lease.
    const firstHeld = proxy.requests.findIndex((r) => r.held);
    proxy.release();
    await stalled.close({ release: false });
    const writes = proxy.requests
      .slice(firstHeld)
      .filter((r) => r.method === "PUT" && r.path.endsWith(`/validatingwebhookconfigurations/${config}`) && r.status >= 200 && r.status < 300);
    assert.deepEqual(
      writes.map((w) => `PUT ${w.path} -> ${w.status}`),
      [],
      `the stalled leader wrote no caBundle after it lost the Lease\n${stalledLogs.slice(-10).join("")}`,
    );
    assert.ok(
      (await webhookCaCertificates(config)).every((b) => b.some((ca) => fingerprintOf(ca) === fingerprintOf(newCa))),
      "the caBundle still holds the new CA",
    );
  } finally {
    // The proxy first: a replica whose requests it still holds could not stop.
    await teardown([() => proxy.stop(), () => stalled?.close({ release: false }), () => next?.close()]);
  }
});

test("whoever can write the Secret cannot make a replica serve a certificate the caBundle does not trust; once its own expires, /readyz says why", async () => {
  const secret = "written-tls";
  const config = "imprimatur-written";
  const lease = "written-lease";
  // Someone else holds the Lease for an hour: the replica only reads, as every replica but the leader does.
  const now = new V1MicroTime(Date.now());
  await coordination.createNamespacedLease({
    namespace: NAMESPACE,
    body: {
      metadata: { name: lease, namespace: NAMESPACE },
      spec: { holderIdentity: "elsewhere", leaseDurationSeconds: 3600, acquireTime: now, renewTime: now },
    },
  });
  const trusted = await createCertificateAuthority("trusted-ca");
  const leaf = await issueCertificate(trusted, { commonName: "imprimatur-webhook", ipAddresses: ["127.0.0.1"], notAfter: Date.now() + 20_000 });
  const b64 = (text: string) => Buffer.from(text).toString("base64");
  const tlsData = (ca: { certPem: string; keyPem: string }, cert: { certPem: string; keyPem: string }) => ({
    "ca.crt": b64(ca.certPem),
    "ca.key": b64(ca.keyPem),
    "tls.crt": b64(cert.certPem),
    "tls.key": b64(cert.keyPem),
  });
  await core.createNamespacedSecret({
    namespace: NAMESPACE,
    body: {
      metadata: { name: secret, namespace: NAMESPACE, labels: { "app.kubernetes.io/managed-by": "imprimatur" } },
      type: "kubernetes.io/tls",
      data: tlsData(trusted, leaf),
    },
  });
  const written = urlWebhook("written.imprimatur.dev", "https://127.0.0.1:1/validate", {
    caPem: trusted.certPem,
    rules: [webhookRule("pods")],
    namespaceSelector: { matchLabels: { "imprimatur.dev/never": "true" } },
  });
  assert.equal((await cluster.apply(webhookConfiguration("ValidatingWebhookConfiguration", config, [written]))).code, 0);
  const metricsPort = await freePort();
  const replica = await startReplica("replica-written", { secret, configuration: config, lease, metricsPort });
  assert.deepEqual(await servedCertificate(replica.app.port), der(leaf.certPem), "the replica serves the Secret's certificate");

  // The Secret rewritten with another CA and a certificate it signed; the caBundle still holds the first CA only.
  const other = await createCertificateAuthority("other-ca");
  const otherLeaf = await issueCertificate(other, { commonName: "imprimatur-webhook", ipAddresses: ["127.0.0.1"] });
  const current = await core.readNamespacedSecret({ namespace: NAMESPACE, name: secret });
  await core.replaceNamespacedSecret({ namespace: NAMESPACE, name: secret, body: { ...current, data: tlsData(other, otherLeaf) } });
  await until("the replica holding the Secret's new certificate back", async () =>
    replica.logs.some((l) => l.includes("is not served yet")) ? true : undefined,
  ).catch((e: Error) => assert.fail(`${e.message}\n${replica.logs.join("")}`));
  assert.deepEqual(await servedCertificate(replica.app.port), der(leaf.certPem), "it keeps serving the trusted certificate");

  // Once that one has expired: not ready, with the reason, and still not the untrusted certificate.
  const readyz = async () => {
    const res = await fetch(`http://127.0.0.1:${metricsPort}/readyz`);
    return { status: res.status, body: await res.text() };
  };
  const notReady = await until("/readyz refusing after the certificate expired", async () => {
    const r = await readyz();
    return r.status === 503 ? r : undefined;
  });
  assert.match(notReady.body, /has expired.*not in every webhook's caBundle/s);
  assert.ok(Date.now() >= new X509Certificate(leaf.certPem).validToDate.getTime(), "not ready only once the certificate expired");
  assert.notDeepEqual(await servedCertificate(replica.app.port), der(otherLeaf.certPem), "the untrusted certificate is never served");
  await replica.stop();
});
