// Pod create latency through a real kube-apiserver, with and without Imprimatur's validating webhook.
//
// One etcd + kube-apiserver v1.20 (test/support/kube-cluster.ts), one `imprimatur serve --profile restricted`
// (the restricted Pod Security profile bound cluster-wide, plus the embedded image policy), and the
// ValidatingWebhookConfiguration serve writes, narrowed by a namespaceSelector so that it applies to one
// namespace only. Pods are created one after another, over one keep-alive HTTPS connection, straight against the
// apiserver's REST API, in a namespace per path:
//
//   none        no webhook applies (the ValidatingAdmissionWebhook plugin runs, finds no match)
//   minimal     a webhook that only parses the review and allows (bench/baseline-server.ts): the floor that
//               any Node HTTPS webhook pays through this apiserver
//   imprimatur  imprimatur's /validate
//
// The paths alternate in batches (order reversed every other round), so drift on the machine lands on all alike.
// Reported: p50/p90/p99 per path and their ratios to `none`, and where the extra time goes (the apiserver's and
// imprimatur's own metrics, CPU and run-queue wait per create, connections opened to each webhook, imprimatur's
// GC, event-loop delay and log output).
//
//   node bench/pod-create-latency.ts [--creates 400] [--batch 20] [--warmup 100] [--paths none,minimal,imprimatur]
//                                    [--pin shared|split|off] [--json] [--keep-state]
//
// Exit 0 when every create was a 201 and every webhook saw exactly the creates of its namespace (whether or
// not the target is met), 1 when anything failed, 2 on a usage error.
import { readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { readFile, rm } from "node:fs/promises";
import { cpus } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { parseArgs } from "node:util";
import { Client } from "undici";
import { parse as parseYaml, stringify as stringifyYaml } from "yaml";
import { startKubeCluster, type KubeCluster } from "../test/support/kube-cluster.ts";
import { fetchMetrics, parseMetrics, sumOf, type Samples } from "./support/metrics.ts";
import { findTaskset, pin } from "./support/pinning.ts";
import { percentile, renderTable } from "./support/report.ts";
import { guardRun } from "./support/run-guard.ts";
import { createServeState } from "./support/serve-state.ts";
import { baselineServerArgs, hasExited, imprimaturServeArgs, READY_TIMEOUT_MS, signalServers, startServer, stopServer } from "./support/server-process.ts";
import type { ServerProcess } from "./support/server-process.ts";
import { earlyOption, numberOption } from "./support/options.ts";

const TARGET = { p50: 1.1, p99: 1.25 };
const PATHS = ["none", "minimal", "imprimatur"] as const;
type PathName = (typeof PATHS)[number];
const NAMESPACE: Record<PathName, string> = { none: "bench-none", minimal: "bench-minimal", imprimatur: "bench-imprimatur" };
/** The namespace label the webhooks select on. */
const PATH_LABEL = "bench.imprimatur.dev/path";
const WEBHOOK_NAME: Record<Exclude<PathName, "none">, string> = { minimal: "minimal.bench.imprimatur.dev", imprimatur: "images.imprimatur.dev" };
const REQUEST_TIMEOUT_MS = 15_000;
/** Pause before each batch, after the metrics scrape, so the scrape's work is over before timing starts. */
const SETTLE_MS = 50;

const USAGE = `Usage: node bench/pod-create-latency.ts [options]

  --creates N      timed pod creates per path (default 400)
  --batch N        creates per batch; paths alternate batch by batch (default 20)
  --warmup N       creates per path before timing, not counted (default 100)
  --paths LIST     comma-separated, from none,minimal,imprimatur; none is always included
                   (default none,minimal,imprimatur)
  --pin MODE       shared (default): etcd, kube-apiserver and the webhook servers on CPU 0, this load
                   generator on CPU 1; split: etcd and kube-apiserver on CPU 0, the webhook servers and the
                   generator on CPU 1; off: no pinning
  --json           print the results as JSON only
  --keep-state     keep imprimatur's state folder (CA, certificates, webhook configuration, log)
  --image REF      every container's image (default: three registry.example.com images the embedded policy
                   allows); signature-verification uses it for a signed image under a verifying policy
  --serve-arg=ARG  one more argument for imprimatur serve (repeatable): --serve-arg=--policies --serve-arg=FILE
`;

/** --image is read before the pod is serialized once at load time. */
const IMAGE = earlyOption(process.argv.slice(2), "image");

interface Options {
  creates: number;
  batch: number;
  warmup: number;
  paths: PathName[];
  pin: "shared" | "split" | "off";
  json: boolean;
  keepState: boolean;
  /** More arguments for imprimatur serve (a verifying policy, its registries file). */
  serveArgs: string[];
}

function parseOptions(argv: string[]): Options {
  const { values } = parseArgs({
    args: argv,
    options: {
      creates: { type: "string", default: "400" },
      batch: { type: "string", default: "20" },
      warmup: { type: "string", default: "100" },
      paths: { type: "string", default: PATHS.join(",") },
      pin: { type: "string", default: "shared" },
      json: { type: "boolean", default: false },
      "keep-state": { type: "boolean", default: false },
      image: { type: "string" },
      "serve-arg": { type: "string", multiple: true, default: [] },
      help: { type: "boolean", short: "h", default: false },
    },
    strict: true,
  });
  if (values.help) {
    process.stdout.write(USAGE);
    process.exit(0);
  }
  const listed = values.paths
    .split(",")
    .map((p) => p.trim())
    .filter(Boolean);
  for (const p of listed) if (!(PATHS as readonly string[]).includes(p)) throw new Error(`--paths: unknown path ${p} (known: ${PATHS.join(", ")})`);
  const paths = PATHS.filter((p) => p === "none" || listed.includes(p));
  if (paths.length < 2) throw new Error("--paths must name at least one webhook path (minimal, imprimatur)");
  if (!["shared", "split", "off"].includes(values.pin)) throw new Error(`--pin must be shared, split or off, got ${values.pin}`);
  const opts = {
    creates: numberOption("creates", values.creates, 1, 5_000),
    batch: numberOption("batch", values.batch, 1, 1_000),
    warmup: numberOption("warmup", values.warmup, 0, 1_000),
    paths,
    pin: values.pin as Options["pin"],
    json: values.json,
    keepState: values["keep-state"],
    serveArgs: values["serve-arg"],
  };
  if (opts.creates % opts.batch !== 0) throw new Error(`--creates (${opts.creates}) must be a multiple of --batch (${opts.batch})`);
  return opts;
}

// ---------------------------------------------------------------------------------------------------------
// The pod: a Deployment-style pod with three containers that passes the restricted profile and the image
// policy, so that imprimatur runs every check and allows it. Serialized once; only the name changes.

const NAME_PLACEHOLDER = "@@NAME@@";

function podManifest(name: string) {
  const container = (cname: string, image: string, port: number) => ({
    name: cname,
    image,
    imagePullPolicy: "IfNotPresent",
    ports: [{ name: "http", containerPort: port, protocol: "TCP" }],
    env: [
      { name: "LOG_LEVEL", value: "info" },
      { name: "POD_NAME", valueFrom: { fieldRef: { fieldPath: "metadata.name" } } },
    ],
    resources: { requests: { cpu: "100m", memory: "128Mi" }, limits: { memory: "256Mi" } },
    volumeMounts: [{ name: "tmp", mountPath: "/tmp" }],
    securityContext: { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ["ALL"] } },
  });
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, labels: { app: "shop", component: "api", "pod-template-hash": "6d9f7c5b8" } },
    spec: {
      securityContext: { runAsNonRoot: true, runAsUser: 10001, seccompProfile: { type: "RuntimeDefault" } },
      containers: [
        container("api", IMAGE ?? "registry.example.com/shop/api:1.4.2", 8080),
        container("sidecar", IMAGE ?? "registry.example.com/shop/proxy:2.0.1", 9090),
        container("metrics", IMAGE ?? "registry.example.com/shop/exporter:0.9.0", 9100),
      ],
      volumes: [{ name: "tmp", emptyDir: {} }],
      terminationGracePeriodSeconds: 30,
    },
  };
}

const [POD_HEAD, POD_TAIL] = (() => {
  const text = JSON.stringify(podManifest(NAME_PLACEHOLDER));
  const at = text.indexOf(NAME_PLACEHOLDER);
  return [text.slice(0, at), text.slice(at + NAME_PLACEHOLDER.length)] as const;
})();

// ---------------------------------------------------------------------------------------------------------
// Processes: CPU accounting (the webhook servers are bench/support/server-process.ts, pinning bench/support/pinning.ts).

/**
 * CPU time of a process, all threads, in ms, and the time its threads spent runnable but waiting for a CPU: the
 * scheduler's own account (/proc/PID/task/TID/schedstat, in ns), which unlike the tick-sampled utime/stime of
 * /proc/PID/stat is exact for processes that run in short bursts. Undefined where there is no schedstat.
 */
function schedMs(pid: number | undefined): { run: number; wait: number } | undefined {
  if (pid === undefined) return undefined;
  let tids: string[];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return undefined;
  }
  let run = 0;
  let wait = 0;
  let read = 0;
  for (const tid of tids) {
    try {
      const [onCpu, queued] = readFileSync(`/proc/${pid}/task/${tid}/schedstat`, "utf8").split(" ");
      run += Number(onCpu);
      wait += Number(queued);
      read++;
    } catch {
      // the thread exited
    }
  }
  return read > 0 ? { run: run / 1e6, wait: wait / 1e6 } : undefined;
}

/** Machine-wide CPU time from /proc/stat in ms: busy (user, nice, system, irq, softirq), steal, and in all. */
function machineCpuMs(): { busy: number; steal: number; total: number } | undefined {
  try {
    const f = readFileSync("/proc/stat", "utf8").split("\n")[0]!.trim().split(/\s+/).slice(1).map(Number);
    // user nice system idle iowait irq softirq steal; in USER_HZ ticks (100 per second).
    const [user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0] = f;
    return { busy: (user + nice + system + irq + softirq) * 10, steal: steal * 10, total: (user + nice + system + idle + iowait + irq + softirq + steal) * 10 };
  } catch {
    return undefined;
  }
}

/** Distinct client ports of the TCP connections (any state, TIME_WAIT included) to a local port, from /proc/net. */
function connectionsTo(port: number, seen: Set<string>): void {
  for (const file of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    let text: string;
    try {
      text = readFileSync(file, "utf8");
    } catch {
      continue;
    }
    for (const line of text.split("\n").slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f.length < 4) continue;
      const local = f[1]!;
      const remote = f[2]!;
      if (parseInt(local.slice(local.lastIndexOf(":") + 1), 16) !== port) continue;
      if (remote.endsWith(":0000")) continue; // the listening socket
      seen.add(remote);
    }
  }
}

// ---------------------------------------------------------------------------------------------------------
// The apiserver's /metrics: the few series the breakdown needs, as sum/count pairs.

/** What the breakdown reads from the apiserver's /metrics: [sum seconds, count] per series. */
function apiserverFigures(s: Samples) {
  const pair = (name: string, labels: Record<string, string>) => [sumOf(s, `${name}_sum`, labels), sumOf(s, `${name}_count`, labels)] as const;
  return {
    request: pair("apiserver_request_duration_seconds", { verb: "POST", resource: "pods" }),
    validateStep: pair("apiserver_admission_step_admission_duration_seconds", { type: "validate", operation: "CREATE" }),
    admitStep: pair("apiserver_admission_step_admission_duration_seconds", { type: "admit", operation: "CREATE" }),
    webhookPlugin: pair("apiserver_admission_controller_admission_duration_seconds", { name: "ValidatingAdmissionWebhook", operation: "CREATE" }),
    etcdCreate: pair("etcd_request_duration_seconds", { operation: "create", type: "*core.Pod" }),
    webhooks: Object.fromEntries(
      Object.entries(WEBHOOK_NAME).map(([path, name]) => [path, pair("apiserver_admission_webhook_admission_duration_seconds", { name })]),
    ) as Record<Exclude<PathName, "none">, readonly [number, number]>,
  };
}
type ApiserverFigures = ReturnType<typeof apiserverFigures>;

// ---------------------------------------------------------------------------------------------------------
// Measurement.

type ProcName = "apiserver" | "etcd" | "imprimatur" | "minimal" | "generator";

interface PathStats {
  latencies: number[];
  /** Per batch: the batch's median, for the per-round ratios. */
  batchMedians: number[];
  /** Sums of the apiserver's sum/count deltas over this path's timed batches. */
  apiserver: Record<"request" | "validateStep" | "admitStep" | "webhookPlugin" | "etcdCreate" | "webhook", [number, number]>;
  /** Per process: CPU time and run-queue wait (schedstat), summed over this path's timed batches. */
  cpuMs: Record<ProcName, number>;
  waitMs: Record<ProcName, number>;
  cpuKnown: boolean;
  wallMs: number;
}

function newStats(): PathStats {
  const z = (): [number, number] => [0, 0];
  return {
    latencies: [],
    batchMedians: [],
    apiserver: { request: z(), validateStep: z(), admitStep: z(), webhookPlugin: z(), etcdCreate: z(), webhook: z() },
    cpuMs: { apiserver: 0, etcd: 0, imprimatur: 0, minimal: 0, generator: 0 },
    waitMs: { apiserver: 0, etcd: 0, imprimatur: 0, minimal: 0, generator: 0 },
    cpuKnown: true,
    wallMs: 0,
  };
}

function say(opts: Options, line: string) {
  if (!opts.json) process.stderr.write(`${line}\n`);
}

async function main(): Promise<number> {
  let opts: Options;
  try {
    opts = parseOptions(process.argv.slice(2));
  } catch (e) {
    process.stderr.write(`pod-create-latency: ${(e as Error).message}\n\n${USAGE}`);
    return 2;
  }
  const webhookPaths = opts.paths.filter((p): p is Exclude<PathName, "none"> => p !== "none");
  const rounds = opts.creates / opts.batch;
  const totalCreates = (opts.creates + opts.warmup) * opts.paths.length;

  const { stateDir, caFile, logFile, logFd, closeLog } = await createServeState("imprimatur-bench-pcl-", "imprimatur.log");
  let cluster: KubeCluster | undefined;
  const servers: Partial<Record<Exclude<PathName, "none">, ServerProcess>> = {};
  const killAll = (signal: NodeJS.Signals) => {
    signalServers(Object.values(servers), signal);
    // The cluster harness kills etcd and the apiserver on exit (its exit hooks) and removes its folder.
    if (!opts.keepState) rmSync(stateDir, { recursive: true, force: true });
  };

  // The run stops by itself: the watchdog fires well past the planned time (cluster start, servers, and a
  // generous 150 ms per create against the usual 15 to 30 ms).
  const budgetMs = 90_000 + 2 * READY_TIMEOUT_MS + totalCreates * 150 + 60_000;
  const unguard = guardRun("pod-create-latency", budgetMs, killAll);

  const failures: string[] = [];
  let apiClient: Client | undefined;
  let metricsClient: Client | undefined;
  try {
    // ---- Cluster, webhooks, pinning.
    say(opts, "Starting etcd and kube-apiserver ...");
    cluster = await startKubeCluster({ enableAdmissionPlugins: ["ValidatingAdmissionWebhook"] });
    const kubeconfig = parseYaml(await readFile(cluster.kubeconfig, "utf8")) as {
      clusters: { cluster: { "certificate-authority-data": string } }[];
      users: { user: { token: string } }[];
    };
    const apiCa = Buffer.from(kubeconfig.clusters[0]!.cluster["certificate-authority-data"], "base64").toString("utf8");
    const auth = `Bearer ${kubeconfig.users[0]!.user.token}`;

    say(opts, `Starting imprimatur serve --profile restricted (state ${stateDir}) ...`);
    servers.imprimatur = await startServer(
      "imprimatur",
      // --drain 0: no traffic to drain when the bench stops it, so it exits at once on SIGTERM.
      imprimaturServeArgs(stateDir, ["--profile", "restricted", "--drain", "0", ...opts.serveArgs]),
      caFile,
      logFd,
    );
    if (webhookPaths.includes("minimal")) {
      say(opts, "Starting the minimal webhook ...");
      servers.minimal = await startServer("minimal", baselineServerArgs(stateDir), caFile, "ignore");
    }
    if (!webhookPaths.includes("imprimatur")) {
      await stopServer(servers.imprimatur);
      delete servers.imprimatur;
    }
    const ca = readFileSync(caFile, "utf8");

    const taskset = findTaskset();
    const pinned: string[] = [];
    if (opts.pin !== "off" && cpus().length < 2) pinned.push(`not pinned (${cpus().length} CPU)`);
    else if (opts.pin !== "off") {
      const webhookCpu = opts.pin === "split" ? 1 : 0;
      pinned.push(pin(taskset, cluster.pids.etcd, 0, "etcd"), pin(taskset, cluster.pids.apiserver, 0, "kube-apiserver"));
      for (const [name, p] of Object.entries(servers)) pinned.push(pin(taskset, p.child.pid, webhookCpu, name));
      pinned.push(pin(taskset, process.pid, 1, "load generator"));
    }

    // ---- Webhook configuration: serve's own, each webhook narrowed to its namespace.
    const vwc = parseYaml(await readFile(join(stateDir, "validating-webhook.yaml"), "utf8")) as {
      webhooks: { name: string; clientConfig: { url: string }; namespaceSelector?: unknown }[];
    };
    const served = vwc.webhooks.find((w) => w.name === WEBHOOK_NAME.imprimatur);
    if (!served) throw new Error(`serve's validating-webhook.yaml has no webhook named ${WEBHOOK_NAME.imprimatur}`);
    vwc.webhooks = webhookPaths.map((path) => ({
      ...structuredClone(served),
      name: WEBHOOK_NAME[path],
      clientConfig: { ...structuredClone(served.clientConfig), url: `${servers[path]!.origin}/validate` },
      namespaceSelector: { matchLabels: { [PATH_LABEL]: path } },
    }));
    for (const path of opts.paths) {
      const r = await cluster.apply(
        JSON.stringify({ apiVersion: "v1", kind: "Namespace", metadata: { name: NAMESPACE[path], labels: { [PATH_LABEL]: path } } }),
      );
      if (r.code !== 0) throw new Error(`creating namespace ${NAMESPACE[path]}: ${r.stderr}`);
    }
    const applied = await cluster.apply(stringifyYaml(vwc));
    if (applied.code !== 0) throw new Error(`applying the ValidatingWebhookConfiguration: ${applied.stderr}`);

    // ---- Clients: one keep-alive HTTP/1.1 connection for the creates, another for metrics scrapes.
    const clientOpts = {
      connect: { ca: apiCa },
      allowH2: false,
      pipelining: 1,
      keepAliveTimeout: 120_000,
      headersTimeout: REQUEST_TIMEOUT_MS,
      bodyTimeout: REQUEST_TIMEOUT_MS,
    };
    apiClient = new Client(cluster.url, clientOpts);
    metricsClient = new Client(cluster.url, clientOpts);
    const versionRes = await metricsClient.request({ path: "/version", method: "GET", headers: { authorization: auth } });
    const apiserverVersion = ((await versionRes.body.json()) as { gitVersion?: string }).gitVersion ?? "unknown";
    const scrapeApiserver = async (): Promise<ApiserverFigures> => {
      const res = await metricsClient!.request({ path: "/metrics", method: "GET", headers: { authorization: auth } });
      const text = await res.body.text();
      if (res.statusCode !== 200) throw new Error(`apiserver /metrics: HTTP ${res.statusCode}`);
      return apiserverFigures(parseMetrics(text));
    };

    // The configuration takes effect asynchronously: wait until imprimatur denies a dry-run pod on :latest.
    if (webhookPaths.includes("imprimatur")) {
      const deadline = Date.now() + 30_000;
      for (;;) {
        const body = JSON.stringify({
          apiVersion: "v1",
          kind: "Pod",
          metadata: { name: "probe" },
          spec: { containers: [{ name: "c", image: "registry.example.com/x:latest" }] },
        });
        const res = await apiClient.request({
          path: `/api/v1/namespaces/${NAMESPACE.imprimatur}/pods?dryRun=All`,
          method: "POST",
          headers: { authorization: auth, "content-type": "application/json" },
          body,
        });
        const text = await res.body.text();
        if (res.statusCode === 400 || res.statusCode === 403) {
          if (!/denied the request/.test(text)) throw new Error(`the probe pod was refused, but not by the webhook: ${text.slice(0, 300)}`);
          break;
        }
        if (Date.now() > deadline) throw new Error(`the webhook configuration did not take effect within 30 s (last: HTTP ${res.statusCode})`);
        await new Promise((r) => setTimeout(r, 100));
      }
    } else {
      await new Promise((r) => setTimeout(r, 2_000));
    }

    // ---- Creates.
    const seq: Record<PathName, number> = { none: 0, minimal: 0, imprimatur: 0 };
    const createOne = async (path: PathName): Promise<number> => {
      const name = `p${seq[path]++}`;
      const sent = performance.now();
      const res = await apiClient!.request({
        path: `/api/v1/namespaces/${NAMESPACE[path]}/pods`,
        method: "POST",
        headers: { authorization: auth, "content-type": "application/json", accept: "application/json" },
        body: POD_HEAD + name + POD_TAIL,
      });
      const text = await res.body.text();
      const took = performance.now() - sent;
      if (res.statusCode !== 201) throw new Error(`${path}: creating pod ${name}: HTTP ${res.statusCode}: ${text.slice(0, 400)}`);
      return took;
    };

    const pids = {
      apiserver: cluster.pids.apiserver,
      etcd: cluster.pids.etcd,
      imprimatur: servers.imprimatur?.child.pid,
      minimal: servers.minimal?.child.pid,
      generator: process.pid,
    };
    const cpuNow = () =>
      Object.fromEntries(Object.entries(pids).map(([k, pid]) => [k, schedMs(pid)])) as Record<ProcName, { run: number; wait: number } | undefined>;
    const conns: Record<Exclude<PathName, "none">, Set<string>> = { minimal: new Set(), imprimatur: new Set() };
    const pollConnections = () => {
      for (const path of webhookPaths) connectionsTo(servers[path]!.port, conns[path]);
    };

    const warmupBatches = Math.ceil(opts.warmup / opts.batch);
    say(opts, `Warm-up: ${opts.warmup} creates per path ...`);
    for (let b = 0; b < warmupBatches; b++) {
      const n = Math.min(opts.batch, opts.warmup - b * opts.batch);
      for (const path of opts.paths) for (let i = 0; i < n; i++) await createOne(path);
    }
    pollConnections();
    const connsAfterWarmup = Object.fromEntries(webhookPaths.map((p) => [p, conns[p].size]));
    const imprimaturBefore = servers.imprimatur ? parseMetrics(await fetchMetrics(servers.imprimatur.origin, ca)) : undefined;
    const logBytesBefore = statSync(logFile).size;

    const stats = Object.fromEntries(opts.paths.map((p) => [p, newStats()])) as Record<PathName, PathStats>;
    const roundOrder: string[] = [];
    say(opts, `Measuring: ${rounds} rounds of ${opts.batch} creates per path, order reversed every other round ...`);
    const measureStart = performance.now();
    const machineBefore = machineCpuMs();
    const oursBefore = Object.values(cpuNow()).reduce((a, c) => a + (c?.run ?? 0), 0);
    let figures = await scrapeApiserver();
    for (let r = 0; r < rounds; r++) {
      const order = r % 2 === 0 ? opts.paths : [...opts.paths].reverse();
      roundOrder.push(order.map((p) => p[0]).join(""));
      for (const path of order) {
        await new Promise((res) => setTimeout(res, SETTLE_MS));
        const s = stats[path];
        const cpuBefore = cpuNow();
        const started = performance.now();
        const batch: number[] = [];
        for (let i = 0; i < opts.batch; i++) batch.push(await createOne(path));
        s.wallMs += performance.now() - started;
        const cpuAfter = cpuNow();
        s.latencies.push(...batch);
        s.batchMedians.push(percentile(Float64Array.from(batch).sort(), 50));
        for (const k of Object.keys(s.cpuMs) as ProcName[]) {
          const before = cpuBefore[k];
          const after = cpuAfter[k];
          if (pids[k] === undefined) continue;
          if (before === undefined || after === undefined) s.cpuKnown = false;
          else {
            s.cpuMs[k] += after.run - before.run;
            s.waitMs[k] += after.wait - before.wait;
          }
        }
        pollConnections();
        const next = await scrapeApiserver();
        const add = (into: [number, number], a: readonly [number, number], b: readonly [number, number]) => {
          into[0] += b[0] - a[0];
          into[1] += b[1] - a[1];
        };
        add(s.apiserver.request, figures.request, next.request);
        add(s.apiserver.validateStep, figures.validateStep, next.validateStep);
        add(s.apiserver.admitStep, figures.admitStep, next.admitStep);
        add(s.apiserver.webhookPlugin, figures.webhookPlugin, next.webhookPlugin);
        add(s.apiserver.etcdCreate, figures.etcdCreate, next.etcdCreate);
        for (const wp of webhookPaths) {
          const calls = next.webhooks[wp][1] - figures.webhooks[wp][1];
          if (wp === path) add(s.apiserver.webhook, figures.webhooks[wp], next.webhooks[wp]);
          else if (calls !== 0) failures.push(`webhook ${WEBHOOK_NAME[wp]} was called ${calls} times during a batch of ${path}`);
        }
        if (path !== "none" && next.webhooks[path][1] - figures.webhooks[path][1] !== opts.batch) {
          failures.push(
            `webhook ${WEBHOOK_NAME[path]} was called ${next.webhooks[path][1] - figures.webhooks[path][1]} times for a batch of ${opts.batch} creates`,
          );
        }
        figures = next;
      }
    }
    const measureSeconds = (performance.now() - measureStart) / 1000;
    const machineAfter = machineCpuMs();
    const oursAfter = Object.values(cpuNow()).reduce((a, c) => a + (c?.run ?? 0), 0);
    // What the rest of the machine did meanwhile, in % of one CPU: all busy time minus this run's processes.
    const machine =
      machineBefore && machineAfter
        ? {
            cpus: cpus().length,
            ourProcessesPercent: ((oursAfter - oursBefore) / (measureSeconds * 1000)) * 100,
            otherProcessesPercent: Math.max(0, ((machineAfter.busy - machineBefore.busy - (oursAfter - oursBefore)) / (measureSeconds * 1000)) * 100),
            stealPercent: ((machineAfter.steal - machineBefore.steal) / (measureSeconds * 1000)) * 100,
          }
        : undefined;

    // ---- Server-side figures after the run: imprimatur's own duration histogram, event-loop lag and GC.
    let imprimatur: Record<string, number> | undefined;
    if (servers.imprimatur && imprimaturBefore) {
      const after = parseMetrics(await fetchMetrics(servers.imprimatur.origin, ca));
      const d = (name: string, labels: Record<string, string> = {}) => sumOf(after, name, labels) - sumOf(imprimaturBefore, name, labels);
      const count = d("imprimatur_request_duration_seconds_count", { endpoint: "validate" });
      imprimatur = {
        answers: count,
        // What imprimatur wrote to its log (stdout) during the timed part; admissions are logged at debug level.
        logBytesDuringRun: statSync(logFile).size - logBytesBefore,
        heapUsedMbBefore: sumOf(imprimaturBefore, "nodejs_heap_size_used_bytes") / 2 ** 20,
        heapUsedMbAfter: sumOf(after, "nodejs_heap_size_used_bytes") / 2 ** 20,
        handlerMeanMs: count > 0 ? (d("imprimatur_request_duration_seconds_sum", { endpoint: "validate" }) * 1000) / count : NaN,
        answeredUnder1ms: d("imprimatur_request_duration_seconds_bucket", { endpoint: "validate", le: "0.001" }),
        answeredUnder2_5ms: d("imprimatur_request_duration_seconds_bucket", { endpoint: "validate", le: "0.0025" }),
        allowedDecisions: d("imprimatur_decisions_total", { endpoint: "validate", outcome: "allowed" }),
        gcMsDuringRun: d("nodejs_gc_duration_seconds_sum") * 1000,
        gcCountDuringRun: d("nodejs_gc_duration_seconds_count"),
        gcMinorMs: d("nodejs_gc_duration_seconds_sum", { kind: "minor" }) * 1000,
        gcMinorCount: d("nodejs_gc_duration_seconds_count", { kind: "minor" }),
        gcMajorMs: (d("nodejs_gc_duration_seconds_sum", { kind: "major" }) + d("nodejs_gc_duration_seconds_sum", { kind: "incremental" })) * 1000,
        gcMajorCount: d("nodejs_gc_duration_seconds_count", { kind: "major" }) + d("nodejs_gc_duration_seconds_count", { kind: "incremental" }),
        // prom-client samples the event loop every 10 ms (monitorEventLoopDelay) and reports whole intervals;
        // the delay is what exceeds the 10 ms. Reset at each scrape, so this covers the timed part.
        eventLoopDelayP50Ms: sumOf(after, "nodejs_eventloop_lag_p50_seconds") * 1000 - 10,
        eventLoopDelayP99Ms: sumOf(after, "nodejs_eventloop_lag_p99_seconds") * 1000 - 10,
        eventLoopDelayMaxMs: sumOf(after, "nodejs_eventloop_lag_max_seconds") * 1000 - 10,
      };
      if (imprimatur.allowedDecisions !== opts.creates)
        failures.push(`imprimatur counted ${imprimatur.allowedDecisions} allowed decisions for ${opts.creates} timed creates`);
    }

    // ---- Clean up the pods, outside the timed part.
    say(opts, "Deleting the pods ...");
    for (const path of opts.paths) {
      const res = await metricsClient.request({ path: `/api/v1/namespaces/${NAMESPACE[path]}/pods`, method: "DELETE", headers: { authorization: auth } });
      await res.body.dump();
      if (res.statusCode !== 200) failures.push(`deleting the pods of ${NAMESPACE[path]}: HTTP ${res.statusCode}`);
    }
    const died = Object.values(servers).filter(hasExited);
    for (const p of died) failures.push(`${p.name} exited during the run: ${p.stderr().trim().slice(-400)}`);

    // ---- Report.
    const summary = Object.fromEntries(
      opts.paths.map((path) => {
        const s = stats[path];
        const sorted = Float64Array.from(s.latencies).sort();
        const n = s.latencies.length;
        const mean = (pair: [number, number]) => (pair[1] > 0 ? (pair[0] * 1000) / pair[1] : NaN);
        const cpu = (k: ProcName) => (s.cpuKnown && pids[k] !== undefined ? s.cpuMs[k] / n : undefined);
        const wait = (k: ProcName) => (s.cpuKnown && pids[k] !== undefined ? s.waitMs[k] / n : undefined);
        return [
          path,
          {
            creates: n,
            latencyMs: {
              p50: percentile(sorted, 50),
              p90: percentile(sorted, 90),
              p99: percentile(sorted, 99),
              max: sorted[n - 1] ?? NaN,
              mean: s.latencies.reduce((a, b) => a + b, 0) / n,
            },
            apiserverMeanMs: {
              request: mean(s.apiserver.request),
              admitStep: mean(s.apiserver.admitStep),
              validateStep: mean(s.apiserver.validateStep),
              validatingWebhookPlugin: mean(s.apiserver.webhookPlugin),
              webhookCall: path === "none" ? undefined : mean(s.apiserver.webhook),
              etcdCreate: mean(s.apiserver.etcdCreate),
            },
            cpuMsPerCreate: { apiserver: cpu("apiserver"), etcd: cpu("etcd"), webhook: path === "none" ? undefined : cpu(path), generator: cpu("generator") },
            runQueueWaitMsPerCreate: {
              apiserver: wait("apiserver"),
              etcd: wait("etcd"),
              webhook: path === "none" ? undefined : wait(path),
              generator: wait("generator"),
            },
            batchMediansMs: s.batchMedians,
          },
        ];
      }),
    ) as Record<
      PathName,
      {
        creates: number;
        latencyMs: { p50: number; p90: number; p99: number; max: number; mean: number };
        apiserverMeanMs: {
          request: number;
          admitStep: number;
          validateStep: number;
          validatingWebhookPlugin: number;
          webhookCall: number | undefined;
          etcdCreate: number;
        };
        cpuMsPerCreate: { apiserver: number | undefined; etcd: number | undefined; webhook: number | undefined; generator: number | undefined };
        runQueueWaitMsPerCreate: { apiserver: number | undefined; etcd: number | undefined; webhook: number | undefined; generator: number | undefined };
        batchMediansMs: number[];
      }
    >;
    const none = summary.none;
    const ratios = Object.fromEntries(
      webhookPaths.map((path) => {
        const s = summary[path];
        // Per round: the median of this path's batch over the median of none's batch in the same round.
        const perRound = s.batchMediansMs.map((m, i) => m / none.batchMediansMs[i]!).sort((a, b) => a - b);
        return [
          path,
          {
            p50: s.latencyMs.p50 / none.latencyMs.p50,
            p90: s.latencyMs.p90 / none.latencyMs.p90,
            p99: s.latencyMs.p99 / none.latencyMs.p99,
            perRoundP50: { min: perRound[0]!, median: percentile(perRound, 50), max: perRound[perRound.length - 1]! },
          },
        ];
      }),
    ) as Record<Exclude<PathName, "none">, { p50: number; p90: number; p99: number; perRoundP50: { min: number; median: number; max: number } }>;
    const connections = Object.fromEntries(webhookPaths.map((p) => [p, { afterWarmup: connsAfterWarmup[p]!, afterRun: conns[p].size }]));
    const imp = ratios.imprimatur;
    const ok = failures.length === 0;
    const verdict = !ok ? "FAILED" : !imp ? "n/a" : imp.p50 <= TARGET.p50 && imp.p99 <= TARGET.p99 ? "PASS" : "BELOW TARGET";

    const report = {
      benchmark: "pod-create-latency",
      date: new Date().toISOString(),
      node: process.version,
      cpus: cpus().length,
      cpuModel: cpus()[0]?.model ?? "unknown",
      kubeApiserver: apiserverVersion,
      podBytes: Buffer.byteLength(POD_HEAD + "p0" + POD_TAIL),
      image: IMAGE ?? "registry.example.com/shop/{api,proxy,exporter}",
      serveArgs: opts.serveArgs,
      createsPerPath: opts.creates,
      batch: opts.batch,
      warmupPerPath: opts.warmup,
      rounds,
      roundOrder: roundOrder.join(" "),
      measuredSeconds: measureSeconds,
      pin: opts.pin,
      pinned,
      paths: summary,
      ratios,
      connectionsToWebhooks: connections,
      machine,
      imprimatur,
      target: TARGET,
      verdict,
      ok,
      failures,
      ...(opts.keepState ? { stateDir } : {}),
    };

    if (opts.json) {
      process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
    } else {
      const f = (n: number | undefined, d = 2) => (n === undefined || Number.isNaN(n) ? "-" : n.toFixed(d));
      const rows = [
        ["path", "creates", "p50 ms", "p90 ms", "p99 ms", "max ms", "mean ms", "p50 ×", "p99 ×"],
        ...opts.paths.map((p) => {
          const s = summary[p];
          const r = p === "none" ? undefined : ratios[p];
          return [
            p,
            String(s.creates),
            f(s.latencyMs.p50),
            f(s.latencyMs.p90),
            f(s.latencyMs.p99),
            f(s.latencyMs.max, 1),
            f(s.latencyMs.mean),
            r ? f(r.p50) : "1.00",
            r ? f(r.p99) : "1.00",
          ];
        }),
      ];
      const breakdown = [
        ["mean per create, ms", ...opts.paths],
        ["client: send to body read", ...opts.paths.map((p) => f(summary[p].latencyMs.mean))],
        ["apiserver: POST pods handler", ...opts.paths.map((p) => f(summary[p].apiserverMeanMs.request))],
        ["  admission, mutating step", ...opts.paths.map((p) => f(summary[p].apiserverMeanMs.admitStep))],
        ["  admission, validating step", ...opts.paths.map((p) => f(summary[p].apiserverMeanMs.validateStep))],
        ["    ValidatingAdmissionWebhook", ...opts.paths.map((p) => f(summary[p].apiserverMeanMs.validatingWebhookPlugin))],
        ["      webhook call", ...opts.paths.map((p) => f(summary[p].apiserverMeanMs.webhookCall))],
        ["  etcd create", ...opts.paths.map((p) => f(summary[p].apiserverMeanMs.etcdCreate))],
        ["CPU kube-apiserver", ...opts.paths.map((p) => f(summary[p].cpuMsPerCreate.apiserver))],
        ["CPU etcd", ...opts.paths.map((p) => f(summary[p].cpuMsPerCreate.etcd))],
        ["CPU webhook server", ...opts.paths.map((p) => f(summary[p].cpuMsPerCreate.webhook))],
        ["CPU load generator", ...opts.paths.map((p) => f(summary[p].cpuMsPerCreate.generator))],
        ["run-queue wait kube-apiserver", ...opts.paths.map((p) => f(summary[p].runQueueWaitMsPerCreate.apiserver))],
        ["run-queue wait etcd", ...opts.paths.map((p) => f(summary[p].runQueueWaitMsPerCreate.etcd))],
        ["run-queue wait webhook server", ...opts.paths.map((p) => f(summary[p].runQueueWaitMsPerCreate.webhook))],
      ];
      const out = [
        "",
        `pod-create-latency  ${report.date}  node ${report.node}  kube-apiserver ${report.kubeApiserver}  ${report.cpus} CPUs (${report.cpuModel})`,
        `${opts.creates} timed pod creates per path (${report.podBytes}-byte pod, 3 containers), sequential over one keep-alive connection; ` +
          `${rounds} rounds of ${opts.batch} per path (${report.roundOrder.split(" ").slice(0, 2).join(" ")} ...), ${opts.warmup} warm-up creates per path; ${measureSeconds.toFixed(1)} s measured`,
        `pinning: ${opts.pin === "off" ? "off" : pinned.join(", ")}`,
        ...(machine
          ? [
              `CPU while measuring (% of one CPU, ${machine.cpus} CPUs): this run's processes ${machine.ourProcessesPercent.toFixed(0)}%, ` +
                `other processes ${machine.otherProcessesPercent.toFixed(0)}%, steal ${machine.stealPercent.toFixed(0)}%`,
            ]
          : []),
        "",
        renderTable(rows),
        "",
        renderTable(breakdown),
        "",
        ...webhookPaths.map(
          (p) =>
            `${p}/none per-round p50 ratio: min ${f(ratios[p].perRoundP50.min)}  median ${f(ratios[p].perRoundP50.median)}  max ${f(ratios[p].perRoundP50.max)}`,
        ),
        ...webhookPaths.map(
          (p) =>
            `connections opened by kube-apiserver to ${p}: ${connections[p]!.afterWarmup} by the end of warm-up, ${connections[p]!.afterRun} by the end of the run`,
        ),
        ...(imprimatur
          ? [
              `imprimatur: ${imprimatur.answers} /validate answers, handler mean ${f(imprimatur.handlerMeanMs, 3)} ms (${imprimatur.answeredUnder1ms} under 1 ms, ${imprimatur.answeredUnder2_5ms} under 2.5 ms); ` +
                `${imprimatur.logBytesDuringRun} log bytes; heap used ${f(imprimatur.heapUsedMbBefore, 1)} MB before, ${f(imprimatur.heapUsedMbAfter, 1)} MB after; GC ${f(imprimatur.gcMsDuringRun, 1)} ms in ${imprimatur.gcCountDuringRun} pauses (minor ${imprimatur.gcMinorCount}: ${f(imprimatur.gcMinorMs, 1)} ms; major/incremental ${imprimatur.gcMajorCount}: ${f(imprimatur.gcMajorMs, 1)} ms); ` +
                `event-loop delay p50 ${f(imprimatur.eventLoopDelayP50Ms)} / p99 ${f(imprimatur.eventLoopDelayP99Ms)} / max ${f(imprimatur.eventLoopDelayMaxMs)} ms`,
            ]
          : []),
        "",
        ...(imp && ratios.minimal
          ? [
              `imprimatur/minimal: p50 ${f(summary.imprimatur.latencyMs.p50 / summary.minimal.latencyMs.p50)}x, p99 ${f(summary.imprimatur.latencyMs.p99 / summary.minimal.latencyMs.p99)}x (what imprimatur adds beyond the cheapest Node webhook)`,
            ]
          : []),
        imp
          ? `imprimatur/none: p50 ${f(imp.p50)}x (target <= ${TARGET.p50.toFixed(2)}x), p99 ${f(imp.p99)}x (target <= ${TARGET.p99.toFixed(2)}x)  ${verdict}`
          : `verdict: ${verdict}`,
        ...(opts.keepState ? [`state kept: ${stateDir}`] : []),
        ...(ok ? [] : ["", "FAILED:", ...failures.map((x) => `  ${x}`)]),
        "",
      ];
      process.stdout.write(out.join("\n"));
    }
    return ok ? 0 : 1;
  } catch (e) {
    process.stderr.write(`pod-create-latency: ${(e as Error).message}\n`);
    return 1;
  } finally {
    await apiClient?.close().catch(() => {});
    await metricsClient?.close().catch(() => {});
    await Promise.all(Object.values(servers).map((p) => stopServer(p)));
    await cluster?.stop();
    closeLog();
    if (!opts.keepState) await rm(stateDir, { recursive: true, force: true });
    unguard();
  }
}

process.exitCode = await main();
