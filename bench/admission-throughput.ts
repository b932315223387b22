// Admission throughput: `imprimatur serve` answering POST /validate, against a baseline HTTPS server that only
// parses the AdmissionReview and echoes an allow (bench/baseline-server.ts), measured in the same run, with the
// same TLS material, the same load and one process each. Reported as the ratio of their throughputs. Both
// servers are pinned to CPU 0 and the load generator (this process) to CPU 1, so that both servers get the same
// core and the generator takes nothing from it.
//
//   node bench/admission-throughput.ts [--concurrency 32] [--seconds 10] [--warmup 2] [--rounds 5] [--pin on|off]
//                                      [--max-requests N] [--json] [--cpu-prof DIR] [--keep-state]
//
// Exit 0 when every answer was a 200 with the request's uid and allowed: true (whether or not the target is
// met), 1 when any answer was wrong or a server failed, 2 on a usage error.
import { randomUUID } from "node:crypto";
import { readFileSync, rmSync } from "node:fs";
import { rm } from "node:fs/promises";
import { cpus } from "node:os";
import { join, resolve } from "node:path";
import { performance } from "node:perf_hooks";
import { parseArgs } from "node:util";
import { Pool } from "undici";
import { fetchMetrics, parseMetrics, sumOf } from "./support/metrics.ts";
import { findTaskset, pin, pinTree } from "./support/pinning.ts";
import { processTreeCpuMs } from "./support/process-cpu.ts";
import { percentile, renderTable } from "./support/report.ts";
import { guardRun } from "./support/run-guard.ts";
import { createServeState } from "./support/serve-state.ts";
import { baselineServerArgs, hasExited, imprimaturServeArgs, READY_TIMEOUT_MS, signalServers, startServer, stopServer } from "./support/server-process.ts";
import type { ServerProcess } from "./support/server-process.ts";
import { earlyOption, numberOption } from "./support/options.ts";

const TARGET_RATIO = 0.8;
/** Above this share of its core the generator, not the server, may be what limits the baseline. */
const GENERATOR_SATURATED_PERCENT = 90;
/** Where the pinned processes run: both servers on one core, the load generator on the other. */
const SERVER_CPU = 0;
const GENERATOR_CPU = 1;
/** Every container's image; --image replaces it (e.g. a signed image, for cached-verification throughput). */
const IMAGE = earlyOption(process.argv.slice(2), "image") ?? "registry.example.com/app:1.0";
const CONTAINERS = 3;
const UID_PLACEHOLDER = "@@UID@@";
/** As kube-apiserver calls a webhook with timeoutSeconds: 10. */
const VALIDATE_PATH = "/validate?timeout=10s";

const USAGE = `Usage: node bench/admission-throughput.ts [options]

  --concurrency N     requests in flight, one keep-alive connection each (default 32)
  --seconds S         measured time per server (default 10), split into --rounds slices
  --warmup S          warm-up per server before measuring (default 2)
  --rounds N          alternate the servers N times while measuring (default 5)
  --pin MODE          on (default): every thread of both servers on CPU 0, this load generator on CPU 1
                      (taskset); off: no pinning
  --max-requests N    hard cap on requests per server, warm-up included (default 1000000)
  --json              print the results as JSON only
  --cpu-prof DIR      run both servers with --cpu-prof and write the .cpuprofile files to DIR
  --keep-state        keep the temporary state folder (CA, certificates, decision log) and print its path
  --image REF         the image of every container (default registry.example.com/app:1.0); it must be allowed
  --serve-arg=ARG     one more argument for imprimatur serve (repeatable): --serve-arg=--policies --serve-arg=DIR
  --node-arg=FLAG     a Node.js flag for imprimatur's server only (repeatable): --node-arg=--max-semi-space-size=1
                      runs it with the young generation Node.js gives itself in a 512Mi container
  --baseline-serve-arg=ARG
                      make the baseline a second imprimatur serve with these arguments (repeatable) instead of
                      the echo server: what one policy costs against another, in the same interleaved rounds
  --baseline-node-arg=FLAG
                      a Node.js flag for that second imprimatur serve (repeatable): one young generation against
                      another, --node-arg=--max-semi-space-size=16 --baseline-node-arg=--max-semi-space-size=32
  --baseline-after-turn
                      the echo server answers after the event loop's turn has read every request of the turn, as
                      imprimatur serve does (src/server/turn-batch.ts): the floor of that technique
`;

interface Options {
  concurrency: number;
  seconds: number;
  warmup: number;
  rounds: number;
  pin: "on" | "off";
  maxRequests: number;
  json: boolean;
  cpuProfDir: string | undefined;
  keepState: boolean;
  serveArgs: string[];
  /** Node.js flags for imprimatur's server (not the baseline's). */
  nodeArgs: string[];
  /** The baseline is a second imprimatur serve with these arguments; undefined: the echo server. */
  baselineServeArgs: string[] | undefined;
  baselineNodeArgs: string[];
  /** The echo server answers after the turn's reads, as imprimatur does. */
  baselineAfterTurn: boolean;
}

function parseOptions(argv: string[]): Options {
  const { values } = parseArgs({
    args: argv,
    options: {
      concurrency: { type: "string", default: "32" },
      seconds: { type: "string", default: "10" },
      warmup: { type: "string", default: "2" },
      rounds: { type: "string", default: "5" },
      pin: { type: "string", default: "on" },
      "max-requests": { type: "string", default: "1000000" },
      json: { type: "boolean", default: false },
      "cpu-prof": { type: "string" },
      "keep-state": { type: "boolean", default: false },
      image: { type: "string" },
      "serve-arg": { type: "string", multiple: true, default: [] },
      "node-arg": { type: "string", multiple: true, default: [] },
      "baseline-serve-arg": { type: "string", multiple: true },
      "baseline-node-arg": { type: "string", multiple: true, default: [] },
      "baseline-after-turn": { type: "boolean", default: false },
      help: { type: "boolean", short: "h", default: false },
    },
    strict: true,
  });
  if (values.help) {
    process.stdout.write(USAGE);
    process.exit(0);
  }
  if (values["baseline-node-arg"].length > 0 && values["baseline-serve-arg"] === undefined)
    throw new Error("--baseline-node-arg needs --baseline-serve-arg (the echo server is not imprimatur)");
  if (values.pin !== "on" && values.pin !== "off") throw new Error(`--pin must be on or off, got ${values.pin}`);
  return {
    concurrency: numberOption("concurrency", values.concurrency, 1, 1024),
    seconds: numberOption("seconds", values.seconds, 0.5, 300, false),
    warmup: numberOption("warmup", values.warmup, 0, 60, false),
    rounds: numberOption("rounds", values.rounds, 1, 100),
    pin: values.pin,
    maxRequests: numberOption("max-requests", values["max-requests"], 1, 10_000_000),
    json: values.json,
    cpuProfDir: values["cpu-prof"] === undefined ? undefined : resolve(values["cpu-prof"]),
    keepState: values["keep-state"],
    serveArgs: values["serve-arg"],
    nodeArgs: values["node-arg"],
    baselineServeArgs: values["baseline-serve-arg"],
    baselineNodeArgs: values["baseline-node-arg"],
    baselineAfterTurn: values["baseline-after-turn"],
  };
}

// ---------------------------------------------------------------------------------------------------------
// The request: a Pod CREATE as kube-apiserver sends it to a validating webhook (defaults filled in), with three
// containers on an allowed image. Serialized once; only the uid changes per request, by string concatenation.

function podAdmissionReview(uid: string) {
  const container = (name: string, port: number) => ({
    name,
    image: IMAGE,
    imagePullPolicy: "IfNotPresent",
    ports: [{ name: "http", containerPort: port, protocol: "TCP" }],
    env: [
      { name: "LOG_LEVEL", value: "info" },
      { name: "POD_NAME", valueFrom: { fieldRef: { apiVersion: "v1", fieldPath: "metadata.name" } } },
    ],
    resources: { requests: { cpu: "100m", memory: "128Mi" }, limits: { memory: "256Mi" } },
    volumeMounts: [{ name: "kube-api-access-x7k2p", readOnly: true, mountPath: "/var/run/secrets/kubernetes.io/serviceaccount" }],
    securityContext: { runAsNonRoot: true, allowPrivilegeEscalation: false, capabilities: { drop: ["ALL"] } },
    terminationMessagePath: "/dev/termination-log",
    terminationMessagePolicy: "File",
  });
  const labels = { app: "shop", component: "api", "pod-template-hash": "6d9f7c5b8" };
  return {
    apiVersion: "admission.k8s.io/v1",
    kind: "AdmissionReview",
    request: {
      uid,
      kind: { group: "", version: "v1", kind: "Pod" },
      resource: { group: "", version: "v1", resource: "pods" },
      requestKind: { group: "", version: "v1", kind: "Pod" },
      requestResource: { group: "", version: "v1", resource: "pods" },
      namespace: "shop",
      operation: "CREATE",
      userInfo: {
        username: "system:serviceaccount:kube-system:replicaset-controller",
        uid: "4f1d0c6e-2b1a-4f7e-9d0b-1f3a5c7e9b2d",
        groups: ["system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"],
      },
      object: {
        apiVersion: "v1",
        kind: "Pod",
        metadata: {
          generateName: "shop-api-6d9f7c5b8-",
          namespace: "shop",
          labels,
          ownerReferences: [
            {
              apiVersion: "apps/v1",
              kind: "ReplicaSet",
              name: "shop-api-6d9f7c5b8",
              uid: "8c2e4a6b-1d3f-4e5a-b7c9-0d2f4a6c8e1b",
              controller: true,
              blockOwnerDeletion: true,
            },
          ],
        },
        spec: {
          volumes: [
            {
              name: "kube-api-access-x7k2p",
              projected: {
                sources: [
                  { serviceAccountToken: { expirationSeconds: 3607, path: "token" } },
                  { configMap: { name: "kube-root-ca.crt", items: [{ key: "ca.crt", path: "ca.crt" }] } },
                ],
                defaultMode: 420,
              },
            },
          ],
          containers: [container("api", 8080), container("sidecar", 9090), container("metrics", 9100)].slice(0, CONTAINERS),
          restartPolicy: "Always",
          terminationGracePeriodSeconds: 30,
          dnsPolicy: "ClusterFirst",
          serviceAccountName: "default",
          serviceAccount: "default",
          securityContext: {},
          schedulerName: "default-scheduler",
          tolerations: [
            { key: "node.kubernetes.io/not-ready", operator: "Exists", effect: "NoExecute", tolerationSeconds: 300 },
            { key: "node.kubernetes.io/unreachable", operator: "Exists", effect: "NoExecute", tolerationSeconds: 300 },
          ],
          priority: 0,
          enableServiceLinks: true,
          preemptionPolicy: "PreemptLowerPriority",
        },
        status: {},
      },
      oldObject: null,
      dryRun: false,
      options: { kind: "CreateOptions", apiVersion: "meta.k8s.io/v1" },
    },
  };
}

const [BODY_HEAD, BODY_TAIL] = (() => {
  const text = JSON.stringify(podAdmissionReview(UID_PLACEHOLDER));
  const at = text.indexOf(UID_PLACEHOLDER);
  return [text.slice(0, at), text.slice(at + UID_PLACEHOLDER.length)] as const;
})();
const BODY_BYTES = Buffer.byteLength(BODY_HEAD + randomUUID() + BODY_TAIL);
const REQUEST_HEADERS = { "content-type": "application/json", accept: "application/json" };

// ---------------------------------------------------------------------------------------------------------
// Server processes (bench/support/server-process.ts), and what this benchmark reads from them.

/** imprimatur_decisions_total{endpoint="validate",outcome="allowed"} from the server's /metrics. */
async function allowedDecisions(origin: string, ca: string): Promise<number> {
  return sumOf(parseMetrics(await fetchMetrics(origin, ca)), "imprimatur_decisions_total", { endpoint: "validate", outcome: "allowed" });
}

// ---------------------------------------------------------------------------------------------------------
// Load generation. Each server gets its own undici Pool: one keep-alive TLS connection per worker, `concurrency`
// workers each sending a request as soon as the previous answer is in. Both servers are warmed up first, then
// measured in alternating slices (round r: baseline then imprimatur, round r+1 the other way round), so that
// drift in what else the machine does lands on both alike.

interface Target {
  proc: ServerProcess;
  pool: Pool;
  /** Latency (ms) of every answer completed inside a measured slice. */
  latencies: number[];
  measuredMs: number;
  issued: number;
  capped: boolean;
  /** The first few distinct failures, and how many requests failed in all. */
  failures: string[];
  failureCount: number;
  /** Summed over measured slices: wall time from first send to last answer, and CPU in it. */
  cpuWallMs: number;
  serverCpuMs: number | undefined;
  generatorCpuMs: number;
  /** Answers in the measured slices, including the few that landed just after a slice ended. */
  answersInCpuWindow: number;
  /** Throughput of each measured slice. */
  rounds: number[];
}

function newTarget(proc: ServerProcess, ca: string, opts: Options): Target {
  const pool = new Pool(proc.origin, {
    connections: opts.concurrency,
    pipelining: 1,
    connect: { ca },
    keepAliveTimeout: 60_000,
    headersTimeout: 10_000,
    bodyTimeout: 10_000,
  });
  return {
    proc,
    pool,
    latencies: [],
    measuredMs: 0,
    issued: 0,
    capped: false,
    failures: [],
    failureCount: 0,
    cpuWallMs: 0,
    serverCpuMs: 0,
    generatorCpuMs: 0,
    answersInCpuWindow: 0,
    rounds: [],
  };
}

/**
 * One POST to /validate through undici's dispatch API. Cheaper for the generator than pool.request, which wraps
 * every answer in a stream and a body mixin: the generator must stay ahead of the fastest server, or the
 * baseline's throughput measures the generator and flatters the ratio.
 */
function post(pool: Pool, body: string): Promise<{ status: number; text: string }> {
  return new Promise((resolveAnswer, reject) => {
    let status = 0;
    const chunks: Buffer[] = [];
    pool.dispatch(
      { path: VALIDATE_PATH, method: "POST", headers: REQUEST_HEADERS, body },
      {
        onRequestStart: () => {}, // required by undici, even when there is nothing to do
        onResponseStart: (_controller, statusCode) => {
          status = statusCode;
        },
        onResponseData: (_controller, chunk) => {
          chunks.push(chunk);
        },
        onResponseEnd: () => resolveAnswer({ status, text: (chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)).toString("utf8") }),
        onResponseError: (_controller, error) => reject(error),
      },
    );
  });
}

/** Drives `target` for `ms` at full concurrency; when `measure`, records the answers completed inside the slice. */
async function drive(target: Target, ms: number, measure: boolean, opts: Options): Promise<void> {
  const serverCpuBefore = processTreeCpuMs(target.proc.child.pid);
  const generatorBefore = process.cpuUsage();
  const start = performance.now();
  const end = start + ms;
  let inSlice = 0;
  let answers = 0;
  let stop = false;
  const fail = (message: string) => {
    target.failureCount++;
    if (target.failures.length < 3 && !target.failures.includes(message)) target.failures.push(message);
    stop = true;
  };

  const worker = async () => {
    while (!stop && performance.now() < end) {
      if (target.issued >= opts.maxRequests) {
        target.capped = true;
        break;
      }
      target.issued++;
      const uid = randomUUID();
      const sent = performance.now();
      let status: number;
      let text: string;
      try {
        ({ status, text } = await post(target.pool, BODY_HEAD + uid + BODY_TAIL));
      } catch (e) {
        return fail(`request failed: ${(e as Error).message}`);
      }
      const done = performance.now();
      if (status < 200 || status > 299) return fail(`HTTP ${status}: ${text.slice(0, 300)}`);
      let answer: { apiVersion?: unknown; kind?: unknown; response?: { uid?: unknown; allowed?: unknown; status?: { message?: unknown } } };
      try {
        answer = JSON.parse(text);
      } catch {
        return fail(`answer is not JSON: ${text.slice(0, 300)}`);
      }
      if (answer.response?.uid !== uid) return fail(`answer uid ${JSON.stringify(answer.response?.uid)} is not the request's ${uid}`);
      if (answer.response.allowed !== true) {
        return fail(
          `allowed is ${JSON.stringify(answer.response.allowed)}, expected true (${String(answer.response.status?.message ?? "no message").slice(0, 300)})`,
        );
      }
      if (answer.apiVersion !== "admission.k8s.io/v1" || answer.kind !== "AdmissionReview") {
        return fail(`answer is not an admission.k8s.io/v1 AdmissionReview: ${text.slice(0, 300)}`);
      }
      answers++;
      if (measure && done <= end) {
        target.latencies.push(done - sent);
        inSlice++;
      }
    }
  };
  await Promise.all(Array.from({ length: opts.concurrency }, worker));
  if (!measure) return;

  // Every request of the slice has been answered now, so the CPU between the two readings is exactly theirs.
  const finished = performance.now();
  const serverCpuAfter = processTreeCpuMs(target.proc.child.pid);
  const generatorAfter = process.cpuUsage();
  // A slice cut short (cap reached, failure) counts only up to its last answer.
  const sliceMs = Math.min(ms, finished - start);
  target.measuredMs += sliceMs;
  target.rounds.push(sliceMs > 0 ? (inSlice * 1000) / sliceMs : 0);
  target.cpuWallMs += finished - start;
  target.answersInCpuWindow += answers;
  target.generatorCpuMs += (generatorAfter.user + generatorAfter.system - generatorBefore.user - generatorBefore.system) / 1000;
  target.serverCpuMs =
    target.serverCpuMs === undefined || serverCpuBefore === undefined || serverCpuAfter === undefined
      ? undefined
      : target.serverCpuMs + serverCpuAfter - serverCpuBefore;
}

interface LoadResult {
  server: string;
  /** Answers completed inside the measured slices. */
  requests: number;
  measuredSeconds: number;
  requestsPerSecond: number;
  /** Throughput of each measured slice, in round order. */
  roundRequestsPerSecond: number[];
  latencyMs: { p50: number; p90: number; p99: number; max: number };
  /** CPU used while measured, as % of one core; server from /proc (all threads), generator from process.cpuUsage. */
  serverCpuPercent: number | undefined;
  serverCpuMicrosPerRequest: number | undefined;
  generatorCpuPercent: number;
  generatorCpuMicrosPerRequest: number;
  /** Requests sent, warm-up included. */
  totalRequests: number;
  capped: boolean;
  failures: string[];
  failureCount: number;
}

function summarize(t: Target): LoadResult {
  const sorted = Float64Array.from(t.latencies).sort();
  const pct = (p: number) => percentile(sorted, p);
  const perCpuMs = (ms: number) => (t.cpuWallMs > 0 ? (ms / t.cpuWallMs) * 100 : NaN);
  const perAnswer = (ms: number) => (t.answersInCpuWindow > 0 ? (ms * 1000) / t.answersInCpuWindow : NaN);
  return {
    server: t.proc.name,
    requests: t.latencies.length,
    measuredSeconds: t.measuredMs / 1000,
    requestsPerSecond: t.measuredMs > 0 ? (t.latencies.length * 1000) / t.measuredMs : 0,
    roundRequestsPerSecond: t.rounds,
    latencyMs: { p50: pct(50), p90: pct(90), p99: pct(99), max: sorted.length ? sorted[sorted.length - 1]! : NaN },
    serverCpuPercent: t.serverCpuMs === undefined ? undefined : perCpuMs(t.serverCpuMs),
    serverCpuMicrosPerRequest: t.serverCpuMs === undefined ? undefined : perAnswer(t.serverCpuMs),
    generatorCpuPercent: perCpuMs(t.generatorCpuMs),
    generatorCpuMicrosPerRequest: perAnswer(t.generatorCpuMs),
    totalRequests: t.issued,
    capped: t.capped,
    failures: t.failures,
    failureCount: t.failureCount,
  };
}

async function runLoad(procs: [ServerProcess, ServerProcess], ca: string, opts: Options): Promise<[LoadResult, LoadResult]> {
  const targets = procs.map((p) => newTarget(p, ca, opts)) as [Target, Target];
  const failed = () => targets.some((t) => t.failures.length > 0 || t.capped);
  try {
    for (const t of targets) {
      if (failed()) break;
      say(opts, `Warming up ${t.proc.name}: ${opts.warmup} s at concurrency ${opts.concurrency} ...`);
      await drive(t, opts.warmup * 1000, false, opts);
    }
    const sliceMs = (opts.seconds * 1000) / opts.rounds;
    say(opts, `Measuring: ${opts.rounds} rounds of ${(sliceMs / 1000).toFixed(2)} s per server, alternating ...`);
    for (let r = 0; r < opts.rounds && !failed(); r++) {
      const order = r % 2 === 0 ? targets : [targets[1], targets[0]];
      for (const t of order) if (!failed()) await drive(t, sliceMs, true, opts);
    }
  } finally {
    await Promise.all(targets.map((t) => t.pool.close()));
  }
  return [summarize(targets[0]), summarize(targets[1])];
}

// ---------------------------------------------------------------------------------------------------------

/**
 * With --pin on (and two CPUs and taskset): every thread of each server on SERVER_CPU, every thread of this
 * process on GENERATOR_CPU. Both servers alike; they are measured in turn, so they never compete for it.
 */
function pinProcesses(opts: Options, servers: ServerProcess[]): { pinned: boolean; description: string } {
  if (opts.pin === "off") return { pinned: false, description: "off (--pin off)" };
  if (cpus().length < 2) return { pinned: false, description: `not pinned: ${cpus().length} CPU` };
  const taskset = findTaskset();
  if (!taskset) return { pinned: false, description: "not pinned: taskset is not installed" };
  const done = [...servers.map((s) => pinTree(taskset, s.child.pid, SERVER_CPU, s.name)), pin(taskset, process.pid, GENERATOR_CPU, "load generator")];
  return { pinned: done.every((d) => / on CPU \d+$/.test(d)), description: done.join(", ") };
}

/** Node flags that write the server's CPU profile to --cpu-prof DIR on exit (none without it). */
function cpuProfFlags(name: string, opts: Options): string[] {
  return opts.cpuProfDir ? ["--cpu-prof", `--cpu-prof-dir=${opts.cpuProfDir}`, `--cpu-prof-name=${name}-\${pid}.cpuprofile`] : [];
}

function say(opts: Options, line: string) {
  if (!opts.json) process.stderr.write(`${line}\n`);
}

function resultTable(results: LoadResult[]): string {
  const f = (n: number | undefined, digits: number) => (n === undefined || Number.isNaN(n) ? "n/a" : n.toFixed(digits));
  const pctCell = (n: number | undefined) => (n === undefined || Number.isNaN(n) ? "n/a" : `${n.toFixed(0)}%`);
  const rows = [
    ["server", "answers", "req/s", "p50 ms", "p90 ms", "p99 ms", "max ms", "server CPU", "µs/req", "generator CPU", "µs/req"],
    ...results.map((r) => [
      r.server,
      String(r.requests),
      f(r.requestsPerSecond, 0),
      f(r.latencyMs.p50, 2),
      f(r.latencyMs.p90, 2),
      f(r.latencyMs.p99, 2),
      f(r.latencyMs.max, 1),
      pctCell(r.serverCpuPercent),
      f(r.serverCpuMicrosPerRequest, 0),
      pctCell(r.generatorCpuPercent),
      f(r.generatorCpuMicrosPerRequest, 0),
    ]),
  ];
  return renderTable(rows);
}

async function main(): Promise<number> {
  let opts: Options;
  try {
    opts = parseOptions(process.argv.slice(2));
  } catch (e) {
    process.stderr.write(`admission-throughput: ${(e as Error).message}\n\n${USAGE}`);
    return 2;
  }

  const { stateDir, caFile, logFd, closeLog } = await createServeState("imprimatur-bench-", "imprimatur-decisions.jsonl");
  let imprimatur: ServerProcess | undefined;
  let baseline: ServerProcess | undefined;

  // Whatever happens, the benchmark stops by itself: a watchdog well past the planned duration (two starts, twice
  // the load phases, a request timeout per slice, and a minute to spare).
  const budgetMs = 2 * READY_TIMEOUT_MS + 4 * (opts.warmup + opts.seconds) * 1000 + (opts.rounds + 1) * 2 * 10_000 + 60_000;
  const unguard = guardRun("admission-throughput", budgetMs, (signal) => {
    signalServers([imprimatur, baseline], signal);
    if (!opts.keepState) rmSync(stateDir, { recursive: true, force: true });
  });

  try {
    say(opts, `Starting imprimatur serve (state ${stateDir}) ...`);
    imprimatur = await startServer("imprimatur", imprimaturServeArgs(stateDir, opts.serveArgs), caFile, logFd, [
      ...opts.nodeArgs,
      ...cpuProfFlags("imprimatur", opts),
    ]);
    // The baseline serves the certificate imprimatur generated, so both handshakes cost the same.
    say(opts, "Starting the baseline server ...");
    baseline = opts.baselineServeArgs
      ? await startServer("baseline", imprimaturServeArgs(stateDir, opts.baselineServeArgs), caFile, logFd, [
          ...opts.baselineNodeArgs,
          ...cpuProfFlags("baseline", opts),
        ])
      : await startServer(
          "baseline",
          baselineServerArgs(stateDir, opts.baselineAfterTurn ? ["--after-turn"] : []),
          caFile,
          "ignore",
          cpuProfFlags("baseline", opts),
        );
    const ca = readFileSync(caFile, "utf8");
    const pinning = pinProcesses(opts, [baseline, imprimatur]);
    say(opts, `Pinning: ${pinning.description}`);

    const results = await runLoad([baseline, imprimatur], ca, opts);
    // The server's own count of allowed validate decisions: proof that each answer went through the whole path.
    const decisionsCounted = await allowedDecisions(imprimatur.origin, ca).catch(() => -1);
    const died = [baseline, imprimatur].flatMap((p) =>
      hasExited(p)
        ? [`${p.name}: the server exited during the run (${p.child.signalCode ?? `code ${p.child.exitCode}`}): ${p.stderr().trim().slice(-500)}`]
        : [],
    );
    await Promise.all([stopServer(imprimatur), stopServer(baseline)]);
    closeLog();

    const [base, imp] = results;
    const ratio = base.requestsPerSecond > 0 ? imp.requestsPerSecond / base.requestsPerSecond : NaN;
    const roundRatios = imp.roundRequestsPerSecond.flatMap((rps, i) => {
      const b = base.roundRequestsPerSecond[i];
      return b ? [rps / b] : [];
    });
    const sortedRatios = [...roundRatios].sort((x, y) => x - y);
    const roundRatioSpread = sortedRatios.length
      ? { min: sortedRatios[0]!, median: sortedRatios[Math.floor((sortedRatios.length - 1) / 2)]!, max: sortedRatios[sortedRatios.length - 1]! }
      : undefined;
    const failures = died.concat(
      results.flatMap((r) => [
        ...r.failures.map((f) => `${r.server}: ${f}`),
        ...(r.failureCount > r.failures.length ? [`${r.server}: ${r.failureCount} failed requests in all`] : []),
      ]),
    );
    if (failures.length === 0) {
      for (const r of results) if (r.requests === 0) failures.push(`${r.server}: no answer inside the measured slices (raise --max-requests?)`);
    }
    const ok = failures.length === 0;
    const verdict = !ok ? "FAILED" : ratio >= TARGET_RATIO ? "PASS" : "BELOW TARGET";
    // A generator near a full core may be what limits a server's throughput: then that server's req/s is a
    // floor, and if it is the baseline's, the ratio is flattered.
    const generatorSaturated = results.filter((r) => r.generatorCpuPercent >= GENERATOR_SATURATED_PERCENT).map((r) => r.server);

    const report = {
      benchmark: "admission-throughput",
      date: new Date().toISOString(),
      node: process.version,
      cpus: cpus().length,
      cpuModel: cpus()[0]?.model ?? "unknown",
      request: { path: VALIDATE_PATH, kind: "Pod CREATE", containers: CONTAINERS, image: IMAGE, bodyBytes: BODY_BYTES },
      concurrency: opts.concurrency,
      warmupSeconds: opts.warmup,
      seconds: opts.seconds,
      rounds: opts.rounds,
      maxRequests: opts.maxRequests,
      pin: opts.pin,
      pinned: pinning.pinned,
      pinning: pinning.description,
      generatorSaturated,
      imprimaturServer: `${["node", ...opts.nodeArgs].join(" ")} bin/imprimatur.js serve ${opts.serveArgs.join(" ")}`.trim(),
      baselineServer: opts.baselineServeArgs
        ? `${["node", ...opts.baselineNodeArgs].join(" ")} bin/imprimatur.js serve ${opts.baselineServeArgs.join(" ")}`.trim()
        : opts.baselineAfterTurn
          ? "echo answering after the turn's reads (bench/baseline-server.ts --after-turn)"
          : "echo (bench/baseline-server.ts)",
      baseline: base,
      imprimatur: imp,
      imprimaturDecisionsCounted: decisionsCounted,
      ratio,
      roundRatios,
      target: TARGET_RATIO,
      verdict,
      ok,
      failures,
      ...(opts.cpuProfDir
        ? {
            cpuProfiles: opts.cpuProfDir,
            // As node --cpu-prof-name names them (cpuProfFlags), written when the servers exit.
            cpuProfileFiles: Object.fromEntries([baseline, imprimatur].map((p) => [p.name, join(opts.cpuProfDir!, `${p.name}-${p.child.pid}.cpuprofile`)])),
          }
        : {}),
      ...(opts.keepState ? { stateDir } : {}),
    };

    if (opts.json) {
      process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
    } else {
      const out = [
        "",
        `admission-throughput  ${report.date}  node ${report.node}  ${report.cpus} CPUs (${report.cpuModel})`,
        `POST ${VALIDATE_PATH}: Pod CREATE, ${CONTAINERS} containers ${IMAGE} (allowed), ${BODY_BYTES} bytes; ` +
          `concurrency ${opts.concurrency}, warm-up ${opts.warmup} s, measured ${opts.seconds} s per server in ${opts.rounds} alternating rounds`,
        `pinning: ${pinning.description}`,
        `imprimatur: ${report.imprimaturServer}`,
        `baseline: ${report.baselineServer}`,
        "",
        resultTable(results),
        "",
        `imprimatur/baseline throughput: ${Number.isNaN(ratio) ? "n/a" : `${ratio.toFixed(2)}x`} (target >= ${TARGET_RATIO.toFixed(2)}x)  ${verdict}`,
        ...(roundRatioSpread && roundRatios.length > 1
          ? [`per-round ratios: min ${roundRatioSpread.min.toFixed(2)}  median ${roundRatioSpread.median.toFixed(2)}  max ${roundRatioSpread.max.toFixed(2)}`]
          : []),
        `imprimatur counted ${decisionsCounted} allowed decisions (its /metrics) for ${imp.totalRequests} requests sent (warm-up included)`,
        ...results
          .filter((r) => generatorSaturated.includes(r.server))
          .map(
            (r) =>
              `note: the load generator used ${r.generatorCpuPercent.toFixed(0)}% of a core while driving ${r.server}: it may be what limits ` +
              `${r.server}'s req/s${r.server === "baseline" ? ", which flatters the ratio" : ""}`,
          ),
        ...results.filter((r) => r.capped).map((r) => `note: ${r.server} hit --max-requests; the measurement stopped early`),
        ...(opts.cpuProfDir ? [`CPU profiles: ${opts.cpuProfDir}`] : []),
        ...(opts.keepState ? [`state kept: ${stateDir}`] : []),
        ...(ok ? [] : ["", "FAILED:", ...failures.map((f) => `  ${f}`)]),
        "",
      ];
      process.stdout.write(out.join("\n"));
    }
    return ok ? 0 : 1;
  } catch (e) {
    process.stderr.write(`admission-throughput: ${(e as Error).message}\n`);
    return 1;
  } finally {
    await Promise.all([stopServer(imprimatur), stopServer(baseline)]);
    closeLog();
    if (!opts.keepState) await rm(stateDir, { recursive: true, force: true });
    unguard();
  }
}

process.exitCode = await main();
