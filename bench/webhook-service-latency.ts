// Webhook latency through the installed Service path against a direct URL, on a whole small cluster, in one run.
//
// The small-cluster harness (test/support/small-cluster.ts: etcd, kube-apiserver v1.20, controller-manager,
// scheduler, kube-proxy and one containerd node, all in a network namespace of their own) gets Imprimatur
// installed the way a user installs it: the image of scripts/build-image.ts pushed to a private test registry,
// and `kubectl apply -k` of an overlay of deploy/overlays/kube-1.20 (image by digest, the pull secret, and one
// more namespaceSelector term so that the installed webhooks only see their own namespace). One ImagePolicy
// custom resource is the policy for everyone. Server-side dry-run pod creates then go through three paths, each
// in a namespace of its own:
//
//   installed  apiserver → Service (kube-proxy's iptables) → the two Imprimatur replicas (pods on the node)
//   direct     apiserver → `imprimatur serve --policy-crds` at a URL, a process started on the host (inside the
//              cluster's network namespace, on its loopback, as today's harnesses do), the same policy objects
//   floor      apiserver → bench/baseline-server.ts at a URL: parses the review and allows; the least any Node
//              HTTPS webhook costs through this apiserver
//
// Every path has one mutating (/mutate) and one validating (/validate) webhook, as the install has. The pods
// name their images by digest, so the pinning webhook has nothing to resolve. The paths alternate in batches
// (order reversed every other round), so drift on the machine lands on all alike; ratios are against the floor.
// The load generator is this same file run inside the namespace (`--generator`): the apiserver listens only
// there. It is pinned to CPU 1, the webhook servers (the replicas' processes and the two host processes) to CPU 0.
//
//   node bench/webhook-service-latency.ts [--creates 1000] [--batch 20] [--warmup 100] [--json] [--keep-state]
//
// Needs root (the small cluster) and scripts/provision-registry.sh, provision-kube.sh and provision-node.sh.
// Exit 0 when every create was admitted and every webhook saw exactly its namespace's creates, 1 when anything
// failed (or the run overran its budget), 2 on a usage error.
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join, relative } from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { Agent, Client } from "undici";
import { parse as parseYaml, stringify as stringifyYaml } from "yaml";
import { runCommand } from "../test/support/command.ts";
import { inNetns, nsenterPath } from "../test/support/netns.ts";
import { createPullSecret } from "../test/support/kube-cluster.ts";
import { startRegistry, type TestRegistry } from "../test/support/registry.ts";
import { startSmallCluster, type SmallCluster } from "../test/support/small-cluster.ts";
import { parseMetrics, sumOf } from "./support/metrics.ts";
import { numberOption } from "./support/options.ts";
import { findTaskset, pin } from "./support/pinning.ts";
import { percentile, renderTable } from "./support/report.ts";
import { guardRun } from "./support/run-guard.ts";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const INSTALL = join(ROOT, "deploy", "overlays", "kube-1.20");
const PATHS = ["floor", "direct", "installed"] as const;
type PathName = (typeof PATHS)[number];
const PATH_LABEL = "bench.imprimatur.dev/path";
const NAMESPACE: Record<PathName, string> = { floor: "bench-floor", direct: "bench-direct", installed: "bench-installed" };
/** The apiserver's webhook names per path: [mutating, validating]. */
const WEBHOOKS: Record<PathName, [string, string]> = {
  floor: ["mutate.floor.bench.imprimatur.dev", "validate.floor.bench.imprimatur.dev"],
  direct: ["mutate.direct.bench.imprimatur.dev", "validate.direct.bench.imprimatur.dev"],
  installed: ["pins.imprimatur.dev", "images.imprimatur.dev"],
};
// Inside the cluster's own network namespace nothing else listens: fixed loopback ports are safe there.
const DIRECT_PORT = 18443;
const FLOOR_PORT = 18444;
const PULL_SECRET = "private-registry";
const DENY_MESSAGE = "images from the forbidden repository may not run here";
const DIGEST = (seed: string) => `sha256:${Buffer.from(seed.padEnd(32, "0")).toString("hex").slice(0, 64)}`;
const REQUEST_TIMEOUT_MS = 15_000;
const ACTIVE_TIMEOUT_MS = 60_000;

const USAGE = `Usage: node bench/webhook-service-latency.ts [options]

  --creates N      timed dry-run pod creates per path (default 1000)
  --batch N        creates per batch; the paths alternate batch by batch (default 20)
  --warmup N       creates per path before timing, not counted (default 100)
  --json           print the results as JSON only
  --keep-state     keep the work folder (image layout, overlay, the direct server's state and logs)
`;

interface Options {
  creates: number;
  batch: number;
  warmup: number;
  json: boolean;
  keepState: boolean;
}

/** What the generator (inside the namespace) needs, written to a file by the main process. */
interface GeneratorConfig {
  apiserver: string;
  apiCa: string;
  token: string;
  serverCa: string;
  readyOrigins: string[];
  /** Where each Imprimatur path's own /metrics is: the replicas' plain-HTTP metrics ports, the direct server's HTTPS. */
  serverMetrics: Record<"direct" | "installed", string[]>;
  /** Processes whose CPU time and run-queue wait are read over the timed part (/proc, by PID). */
  pids: Record<string, number>;
  creates: number;
  batch: number;
  warmup: number;
}

interface PathResult {
  latencies: number[];
  batchMedians: number[];
}
interface GeneratorResult {
  paths: Record<PathName, PathResult>;
  roundOrder: string[];
  measuredSeconds: number;
  /** apiserver_admission_webhook_admission_duration_seconds over the timed part: [sum s, count] per webhook name. */
  webhookCalls: Record<string, [number, number]>;
  /** imprimatur_request_duration_seconds over the timed part, all of a path's servers: [sum s, count] per endpoint. */
  handler: Record<"direct" | "installed", Record<"mutate" | "validate", [number, number]>>;
  /** Per process of GeneratorConfig.pids, over the timed part: CPU time and time runnable but waiting for a CPU, ms. */
  sched: Record<string, { run: number; wait: number } | null>;
  failures: string[];
}

/**
 * A process's CPU time and run-queue wait in ms, all threads: the scheduler's own account
 * (/proc/PID/task/TID/schedstat, in ns). Null where it cannot be read.
 */
function schedMs(pid: number): { run: number; wait: number } | null {
  let run = 0;
  let wait = 0;
  try {
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      try {
        const [onCpu, queued] = readFileSync(`/proc/${pid}/task/${tid}/schedstat`, "utf8").split(" ");
        run += Number(onCpu) / 1e6;
        wait += Number(queued) / 1e6;
      } catch {
        // the thread exited
      }
    }
  } catch {
    return null;
  }
  return { run, wait };
}

/** The CPU weight of a process's cgroup: cpu.shares (cgroup v1) or cpu.weight (v2), for the report; "?" if unknown. */
function cpuWeight(pid: number | undefined): string {
  try {
    const lines = readFileSync(`/proc/${pid}/cgroup`, "utf8").trim().split("\n");
    const v1 = lines.map((l) => l.split(":")).find(([, controllers]) => controllers!.split(",").includes("cpu"));
    if (v1) {
      for (const mount of ["cpu", "cpu,cpuacct", "cpuacct,cpu"]) {
        const file = join("/sys/fs/cgroup", mount, v1[2]!, "cpu.shares");
        if (existsSync(file)) return `cpu.shares ${readFileSync(file, "utf8").trim()}`;
      }
    }
    const v2 = lines.find((l) => l.startsWith("0::"));
    if (v2 && existsSync(join("/sys/fs/cgroup", v2.slice(3), "cpu.weight")))
      return `cpu.weight ${readFileSync(join("/sys/fs/cgroup", v2.slice(3), "cpu.weight"), "utf8").trim()}`;
  } catch {
    // gone, or no such file
  }
  return "?";
}

// ---------------------------------------------------------------------------------------------------------
// The pod: three containers, images by digest (nothing to pin), allowed by the policy. Only the name changes.

function podJson(name: string, repository = "shop"): string {
  const container = (cname: string, image: string, port: number) => ({
    name: cname,
    image: `registry.example.com/${repository}/${image}@${DIGEST(image)}`,
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
  return JSON.stringify({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, labels: { app: "shop", component: "api", "pod-template-hash": "6d9f7c5b8" } },
    spec: {
      securityContext: { runAsNonRoot: true, runAsUser: 10001, seccompProfile: { type: "RuntimeDefault" } },
      containers: [container("api", "api", 8080), container("sidecar", "proxy", 9090), container("metrics", "exporter", 9100)],
      volumes: [{ name: "tmp", emptyDir: {} }],
      terminationGracePeriodSeconds: 30,
    },
  });
}

// ---------------------------------------------------------------------------------------------------------
// The generator: runs inside the cluster's network namespace, prints a GeneratorResult as JSON on stdout.

async function runGenerator(configFile: string): Promise<void> {
  const cfg = JSON.parse(readFileSync(configFile, "utf8")) as GeneratorConfig;
  const failures: string[] = [];
  const auth = `Bearer ${cfg.token}`;
  const clientOpts = {
    connect: { ca: cfg.apiCa },
    allowH2: false,
    pipelining: 1,
    keepAliveTimeout: 120_000,
    headersTimeout: REQUEST_TIMEOUT_MS,
    bodyTimeout: REQUEST_TIMEOUT_MS,
  };
  const api = new Client(cfg.apiserver, clientOpts);
  const side = new Client(cfg.apiserver, clientOpts);
  const log = (line: string) => process.stderr.write(`[generator] ${line}\n`);
  try {
    // The host processes: ready once /readyz answers.
    const agent = new Agent({ connect: { ca: cfg.serverCa }, headersTimeout: 2_000, bodyTimeout: 2_000 });
    for (const origin of cfg.readyOrigins) {
      for (const deadline = Date.now() + ACTIVE_TIMEOUT_MS; ;) {
        try {
          const res = await agent.request({ origin, path: "/readyz", method: "GET" });
          await res.body.dump();
          if (res.statusCode === 200) break;
        } catch {
          // not listening yet
        }
        if (Date.now() > deadline) throw new Error(`${origin}/readyz not 200 within ${ACTIVE_TIMEOUT_MS / 1000} s`);
        await new Promise((r) => setTimeout(r, 100));
      }
    }
    await agent.close();
    const metricsAgent = new Agent({ connect: { ca: cfg.serverCa }, headersTimeout: 5_000, bodyTimeout: 5_000 });

    const create = async (client: Client, ns: string, body: string) => {
      const sent = performance.now();
      const res = await client.request({
        path: `/api/v1/namespaces/${ns}/pods?dryRun=All`,
        method: "POST",
        headers: { authorization: auth, "content-type": "application/json", accept: "application/json" },
        body,
      });
      const text = await res.body.text();
      return { status: res.statusCode, text, ms: performance.now() - sent };
    };
    const webhookCalls = async () => {
      const res = await side.request({ path: "/metrics", method: "GET", headers: { authorization: auth } });
      const s = parseMetrics(await res.body.text());
      return Object.fromEntries(
        PATHS.flatMap((p) => WEBHOOKS[p]).map((name) => [
          name,
          [
            sumOf(s, "apiserver_admission_webhook_admission_duration_seconds_sum", { name }),
            sumOf(s, "apiserver_admission_webhook_admission_duration_seconds_count", { name }),
          ] as [number, number],
        ]),
      );
    };

    // Each configuration is in force once its webhooks are called: the policy's deny for the two Imprimatur
    // paths, the apiserver's call count for the floor.
    for (const path of PATHS) {
      const deadline = Date.now() + ACTIVE_TIMEOUT_MS;
      for (let i = 0; ; i++) {
        const before = path === "floor" ? await webhookCalls() : undefined;
        const r = await create(side, NAMESPACE[path], podJson(`probe-${i}`, path === "floor" ? "shop" : "forbidden"));
        if (path === "floor") {
          const after = await webhookCalls();
          if (r.status === 201 && WEBHOOKS.floor.every((w) => after[w]![1] > before![w]![1])) break;
        } else if (r.status === 400 || r.status === 403) {
          if (!r.text.includes(DENY_MESSAGE)) throw new Error(`${path}: the probe was refused, but not by the policy: ${r.text.slice(0, 300)}`);
          break;
        }
        if (Date.now() > deadline) throw new Error(`${path}: the webhooks were not in force within ${ACTIVE_TIMEOUT_MS / 1000} s (last: HTTP ${r.status})`);
        await new Promise((res) => setTimeout(res, 200));
      }
    }
    log("all three paths in force");

    const seq: Record<PathName, number> = { floor: 0, direct: 0, installed: 0 };
    const createOne = async (path: PathName): Promise<number> => {
      const name = `p${seq[path]++}`;
      const r = await create(api, NAMESPACE[path], podJson(name));
      if (r.status !== 201) throw new Error(`${path}: dry-run create of ${name}: HTTP ${r.status}: ${r.text.slice(0, 400)}`);
      return r.ms;
    };
    log(`warm-up: ${cfg.warmup} creates per path`);
    for (let done = 0; done < cfg.warmup; done += cfg.batch) {
      for (const path of PATHS) for (let i = 0; i < Math.min(cfg.batch, cfg.warmup - done); i++) await createOne(path);
    }

    const paths = Object.fromEntries(PATHS.map((p): [PathName, PathResult] => [p, { latencies: [], batchMedians: [] }])) as Record<PathName, PathResult>;
    const roundOrder: string[] = [];
    const rounds = cfg.creates / cfg.batch;
    log(`measuring: ${rounds} rounds of ${cfg.batch} per path`);
    const handlerFigures = async () => {
      const out = {} as Record<"direct" | "installed", Record<"mutate" | "validate", [number, number]>>;
      for (const path of ["direct", "installed"] as const) {
        out[path] = { mutate: [0, 0], validate: [0, 0] };
        for (const origin of cfg.serverMetrics[path]) {
          const res = await metricsAgent.request({ origin, path: "/metrics", method: "GET" });
          const s = parseMetrics(await res.body.text());
          for (const endpoint of ["mutate", "validate"] as const) {
            out[path][endpoint][0] += sumOf(s, "imprimatur_request_duration_seconds_sum", { endpoint });
            out[path][endpoint][1] += sumOf(s, "imprimatur_request_duration_seconds_count", { endpoint });
          }
        }
      }
      return out;
    };
    const handlerBefore = await handlerFigures();
    const schedAll = () => Object.fromEntries(Object.entries(cfg.pids).map(([name, pid]) => [name, schedMs(pid)]));
    const schedBefore = schedAll();
    const callsBefore = await webhookCalls();
    const started = performance.now();
    for (let r = 0; r < rounds; r++) {
      const order = r % 2 === 0 ? PATHS : [...PATHS].reverse();
      roundOrder.push(order.map((p) => p[0]).join(""));
      for (const path of order) {
        const batch: number[] = [];
        for (let i = 0; i < cfg.batch; i++) batch.push(await createOne(path));
        paths[path].latencies.push(...batch);
        paths[path].batchMedians.push(
          percentile(
            [...batch].sort((a, b) => a - b),
            50,
          ),
        );
      }
    }
    const measuredSeconds = (performance.now() - started) / 1000;
    const callsAfter = await webhookCalls();
    const schedAfter = schedAll();
    const handlerAfter = await handlerFigures();
    const sched = Object.fromEntries(
      Object.keys(cfg.pids).map((name) => {
        const [a, b] = [schedBefore[name], schedAfter[name]];
        return [name, a && b ? { run: b.run - a.run, wait: b.wait - a.wait } : null];
      }),
    );
    const handler = {} as GeneratorResult["handler"];
    for (const path of ["direct", "installed"] as const) {
      handler[path] = { mutate: [0, 0], validate: [0, 0] };
      for (const e of ["mutate", "validate"] as const) {
        handler[path][e] = [handlerAfter[path][e][0] - handlerBefore[path][e][0], handlerAfter[path][e][1] - handlerBefore[path][e][1]];
      }
    }
    const calls = Object.fromEntries(
      Object.keys(callsAfter).map((name) => [
        name,
        [callsAfter[name]![0] - callsBefore[name]![0], callsAfter[name]![1] - callsBefore[name]![1]] as [number, number],
      ]),
    );
    // Every webhook was called once per timed create of its own path (reinvocation would show as more).
    for (const path of PATHS) {
      for (const name of WEBHOOKS[path])
        if (calls[name]![1] !== cfg.creates) failures.push(`${name}: ${calls[name]![1]} calls for ${cfg.creates} timed creates`);
    }
    const result: GeneratorResult = { paths, roundOrder, measuredSeconds, webhookCalls: calls, handler, sched, failures };
    process.stdout.write(JSON.stringify(result));
  } finally {
    await api.close().catch(() => {});
    await side.close().catch(() => {});
  }
}

// ---------------------------------------------------------------------------------------------------------
// The main process: registry, image, cluster, install, the host processes, the generator, the report.

function parseOptions(argv: string[]): Options & { generator?: string } {
  const { values } = parseArgs({
    args: argv,
    options: {
      creates: { type: "string", default: "1000" },
      batch: { type: "string", default: "20" },
      warmup: { type: "string", default: "100" },
      json: { type: "boolean", default: false },
      "keep-state": { type: "boolean", default: false },
      generator: { type: "string" },
      help: { type: "boolean", short: "h", default: false },
    },
    strict: true,
  });
  if (values.help) {
    process.stdout.write(USAGE);
    process.exit(0);
  }
  const opts = {
    creates: numberOption("creates", values.creates, 1, 5_000),
    batch: numberOption("batch", values.batch, 1, 1_000),
    warmup: numberOption("warmup", values.warmup, 0, 1_000),
    json: values.json,
    keepState: values["keep-state"],
    generator: values.generator,
  };
  if (opts.creates % opts.batch !== 0) throw new Error(`--creates (${opts.creates}) must be a multiple of --batch (${opts.batch})`);
  return opts;
}

/** A node process inside the cluster's namespace (nsenter execs it: the PID is node's, for taskset and kill). */
function spawnInNetns(netns: string, args: string[], logFile: string | "pipe"): ChildProcess {
  const out = logFile === "pipe" ? "pipe" : openSync(logFile, "w");
  return spawn(nsenterPath(), inNetns(netns, process.execPath, args), { cwd: ROOT, stdio: ["ignore", out, out] });
}

/** PIDs of the installed replicas' serve processes, from /proc (their command line names the TLS Secret). */
function installedServePids(): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const argv = readFileSync(`/proc/${entry}/cmdline`, "utf8").split("\0");
      if (argv.includes("serve") && argv.includes("--tls-secret") && argv.includes("imprimatur/imprimatur-tls")) pids.push(Number(entry));
    } catch {
      // gone
    }
  }
  return pids;
}

async function waitForFile(file: string, proc: ChildProcess, what: string): Promise<void> {
  for (const deadline = Date.now() + 60_000; !existsSync(file);) {
    if (proc.exitCode !== null) throw new Error(`${what} exited (code ${proc.exitCode}) before writing ${file}`);
    if (Date.now() > deadline) throw new Error(`${what} did not write ${file} within 60 s`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function main(): Promise<number> {
  let opts: ReturnType<typeof parseOptions>;
  try {
    opts = parseOptions(process.argv.slice(2));
  } catch (e) {
    process.stderr.write(`webhook-service-latency: ${(e as Error).message}\n\n${USAGE}`);
    return 2;
  }
  if (opts.generator) {
    await runGenerator(opts.generator);
    return 0;
  }
  const say = (line: string) => {
    if (!opts.json) process.stderr.write(`${line}\n`);
  };
  const workDir = mkdtempSync(join(tmpdir(), "imprimatur-bench-wsl-"));
  const hostProcs: ChildProcess[] = [];
  const killAll = (signal: NodeJS.Signals) => {
    for (const p of hostProcs) if (p.exitCode === null && p.signalCode === null) p.kill(signal);
    // The cluster and registry harnesses stop their own processes on exit (their exit hooks).
    if (!opts.keepState) rmSync(workDir, { recursive: true, force: true });
  };
  // Image build, registry, cluster and rollout take a few minutes on a busy machine; creates about 50 ms each.
  const budgetMs = 900_000 + (opts.creates + opts.warmup) * PATHS.length * 500;
  const unguard = guardRun("webhook-service-latency", budgetMs, killAll);
  const load = { before: loadavg(), after: [] as number[] };

  let registry: TestRegistry | undefined;
  let cluster: SmallCluster | undefined;
  const failures: string[] = [];
  try {
    say("Starting the registry and building the image (scripts/build-image.ts) ...");
    registry = await startRegistry({ auth: "htpasswd" });
    const layout = join(workDir, "image");
    const built = await runCommand(process.execPath, [join(ROOT, "scripts", "build-image.ts"), "--output", layout, "--tag", "bench"], {
      env: process.env,
      timeoutMs: 600_000,
      label: "[bench] build-image",
    });
    if (built.code !== 0) throw new Error(`build-image failed: ${built.stderr}`);
    await registry.push(layout, "bench", "imprimatur/imprimatur", "bench");
    const { digest } = await registry.inspectRaw("imprimatur/imprimatur", "bench");

    say("Starting the small cluster ...");
    cluster = await startSmallCluster({ registries: [{ host: registry.host, caFile: registry.caFile }] });
    const kubectl = async (...args: string[]) => {
      const r = await cluster!.kubectl(args, { timeoutMs: 120_000 });
      if (r.code !== 0) throw new Error(`kubectl ${args.join(" ")}: ${r.stderr}`);
      return r.stdout;
    };
    await kubectl("label", "namespace", "kube-system", "kubernetes.io/metadata.name=kube-system", "--overwrite");
    await cluster.createNamespace("imprimatur", { "kubernetes.io/metadata.name": "imprimatur" });
    await createPullSecret(cluster, "imprimatur", PULL_SECRET, registry, registry.password);
    for (const path of PATHS) await cluster.createNamespace(NAMESPACE[path], { [PATH_LABEL]: path });

    // The user's overlay: the image, its pull secret, and the installed webhooks narrowed to their namespace.
    const overlay = join(workDir, "overlay");
    mkdirSync(overlay);
    const onlyInstalled = (kind: string) => ({
      target: { group: "admissionregistration.k8s.io", version: "v1", kind, name: "imprimatur" },
      path: `${kind}.json`,
    });
    for (const kind of ["ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"]) {
      writeFileSync(
        join(overlay, `${kind}.json`),
        JSON.stringify([
          { op: "add", path: "/webhooks/0/namespaceSelector/matchExpressions/-", value: { key: PATH_LABEL, operator: "In", values: ["installed"] } },
        ]),
      );
    }
    writeFileSync(
      join(overlay, "kustomization.yaml"),
      stringifyYaml({
        apiVersion: "kustomize.config.k8s.io/v1beta1",
        kind: "Kustomization",
        bases: [relative(overlay, INSTALL)], // kubectl v1.20's kustomize takes no absolute base
        images: [{ name: "imprimatur", newName: `${registry.host}/imprimatur/imprimatur`, digest }],
        patchesStrategicMerge: ["service-account-pull-secret.yaml"],
        patchesJson6902: [onlyInstalled("ValidatingWebhookConfiguration"), onlyInstalled("MutatingWebhookConfiguration")],
      }),
    );
    writeFileSync(
      join(overlay, "service-account-pull-secret.yaml"),
      stringifyYaml({
        apiVersion: "v1",
        kind: "ServiceAccount",
        metadata: { name: "imprimatur", namespace: "imprimatur" },
        imagePullSecrets: [{ name: PULL_SECRET }],
      }),
    );
    say("Installing Imprimatur (kubectl apply -k) ...");
    await kubectl("apply", "-k", overlay);
    const rollout = await cluster.kubectl(["rollout", "status", "deployment/imprimatur", "-n", "imprimatur", "--timeout=300s"], { timeoutMs: 310_000 });
    if (rollout.code !== 0) throw new Error(`rollout: ${rollout.stdout} ${rollout.stderr}`);
    const policy = {
      apiVersion: "imprimatur.dev/v1alpha1",
      kind: "ImagePolicy",
      metadata: { name: "no-forbidden-repository" },
      spec: { rules: [{ action: "deny", images: ["registry.example.com/forbidden/*"], message: DENY_MESSAGE }], default: "allow" },
    };
    const applied = await cluster.apply(JSON.stringify(policy));
    if (applied.code !== 0) throw new Error(`ImagePolicy: ${applied.stderr}`);

    // ---- The host processes, inside the namespace: imprimatur serve (same policy objects) and the floor.
    say("Starting imprimatur serve --policy-crds and the floor webhook at direct URLs ...");
    const stateDir = join(workDir, "direct");
    mkdirSync(stateDir);
    const direct = spawnInNetns(
      cluster.netns,
      // --drain 0: nothing to drain when the bench stops it.
      [
        "bin/imprimatur.js",
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        String(DIRECT_PORT),
        "--state-dir",
        stateDir,
        "--policy-crds",
        "--kubeconfig",
        cluster.kubeconfig,
        "--drain",
        "0",
      ],
      join(workDir, "direct.log"),
    );
    hostProcs.push(direct);
    await waitForFile(join(stateDir, "mutating-webhook.yaml"), direct, "imprimatur serve");
    const floor = spawnInNetns(
      cluster.netns,
      [
        "bench/baseline-server.ts",
        "--host",
        "127.0.0.1",
        "--port",
        String(FLOOR_PORT),
        "--cert",
        join(stateDir, "tls.crt"),
        "--key",
        join(stateDir, "tls.key"),
      ],
      join(workDir, "floor.log"),
    );
    hostProcs.push(floor);

    // Their webhook configurations: serve's own, the pod webhooks only, each narrowed to its path's namespace.
    for (const path of ["floor", "direct"] as const) {
      const port = path === "floor" ? FLOOR_PORT : DIRECT_PORT;
      for (const [file, name] of [
        ["mutating-webhook.yaml", WEBHOOKS[path][0]],
        ["validating-webhook.yaml", WEBHOOKS[path][1]],
      ] as const) {
        const config = parseYaml(readFileSync(join(stateDir, file), "utf8")) as {
          metadata: { name: string };
          webhooks: { name: string; clientConfig: { url: string }; rules: { resources: string[] }[]; namespaceSelector?: unknown }[];
        };
        const podHook = config.webhooks.find((w) => w.rules.some((r) => r.resources.includes("pods")));
        if (!podHook) throw new Error(`serve's ${file} has no webhook for pods`);
        const urlPath = new URL(podHook.clientConfig.url).pathname;
        config.metadata = { name: `bench-${path}` };
        config.webhooks = [
          {
            ...podHook,
            name,
            clientConfig: { ...podHook.clientConfig, url: `https://127.0.0.1:${port}${urlPath}` },
            namespaceSelector: { matchLabels: { [PATH_LABEL]: path } },
          },
        ];
        const r = await cluster.apply(stringifyYaml(config));
        if (r.code !== 0) throw new Error(`${path} ${file}: ${r.stderr}`);
      }
    }

    // ---- Pinning: the webhook servers on CPU 0, the generator on CPU 1 (the control plane is left alone).
    const taskset = findTaskset();
    const pinned: string[] = [];
    // Pods of an earlier ReplicaSet may still be terminating after the rollout: wait until only the current ones run.
    const replicaState = async () =>
      JSON.parse(await kubectl("get", "pods", "-n", "imprimatur", "-l", "app.kubernetes.io/name=imprimatur", "-o", "json")) as {
        items: {
          metadata: { name: string; deletionTimestamp?: string };
          status: { podIP?: string; containerStatuses?: { restartCount: number; ready: boolean }[] };
        }[];
      };
    let replicas = await replicaState();
    for (const deadline = Date.now() + 180_000; ;) {
      const settled =
        replicas.items.every((p) => !p.metadata.deletionTimestamp && (p.status.containerStatuses ?? []).every((c) => c.ready)) &&
        installedServePids().length === replicas.items.length;
      if (settled) break;
      if (Date.now() > deadline) throw new Error(`the installed replicas did not settle within 180 s (${installedServePids().length} serve processes)`);
      await new Promise((r) => setTimeout(r, 1_000));
      replicas = await replicaState();
    }
    const restarts = (state: Awaited<ReturnType<typeof replicaState>>) =>
      state.items.flatMap((p) => p.status.containerStatuses ?? []).reduce((a, c) => a + c.restartCount, 0);
    const restartsBefore = restarts(replicas);
    const replicaPids = installedServePids();
    if (replicaPids.length === 0) failures.push("no installed replica's serve process found in /proc");
    const canPin = cpus().length >= 2;
    if (canPin) {
      for (const pid of replicaPids) pinned.push(pin(taskset, pid, 0, `installed replica ${pid}`));
      pinned.push(pin(taskset, direct.pid, 0, "direct serve"), pin(taskset, floor.pid, 0, "floor webhook"));
    } else pinned.push(`not pinned (${cpus().length} CPU)`);

    const replicaIps = replicas.items.map((p) => p.status.podIP).filter((ip): ip is string => Boolean(ip));
    const weights = { installed: replicaPids.map(cpuWeight), direct: cpuWeight(direct.pid), floor: cpuWeight(floor.pid) };

    // ---- The generator, inside the namespace.
    const kubeconfig = parseYaml(readFileSync(cluster.kubeconfig, "utf8")) as {
      clusters: { cluster: { "certificate-authority-data": string } }[];
      users: { user: { token: string } }[];
    };
    const generatorConfig: GeneratorConfig = {
      apiserver: cluster.url,
      apiCa: Buffer.from(kubeconfig.clusters[0]!.cluster["certificate-authority-data"], "base64").toString("utf8"),
      token: kubeconfig.users[0]!.user.token,
      serverCa: readFileSync(join(stateDir, "ca.crt"), "utf8"),
      readyOrigins: [`https://127.0.0.1:${DIRECT_PORT}`, `https://127.0.0.1:${FLOOR_PORT}`],
      serverMetrics: { direct: [`https://127.0.0.1:${DIRECT_PORT}`], installed: replicaIps.map((ip) => `http://${ip}:9090`) },
      pids: {
        apiserver: cluster.componentPids.apiserver,
        ...Object.fromEntries(replicaPids.map((pid, i) => [`installed replica ${i + 1}`, pid])),
        "direct serve": direct.pid!,
        "floor webhook": floor.pid!,
      },
      creates: opts.creates,
      batch: opts.batch,
      warmup: opts.warmup,
    };
    const configFile = join(workDir, "generator.json");
    writeFileSync(configFile, JSON.stringify(generatorConfig), { mode: 0o600 });
    say(`Measuring (${opts.warmup} warm-up and ${opts.creates} timed dry-run creates per path) ...`);
    const generator = spawnInNetns(cluster.netns, ["bench/webhook-service-latency.ts", "--generator", configFile], "pipe");
    hostProcs.push(generator);
    if (canPin) pinned.push(pin(taskset, generator.pid, 1, "load generator"));
    let stdout = "";
    generator.stdout!.setEncoding("utf8").on("data", (s: string) => (stdout += s));
    generator.stderr!.setEncoding("utf8").on("data", (s: string) => {
      if (!opts.json) process.stderr.write(s);
    });
    const code = await new Promise<number>((resolve) => generator.once("exit", (c) => resolve(c ?? 1)));
    if (code !== 0 || stdout === "") throw new Error(`the load generator failed (exit ${code})`);
    const result = JSON.parse(stdout) as GeneratorResult;
    failures.push(...result.failures);
    load.after = loadavg();
    for (const [name, p] of [
      ["direct serve", direct],
      ["floor webhook", floor],
    ] as const) {
      if (p.exitCode !== null || p.signalCode !== null) failures.push(`${name} exited during the run`);
    }
    const restartsAfter = restarts(await replicaState());
    if (restartsAfter !== restartsBefore) failures.push(`the installed replicas restarted ${restartsAfter - restartsBefore} times during the run`);
    if (installedServePids().join() !== replicaPids.join()) failures.push("the installed replicas' serve processes changed during the run");

    // ---- Report.
    const stats = (path: PathName) => {
      const sorted = Float64Array.from(result.paths[path].latencies).sort();
      return { p50: percentile(sorted, 50), p90: percentile(sorted, 90), p99: percentile(sorted, 99), max: sorted[sorted.length - 1] ?? NaN };
    };
    const summary = Object.fromEntries(PATHS.map((p) => [p, stats(p)])) as Record<PathName, ReturnType<typeof stats>>;
    const ratio = (path: PathName) => {
      const perRound = result.paths[path].batchMedians.map((m, i) => m / result.paths.floor.batchMedians[i]!).sort((a, b) => a - b);
      return {
        p50: summary[path].p50 / summary.floor.p50,
        p90: summary[path].p90 / summary.floor.p90,
        p99: summary[path].p99 / summary.floor.p99,
        perRoundP50: { min: perRound[0]!, median: percentile(perRound, 50), max: perRound[perRound.length - 1]! },
      };
    };
    const ratios = { direct: ratio("direct"), installed: ratio("installed") };
    const handlerMs = Object.fromEntries(
      (["direct", "installed"] as const).map((p) => [
        p,
        Object.fromEntries(
          (["mutate", "validate"] as const).map((e) => [e, result.handler[p][e][1] > 0 ? (result.handler[p][e][0] * 1000) / result.handler[p][e][1] : NaN]),
        ),
      ]),
    ) as Record<"direct" | "installed", Record<"mutate" | "validate", number>>;
    const callMs = Object.fromEntries(Object.entries(result.webhookCalls).map(([n, [s, c]]) => [n, c > 0 ? (s * 1000) / c : NaN]));
    const ok = failures.length === 0;
    const report = {
      benchmark: "webhook-service-latency",
      date: new Date().toISOString(),
      node: process.version,
      cpus: cpus().length,
      cpuModel: cpus()[0]?.model ?? "unknown",
      loadAverage: { before: load.before, after: load.after },
      createsPerPath: opts.creates,
      batch: opts.batch,
      warmupPerPath: opts.warmup,
      roundOrder: result.roundOrder.join(" "),
      measuredSeconds: result.measuredSeconds,
      pinned,
      latencyMs: summary,
      ratiosToFloor: ratios,
      installedOverDirect: { p50: summary.installed.p50 / summary.direct.p50, p99: summary.installed.p99 / summary.direct.p99 },
      webhookCallMeanMs: callMs,
      handlerMeanMs: handlerMs,
      cpuWeight: weights,
      perCreateMs: Object.fromEntries(
        Object.entries(result.sched).map(([name, v]) => [
          name,
          v ? { cpu: v.run / (opts.creates * PATHS.length), runQueueWait: v.wait / (opts.creates * PATHS.length) } : null,
        ]),
      ),
      replicas: replicaPids.length,
      ok,
      failures,
      ...(opts.keepState ? { workDir } : {}),
    };
    if (opts.json) process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
    else {
      const f = (n: number, d = 2) => (Number.isNaN(n) ? "-" : n.toFixed(d));
      const rows = [
        ["path", "p50 ms", "p90 ms", "p99 ms", "max ms", "mutate call ms", "validate call ms", "p50 ×floor", "p99 ×floor", "per-round p50 ×floor"],
        ...PATHS.map((p) => {
          const s = summary[p];
          const r = p === "floor" ? undefined : ratios[p];
          return [
            p,
            f(s.p50),
            f(s.p90),
            f(s.p99),
            f(s.max, 1),
            f(callMs[WEBHOOKS[p][0]]!),
            f(callMs[WEBHOOKS[p][1]]!),
            r ? f(r.p50) : "1.00",
            r ? f(r.p99) : "1.00",
            r ? `${f(r.perRoundP50.min)} / ${f(r.perRoundP50.median)} / ${f(r.perRoundP50.max)}` : "-",
          ];
        }),
      ];
      process.stdout.write(
        [
          "",
          `webhook-service-latency  ${report.date}  node ${report.node}  ${report.cpus} CPUs (${report.cpuModel})`,
          `${opts.creates} timed dry-run pod creates per path, sequential over one keep-alive connection, ${opts.creates / opts.batch} rounds of ${opts.batch} ` +
            `(${result.roundOrder.slice(0, 2).join(" ")} ...), ${opts.warmup} warm-up per path; ${f(result.measuredSeconds, 1)} s measured`,
          `load average before ${load.before.map((x) => x.toFixed(1)).join(" ")}, after ${load.after.map((x) => x.toFixed(1)).join(" ")}`,
          `pinning: ${pinned.join(", ")}`,
          "",
          renderTable(rows),
          "",
          ...(["direct", "installed"] as const).map(
            (p) =>
              `${p}: the apiserver's call mean ${f(callMs[WEBHOOKS[p][0]]!)} ms mutate, ${f(callMs[WEBHOOKS[p][1]]!)} ms validate; ` +
              `Imprimatur's own handler mean ${f(handlerMs[p].mutate, 3)} ms mutate, ${f(handlerMs[p].validate, 3)} ms validate (${result.handler[p].validate[1]} validate answers)`,
          ),
          `CPU weight of the cgroup: installed replicas ${weights.installed.join(", ")}; direct serve ${weights.direct}; floor webhook ${weights.floor}`,
          ...Object.entries(result.sched).map(([name, v]) =>
            v
              ? `${name}: ${f(v.run / 1000, 2)} s CPU, ${f(v.wait / 1000, 2)} s runnable but waiting for a CPU over the timed part (all paths)`
              : `${name}: no schedstat`,
          ),
          `installed/direct: p50 ${f(report.installedOverDirect.p50)}x, p99 ${f(report.installedOverDirect.p99)}x (what the Service path and the pods add)`,
          ...(ok ? ["ok"] : ["", "FAILED:", ...failures.map((x) => `  ${x}`)]),
          "",
        ].join("\n"),
      );
    }
    return ok ? 0 : 1;
  } catch (e) {
    process.stderr.write(`webhook-service-latency: ${(e as Error).message}\n`);
    if (cluster) {
      const pods = await cluster.kubectl(["get", "pods", "-A", "-o", "wide"]);
      process.stderr.write(`${pods.stdout}${pods.stderr}\n`);
    }
    for (const f of ["direct.log", "floor.log"])
      if (existsSync(join(workDir, f))) process.stderr.write(`${f}:\n${readFileSync(join(workDir, f), "utf8").slice(-2000)}\n`);
    return 1;
  } finally {
    for (const p of hostProcs) if (p.exitCode === null && p.signalCode === null) p.kill("SIGTERM");
    await cluster?.stop().catch((e: Error) => process.stderr.write(`stopping the cluster: ${e.message}\n`));
    await registry?.stop().catch(() => {});
    if (!opts.keepState) rmSync(workDir, { recursive: true, force: true });
    else say(`work folder kept: ${workDir}`);
    unguard();
  }
}

process.exitCode = await main();
