// What `imprimatur node-proxy` adds to the kubelet's image calls, against containerd 1.6 called directly, in the
// same run, with the same client code and the same request bytes: a real docker-registry with htpasswd auth
// holding one runnable image, a real containerd (test/support/real-node.ts, no kubelet), a real kube-apiserver
// (test/support/kube-cluster.ts) and the real proxy as a child process (test/support/node-proxy-process.ts) with
// the API's view of the node (--kubeconfig with the node's identity, --node-name). The image is pulled once through
// the proxy with good credentials, so a record exists; then, in alternating rounds (proxy, direct, direct, proxy, …):
//   1. ImageStatus as the kubelet's pull decision sends it, for a pod that already pulled (answered "present"):
//      latency per call and what the proxy adds at p50 and p99 (target ≤ 1 ms at p99);
//   2. ImageStatus without annotations (plain passthrough), likewise;
//   3. PullImage of the present image with the recorded credential: (a) forwarded to containerd, which asks the
//      registry (target ≤ 1.05× of the direct median), in pairs rather than rounds (one pull each way, the order
//      swapped every pair, a pause after each pull); (b) new pods, each a Pod object bound to the node in the
//      API (its own name, annotations and the UID the apiserver gave it): (i) with the pull secret that holds the
//      recorded credential, ImageStatus is answered "present" from the pod's secrets (one list of the node's pods);
//      (ii) without a pull secret (the kubelet's credential comes from the node), ImageStatus is answered "absent"
//      (one list), and PullImage with the recorded credential is answered from the records once a GET of its pod
//      shows that the pod does not pull the image Always — a PullImage is answered from the records for no other;
//   and optionally ImageStatus of 1. with 16 calls in flight;
//   4. memory with 10,000 records: the store in-process (heap with and without them), and the real proxy process
//      on a state folder holding them (RSS, heap, start-up time), against a stub runtime that lists their images
//      (the proxy prunes records of images the runtime does not have).
// containerd, the proxy and the registry are pinned to CPU 0, this load generator to CPU 1.
//
//   node bench/node-proxy.ts [--status-calls 2000] [--pulls 300] [--new-pods 300] [--rounds 10]
//                            [--concurrency 16] [--concurrent-calls 4000] [--records 10000] [--pin on|off] [--json]
//                            [--cpu-prof DIR]
//
// Targets (issue 38), against the bare gRPC forwarder (against containerd with --forwarder off): ImageStatus
// ≤ 0.5 ms added at p99, the forwarded PullImage ≤ 1.05× of its median.
//
// Exit 0 when every call was answered as expected (present / absent / the right image ref, and the proxy's own
// counters and the apiserver's count of pod reads agree), whatever the timings; 1 on a wrong answer or a failed
// run; 2 on a usage error. Loopback only; the run stops by itself, and a watchdog ends it after 6 minutes.
import { randomBytes, randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { cpus, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { performance } from "node:perf_hooks";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath, pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import * as grpc from "@grpc/grpc-js";
import protobuf from "protobufjs";
import { credentialHash, type RegistryAuth } from "../src/core/pull-verification/credential-hash.ts";
import { recordPull } from "../src/core/pull-verification/pull-records.ts";
import { decodeImageStatusResponse, decodePullImageResponse, encodeImageStatusRequestFor, encodePullImageRequest } from "../src/cri/cri-messages.ts";
import { RuntimeImageClient, type CriPackage } from "../src/cri/image-service-proxy.ts";
import { loadKubeClient } from "../src/kube/kube-connection.ts";
import { recordFileName, RecordStore } from "../src/node/record-store.ts";
import { startNodeProxy, type NodeProxyProcess } from "../test/support/node-proxy-process.ts";
import { createPullSecret, startKubeCluster, type KubeCluster } from "../test/support/kube-cluster.ts";
import { podManifest, startNodeRuntime, type NodeRuntime } from "../test/support/real-node.ts";
import { startRegistry, type TestRegistry } from "../test/support/registry.ts";
import { buildRunnableImage } from "../test/support/runnable-image.ts";
import { startForwarder, type Forwarder } from "./support/forwarder-process.ts";
import { findTaskset, pin } from "./support/pinning.ts";
import { percentile, renderTable } from "./support/report.ts";
import { guardRun } from "./support/run-guard.ts";
import { multiplesOfRounds, numberOption } from "./support/options.ts";

/** Issue 38's targets, against the bare forwarder when it is measured (--forwarder on), else against containerd. */
const TARGET_ADDED_P99_MS = 0.5;
const TARGET_PULL_RATIO = 1.05;
const WATCHDOG_MS = 360_000;
/** containerd, the proxy and the registry on one core; this load generator on the other. */
const SERVER_CPU = 0;
const GENERATOR_CPU = 1;
/** kubelet 1.20 speaks runtime.v1alpha2, newer kubelets runtime.v1; the proxy and containerd 1.6 serve both alike. */
const PKG: CriPackage = "runtime.v1";
/** The kubelet's --runtime-request-timeout, which it sets on ImageStatus; PullImage has no deadline. */
const STATUS_DEADLINE_MS = 120_000;
/** After every timed PullImage: longer than the proxy takes to write the record it writes after answering. */
const PULL_PAUSE_MS = 20;
const REPOSITORY = "bench/app";
/** The node the proxy runs on, as the API knows it (its identity is system:node:NODE_NAME). */
const NODE_NAME = "bench-node";
/** Where the new pods live, and the sandbox namespace of every request. */
const NAMESPACE = "bench";
/** A kubernetes.io/dockerconfigjson Secret with the registry's user: the credential every record is made with. */
const PULL_SECRET = "bench-pull";
/** The one annotation of each pod's own; the kubelet passes it with its kubernetes.io/config.* ones. */
const APP_ANNOTATION = "app.kubernetes.io/name";
/** Labels each batch of new pods, so that a batch is deleted in one call. */
const BATCH_LABEL = "bench.imprimatur.dev/batch";
/** Pod creations in flight while a batch is made (not timed). */
const CREATE_CONCURRENCY = 4;
const MEMORY_PROBE = fileURLToPath(new URL("./support/memory-probe.ts", import.meta.url));
/** How long the memory measurement waits after the proxy answers before reading its memory. */
const SETTLE_MS = 1_000;

const USAGE = `Usage: node bench/node-proxy.ts [options]

  --status-calls N      ImageStatus calls timed per side, for each of the two kinds (default 2000)
  --pulls N             forwarded PullImage calls timed per side (default 300)
  --new-pods N          new pods timed per side, for each of the two kinds (with a pull secret: ImageStatus;
                        without: ImageStatus then PullImage) (default 300)
  --rounds N            how many times the measurement switches between proxy and direct (default 10)
  --concurrency N       calls in flight for the concurrent ImageStatus run (default 16; 0 skips it)
  --concurrent-calls N  ImageStatus calls timed per side in the concurrent run (default 4000)
  --records N           records for the memory measurement (default 10000; 0 skips it)
  --forwarder MODE      on (default): also time ImageStatus and PullImage through a bare gRPC forwarder, the floor
                        of any Node gRPC hop (bench/support/grpc-forwarder.ts); off: not
  --cpu-prof DIR        CPU profile of the proxy of the latency measurements (node --cpu-prof), written to DIR
  --pin MODE            on (default): containerd, the proxy and the registry on CPU 0, this generator on CPU 1;
                        off: no pinning
  --json                print the results as JSON only
`;

interface Options {
  statusCalls: number;
  pulls: number;
  newPods: number;
  rounds: number;
  concurrency: number;
  concurrentCalls: number;
  records: number;
  pin: "on" | "off";
  json: boolean;
  cpuProf: string | undefined;
  forwarder: boolean;
}

function parseOptions(argv: string[]): Options {
  const { values } = parseArgs({
    args: argv,
    options: {
      "status-calls": { type: "string", default: "2000" },
      pulls: { type: "string", default: "300" },
      "new-pods": { type: "string", default: "300" },
      rounds: { type: "string", default: "10" },
      concurrency: { type: "string", default: "16" },
      "concurrent-calls": { type: "string", default: "4000" },
      records: { type: "string", default: "10000" },
      pin: { type: "string", default: "on" },
      json: { type: "boolean", default: false },
      "cpu-prof": { type: "string" },
      forwarder: { type: "string", default: "on" },
      help: { type: "boolean", short: "h", default: false },
    },
    strict: true,
  });
  if (values.help) {
    process.stdout.write(USAGE);
    process.exit(0);
  }
  if (values.pin !== "on" && values.pin !== "off") throw new Error(`--pin must be on or off, got ${values.pin}`);
  if (values.forwarder !== "on" && values.forwarder !== "off") throw new Error(`--forwarder must be on or off, got ${values.forwarder}`);
  const rounds = numberOption("rounds", values.rounds, 2, 100);
  const opts: Options = {
    statusCalls: numberOption("status-calls", values["status-calls"], 100, 100_000),
    pulls: numberOption("pulls", values.pulls, 10, 5_000),
    newPods: numberOption("new-pods", values["new-pods"], 10, 5_000),
    rounds,
    concurrency: numberOption("concurrency", values.concurrency, 0, 256),
    concurrentCalls: numberOption("concurrent-calls", values["concurrent-calls"], 100, 200_000),
    records: numberOption("records", values.records, 0, 100_000),
    pin: values.pin,
    json: values.json,
    cpuProf: values["cpu-prof"] ? resolve(values["cpu-prof"]) : undefined,
    forwarder: values.forwarder === "on",
  };
  multiplesOfRounds(rounds, [
    ["status-calls", opts.statusCalls],
    ["pulls", opts.pulls],
    ["new-pods", opts.newPods],
    ["concurrent-calls", opts.concurrentCalls],
  ]);
  return opts;
}

// ---------------------------------------------------------------------------------------------------------
// The kubelet's requests

/** A pod's annotations as the kubelet passes them to the image service (it adds the kubernetes.io/config.* ones). */
function podAnnotations(name: string): Record<string, string> {
  return {
    "kubernetes.io/config.hash": createHashLike(name),
    "kubernetes.io/config.seen": "2026-11-24T12:00:00.123456789Z",
    "kubernetes.io/config.source": "api",
    [APP_ANNOTATION]: name,
  };
}

/** A stable 32-hex-digit stand-in for the kubelet's config hash of a pod. */
function createHashLike(name: string): string {
  return Buffer.from(name.padEnd(16, "-").slice(0, 16)).toString("hex");
}

/** `uid`: the pod's UID in the API (the proxy looks the pod up by namespace, name and UID). */
function pullRequest(image: string, pod: string, auth: Partial<RegistryAuth>, uid = `uid-${pod}`): Buffer {
  const annotations = podAnnotations(pod);
  return encodePullImageRequest({ image, annotations, auth, sandbox: { name: pod, namespace: NAMESPACE, uid, annotations } });
}

// ---------------------------------------------------------------------------------------------------------
// Measuring

/** The proxy, containerd directly, and the bare gRPC forwarder (bench/support/grpc-forwarder.ts). */
type Side = "proxy" | "direct" | "forwarder";
const SIDES: readonly Side[] = ["proxy", "direct"];

interface Stats {
  calls: number;
  p50Ms: number;
  p90Ms: number;
  p99Ms: number;
  maxMs: number;
  meanMs: number;
}

function stats(ms: readonly number[]): Stats {
  const sorted = Float64Array.from(ms).sort();
  return {
    calls: sorted.length,
    p50Ms: percentile(sorted, 50),
    p90Ms: percentile(sorted, 90),
    p99Ms: percentile(sorted, 99),
    maxMs: sorted.length > 0 ? sorted[sorted.length - 1]! : NaN,
    meanMs: ms.reduce((a, b) => a + b, 0) / Math.max(1, ms.length),
  };
}

const median = (xs: readonly number[]) => percentile(Float64Array.from(xs).sort(), 50);
const spread = (xs: readonly number[]) => ({ min: Math.min(...xs), median: median(xs), max: Math.max(...xs) });

/** A wrong answer: counted, and the first few kept for the report. */
class Failures {
  readonly list: string[] = [];
  count = 0;
  add(what: string): void {
    this.count++;
    if (this.list.length < 20) this.list.push(what);
  }
}

/** Alternating rounds: proxy, direct, then direct, proxy, and so on. `measure` runs one side's share of a round. */
async function alternate(rounds: number, sides: readonly Side[], measure: (side: Side, round: number) => Promise<void>): Promise<void> {
  for (let r = 0; r < rounds; r++) for (const side of r % 2 === 0 ? sides : [...sides].reverse()) await measure(side, r);
}

/** `n` calls of one request, one in flight; each answer checked after it is timed. */
async function sequential(
  client: RuntimeImageClient,
  method: "ImageStatus" | "PullImage",
  request: Buffer,
  n: number,
  check: (response: Buffer) => string | undefined,
  failures: Failures,
  into: number[],
): Promise<void> {
  for (let i = 0; i < n; i++) {
    const opts = method === "ImageStatus" ? { deadline: Date.now() + STATUS_DEADLINE_MS } : {};
    const t0 = performance.now();
    let response: Buffer;
    try {
      response = await client.call(PKG, method, request, opts);
    } catch (e) {
      failures.add(`${method}: ${(e as Error).message}`);
      continue;
    }
    into.push(performance.now() - t0);
    const wrong = check(response);
    if (wrong) failures.add(`${method}: ${wrong}`);
  }
}

/** `n` ImageStatus calls with `concurrency` in flight; the per-call latencies and the wall time. */
async function concurrent(
  client: RuntimeImageClient,
  request: Buffer,
  n: number,
  concurrency: number,
  check: (response: Buffer) => string | undefined,
  failures: Failures,
  into: number[],
): Promise<number> {
  let next = 0;
  const t0 = performance.now();
  const worker = async () => {
    while (next < n) {
      next++;
      const t = performance.now();
      try {
        const response = await client.call(PKG, "ImageStatus", request, { deadline: Date.now() + STATUS_DEADLINE_MS });
        into.push(performance.now() - t);
        const wrong = check(response);
        if (wrong) failures.add(`ImageStatus (concurrent): ${wrong}`);
      } catch (e) {
        failures.add(`ImageStatus (concurrent): ${(e as Error).message}`);
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return (performance.now() - t0) / 1000;
}

function present(imageRef: string): (response: Buffer) => string | undefined {
  return (response) => {
    const image = decodeImageStatusResponse(response);
    return image?.id === imageRef ? undefined : `expected present ${imageRef}, got ${image ? image.id : "absent"}`;
  };
}

function absent(response: Buffer): string | undefined {
  const image = decodeImageStatusResponse(response);
  return image ? `expected absent, got present ${image.id}` : undefined;
}

function pulled(imageRef: string): (response: Buffer) => string | undefined {
  return (response) => {
    const ref = decodePullImageResponse(response).imageRef;
    return ref === imageRef ? undefined : `expected image ref ${imageRef}, got ${ref || "none"}`;
  };
}

/** 3b: new pods bound to the node in the API. */
interface NewPodResult {
  /** The new pods the node held during a round (besides none other: bench-pulled is not in the API). */
  podsOnNode: number;
  /** (i) With the pull secret: ImageStatus only (the proxy: present, from the pod's secrets). */
  podSecrets: { status: Comparison; listsPerPod: number; getsPerPod: number; listAlone: Stats };
  /** (ii) A credential from the node: ImageStatus (the proxy: absent), then PullImage (the proxy: from the records). */
  nodeCredential: { status: Comparison; pull: Comparison; total: Comparison; listsPerPod: number; getsPerPod: number; getAlone: Stats };
}

interface Comparison {
  proxy: Stats;
  direct: Stats;
  addedP50Ms: number;
  addedP99Ms: number;
  /** Per round: proxy p50 − direct p50. */
  roundAddedP50Ms: { min: number; median: number; max: number };
  /** The bare gRPC forwarder, when it was measured too, and what it added to direct. */
  forwarder?: Stats & { addedP50Ms: number; addedP99Ms: number };
}

function compare(series: Record<Side, number[][]>): Comparison {
  const proxy = stats(series.proxy.flat());
  const direct = stats(series.direct.flat());
  const perRound = series.proxy.map((p, r) => median(p) - median(series.direct[r]!));
  const forwarder = series.forwarder.flat().length > 0 ? stats(series.forwarder.flat()) : undefined;
  return {
    proxy,
    direct,
    addedP50Ms: proxy.p50Ms - direct.p50Ms,
    addedP99Ms: proxy.p99Ms - direct.p99Ms,
    roundAddedP50Ms: spread(perRound),
    ...(forwarder ? { forwarder: { ...forwarder, addedP50Ms: forwarder.p50Ms - direct.p50Ms, addedP99Ms: forwarder.p99Ms - direct.p99Ms } } : {}),
  };
}

const perRound = (rounds: number): Record<Side, number[][]> => ({
  proxy: Array.from({ length: rounds }, () => []),
  direct: Array.from({ length: rounds }, () => []),
  forwarder: Array.from({ length: rounds }, () => []),
});

// ---------------------------------------------------------------------------------------------------------
// Memory with many records

interface ProcessMemory {
  /** VmRSS 1 s after the proxy answered its first call. */
  rssMiB: number;
  /** VmRSS after the full GC. */
  rssAfterGcMiB: number;
  heapUsedMiB: number;
  heapTotalMiB: number;
  /** From the process's start (performance.timeOrigin) to its "node proxy serving" log line. */
  startupMs: number;
  /** The record count the proxy logged when it started serving. */
  records: number;
}

interface MemoryResult {
  records: number;
  inProcess: { heapBytesPerRecord: number; heapMiB: number; openMs: number; openEmptyMs: number; rounds: number };
  process: { empty: ProcessMemory[]; full: ProcessMemory[] };
}

/** Writes `n` records as the proxy writes them (recordPull, pretty JSON, 0600) into a new state folder; their image refs. */
async function writeRecords(stateDir: string, n: number, host: string): Promise<string[]> {
  const store = await RecordStore.open(stateDir); // the folders and the node-local key: not a first start later
  const credentials = Array.from({ length: 20 }, (_, i) =>
    credentialHash(store.key, {
      username: `team-${i}`,
      password: randomBytes(12).toString("hex"),
      auth: "",
      serverAddress: host,
      identityToken: "",
      registryToken: "",
    }),
  );
  const refs: string[] = [];
  const now = new Date();
  for (let start = 0; start < n; start += 250) {
    const batch: Array<Promise<void>> = [];
    for (let i = start; i < Math.min(n, start + 250); i++) {
      const imageRef = `sha256:${randomBytes(32).toString("hex")}`;
      refs.push(imageRef);
      const pod = { namespace: `team-${i % 50}`, name: `app-${i}-7d9f8b6c5-x2x4q`, uid: randomUUID() };
      const record = recordPull(undefined, imageRef, `${host}/team-${i % 50}/app-${i}`, { hash: credentials[i % credentials.length]!, pod }, now);
      batch.push(writeFile(join(stateDir, "pulled", recordFileName(imageRef)), JSON.stringify(record, null, 2), { mode: 0o600 }));
    }
    await Promise.all(batch);
  }
  return refs;
}

function exposeGc(): () => void {
  setFlagsFromString("--expose-gc");
  return runInNewContext("gc") as () => void;
}

/**
 * RecordStore.open of the folders in this process: the heap after a full GC with the store held, against before
 * it. Each round in a call of its own, so that no earlier round's store is still held by a suspended frame.
 */
async function storeInProcess(fullDir: string, emptyDir: string, n: number, rounds: number): Promise<MemoryResult["inProcess"]> {
  const gc = exposeGc();
  const open = async (dir: string, want: number) => {
    gc();
    const before = process.memoryUsage().heapUsed;
    const t0 = performance.now();
    const store = await RecordStore.open(dir);
    const ms = performance.now() - t0;
    gc();
    const bytes = process.memoryUsage().heapUsed - before;
    if (store.counts().pulled !== want) throw new Error(`RecordStore.open read ${store.counts().pulled} records in ${dir}, not ${want}`);
    return { ms, bytes };
  };
  const full: Array<{ ms: number; bytes: number }> = [];
  const empty: Array<{ ms: number; bytes: number }> = [];
  for (let r = 0; r < rounds; r++) {
    empty.push(await open(emptyDir, 0));
    full.push(await open(fullDir, n));
  }
  const delta = median(full.map((f) => f.bytes)) - median(empty.map((e) => e.bytes));
  return {
    heapBytesPerRecord: delta / n,
    heapMiB: delta / 2 ** 20,
    openMs: median(full.map((f) => f.ms)),
    openEmptyMs: median(empty.map((e) => e.ms)),
    rounds,
  };
}

/** A runtime that has exactly these images: ListImages lists them, ImageStatus knows none. Both CRI packages. */
async function startStubRuntime(socket: string, imageRefs: readonly string[], host: string): Promise<{ endpoint: string; close(): void }> {
  const root = protobuf.loadSync(fileURLToPath(new URL("../src/cri/image-service.proto", import.meta.url)));
  const List = root.lookupType("imprimatur.cri.ListImagesResponse");
  const listed = Buffer.from(
    List.encode(
      List.fromObject({
        images: imageRefs.map((id, i) => ({
          id,
          repoTags: [`${host}/team-${i % 50}/app-${i}:v1`],
          repoDigests: [`${host}/team-${i % 50}/app-${i}@sha256:${id.slice("sha256:".length)}`],
        })),
      }),
    ).finish(),
  );
  const server = new grpc.Server({ "grpc.max_send_message_length": 16 * 1024 * 1024, "grpc.max_receive_message_length": 16 * 1024 * 1024 });
  const raw = (b: Buffer) => b;
  for (const pkg of ["runtime.v1", "runtime.v1alpha2"]) {
    const method = (name: string) => ({
      path: `/${pkg}.ImageService/${name}`,
      requestStream: false,
      responseStream: false,
      requestSerialize: raw,
      requestDeserialize: raw,
      responseSerialize: raw,
      responseDeserialize: raw,
    });
    server.addService({ ListImages: method("ListImages"), ImageStatus: method("ImageStatus") } as grpc.ServiceDefinition, {
      ListImages: ((_call: unknown, callback: grpc.sendUnaryData<Buffer>) => callback(null, listed)) as grpc.handleUnaryCall<Buffer, Buffer>,
      ImageStatus: ((_call: unknown, callback: grpc.sendUnaryData<Buffer>) => callback(null, Buffer.alloc(0))) as grpc.handleUnaryCall<Buffer, Buffer>,
    });
  }
  const endpoint = `unix://${socket}`;
  await new Promise<void>((resolve, reject) => server.bindAsync(endpoint, grpc.ServerCredentials.createInsecure(), (err) => (err ? reject(err) : resolve())));
  return { endpoint, close: () => server.forceShutdown() };
}

function vmRssKiB(pid: number): number {
  const m = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  if (!m) throw new Error(`no VmRSS for ${pid}`);
  return Number(m[1]);
}

/** NODE_OPTIONS as this process has them, plus `flags`. */
function nodeOptionsWith(...flags: string[]): string {
  return [process.env.NODE_OPTIONS ?? "", ...flags].join(" ").trim();
}

/**
 * startNodeProxy with more environment variables for the proxy: startNodeProxy passes this process's environment
 * on, so they are set for the start and restored as soon as the proxy answers (nothing else starts meanwhile).
 */
async function startProxyWithEnv(env: Record<string, string>, start: Parameters<typeof startNodeProxy>[0]): Promise<NodeProxyProcess> {
  const saved = Object.fromEntries(Object.keys(env).map((key) => [key, process.env[key]]));
  Object.assign(process.env, env);
  try {
    return await startNodeProxy(start);
  } finally {
    for (const [key, value] of Object.entries(saved)) {
      if (value === undefined) delete process.env[key];
      else process.env[key] = value;
    }
  }
}

/** Asks the memory probe (bench/support/memory-probe.ts) of a process for its memory after a full GC. */
async function probeMemory(pid: number, file: string): Promise<{ timeOrigin: number; after: NodeJS.MemoryUsage }> {
  await rm(file, { force: true });
  process.kill(pid, "SIGUSR2");
  for (const deadline = Date.now() + 10_000; Date.now() < deadline; await sleep(20)) {
    const text = await readFile(file, "utf8").catch(() => "");
    if (text !== "") return JSON.parse(text) as { timeOrigin: number; after: NodeJS.MemoryUsage };
  }
  throw new Error(`the memory probe of process ${pid} did not answer`);
}

/** Starts the real proxy on `stateDir` in front of the stub, with the memory probe loaded; its memory and start-up. */
async function proxyProcessMemory(dir: string, stateDir: string, runtimeEndpoint: string, started: Set<number>): Promise<ProcessMemory> {
  const memoryFile = join(dir, `memory-${randomBytes(4).toString("hex")}.json`);
  const p = await startProxyWithEnv(
    { NODE_OPTIONS: nodeOptionsWith(`--import=${pathToFileURL(MEMORY_PROBE).href}`), IMPRIMATUR_BENCH_MEMORY_FILE: memoryFile },
    { dir, stateDir, runtimeEndpoint },
  );
  started.add(p.pid);
  try {
    await sleep(SETTLE_MS); // start-up's transient buffers (a 1.5 MB ListImages answer) settle
    const rss = vmRssKiB(p.pid);
    const memory = await probeMemory(p.pid, memoryFile);
    const rssAfterGc = vmRssKiB(p.pid);
    await p.stop();
    // The log is buffered: the "serving" line is certain to be there once the proxy has stopped.
    const serving = (await p.log())
      .split("\n")
      .flatMap((line) => {
        try {
          return [JSON.parse(line) as { msg?: string; time?: number; records?: number }];
        } catch {
          return [];
        }
      })
      .find((l) => l.msg === "node proxy serving");
    if (!serving?.time) throw new Error("the proxy logged no 'node proxy serving' line");
    return {
      rssMiB: rss / 1024,
      rssAfterGcMiB: rssAfterGc / 1024,
      heapUsedMiB: memory.after.heapUsed / 2 ** 20,
      heapTotalMiB: memory.after.heapTotal / 2 ** 20,
      startupMs: serving.time - memory.timeOrigin,
      records: serving.records ?? -1,
    };
  } finally {
    await p.stop();
    started.delete(p.pid);
  }
}

async function measureMemory(dir: string, n: number, host: string, started: Set<number>, failures: Failures): Promise<MemoryResult> {
  const fullDir = join(dir, "state-records");
  const emptyDir = join(dir, "state-empty");
  const refs = await writeRecords(fullDir, n, host);
  await RecordStore.open(emptyDir);
  const inProcess = await storeInProcess(fullDir, emptyDir, n, 3);

  const stub = await startStubRuntime(join(dir, "stub-runtime.sock"), refs, host);
  const procDir = join(dir, "memory");
  await mkdir(procDir);
  const result: MemoryResult = { records: n, inProcess, process: { empty: [], full: [] } };
  try {
    // empty, full, full, empty: what else the machine does affects both alike.
    for (const which of ["empty", "full", "full", "empty"] as const) {
      const m = await proxyProcessMemory(procDir, which === "full" ? fullDir : emptyDir, stub.endpoint, started);
      const expected = which === "full" ? n : 0;
      if (m.records !== expected) failures.add(`memory: the proxy started with ${m.records} records, not ${expected}`);
      result.process[which].push(m);
    }
  } finally {
    stub.close();
  }
  return result;
}

// ---------------------------------------------------------------------------------------------------------

/**
 * With --pin on (and two CPUs and taskset): every thread of containerd, the proxy and the registry on SERVER_CPU,
 * every thread of this process on GENERATOR_CPU. Proxy and direct calls are measured in turn and both end in
 * containerd, so both sides get the same cores.
 */
function pinProcesses(opts: Options, servers: Array<{ name: string; pid: number }>): { pinned: boolean; description: string } {
  if (opts.pin === "off") return { pinned: false, description: "off (--pin off)" };
  if (cpus().length < 2) return { pinned: false, description: `not pinned: ${cpus().length} CPU` };
  const taskset = findTaskset();
  if (!taskset) return { pinned: false, description: "not pinned: taskset is not installed" };
  const done = [...servers.map((s) => pin(taskset, s.pid, SERVER_CPU, s.name)), pin(taskset, process.pid, GENERATOR_CPU, "load generator")];
  return { pinned: done.every((d) => / on CPU \d+$/.test(d)), description: done.join(", ") };
}

/**
 * LISTs and GETs of pods the apiserver has served (its apiserver_request_total): only the proxy reads pods here,
 * besides the bench's own reads alone.
 */
async function podReads(cluster: KubeCluster): Promise<{ lists: number; gets: number }> {
  const r = await cluster.kubectl(["get", "--raw", "/metrics"], { timeoutMs: 60_000 });
  if (r.code !== 0) throw new Error(`kubectl get --raw /metrics: ${r.stderr}`);
  const reads = { lists: 0, gets: 0 };
  for (const line of r.stdout.split("\n")) {
    if (!line.startsWith("apiserver_request_total{") || !line.includes('resource="pods"') || !line.includes('subresource=""')) continue;
    const count = Number(line.slice(line.lastIndexOf(" ") + 1));
    if (line.includes('verb="LIST"')) reads.lists += count;
    if (line.includes('verb="GET"')) reads.gets += count;
  }
  return reads;
}

function containerdPids(node: NodeRuntime): number[] {
  return node.pidsSeen().filter((pid) => {
    try {
      return readFileSync(`/proc/${pid}/comm`, "utf8").trim() === "containerd";
    } catch {
      return false;
    }
  });
}

async function main(): Promise<number> {
  let opts: Options;
  try {
    opts = parseOptions(process.argv.slice(2));
  } catch (e) {
    process.stderr.write(`node-proxy: ${(e as Error).message}\n\n${USAGE}`);
    return 2;
  }
  const say = (line: string) => {
    if (!opts.json) process.stderr.write(`${line}\n`);
  };
  let registry: TestRegistry | undefined;
  let cluster: KubeCluster | undefined;
  let node: NodeRuntime | undefined;
  let proxy: NodeProxyProcess | undefined;
  let forwarder: Forwarder | undefined;
  const clients: RuntimeImageClient[] = [];
  /** Proxy processes running now, for the watchdog. */
  const started = new Set<number>();
  const unguard = guardRun("node-proxy", WATCHDOG_MS, (signal) => {
    for (const pid of [...started, registry?.pid, cluster?.pids.apiserver, cluster?.pids.etcd]) {
      try {
        if (pid !== undefined) process.kill(pid, signal);
      } catch {
        // already gone
      }
    }
    // containerd and its folders: real-node.ts's exit hook tears them down when this process exits.
  });
  const failures = new Failures();
  const dir = await mkdtemp(join(tmpdir(), "imprimatur-bench-node-proxy-"));
  const t0 = performance.now();
  try {
    say("Starting docker-registry (TLS, htpasswd) and kube-apiserver, and pushing a runnable image ...");
    const clusterStarting = startKubeCluster({ nodes: [NODE_NAME] });
    try {
      registry = await startRegistry({ auth: "htpasswd" });
    } finally {
      cluster = await clusterStarting; // stopped in the end, even when the registry failed
    }
    const built = buildRunnableImage({ tag: "v1", seed: "bench-node-proxy" });
    try {
      await registry.push(built.layoutDir, "v1", REPOSITORY, "v1");
    } finally {
      await rm(built.layoutDir, { recursive: true, force: true });
    }
    const image = `${registry.host}/${REPOSITORY}:v1`;
    const good: Partial<RegistryAuth> = { username: registry.username, password: registry.password };
    // The namespace of the new pods and their pull secret, holding the credential the records are made with.
    const ns = await cluster.kubectl(["create", "namespace", NAMESPACE]);
    if (ns.code !== 0) throw new Error(`kubectl create namespace ${NAMESPACE}: ${ns.stderr}`);
    await createPullSecret(cluster, NAMESPACE, PULL_SECRET, registry, registry.password);

    say("Starting containerd and imprimatur node-proxy ...");
    node = await startNodeRuntime({ registries: [{ host: registry.host, caFile: registry.caFile }] });
    const latencyProxy = {
      dir,
      stateDir: join(dir, "state"),
      runtimeEndpoint: node.containerdEndpoint,
      args: ["--kubeconfig", cluster.nodeKubeconfig(NODE_NAME), "--node-name", NODE_NAME],
    };
    // With the memory probe (a SIGUSR2 handler, idle otherwise), for its heap after the run.
    const latencyMemoryFile = join(dir, "memory-latency.json");
    const profile = opts.cpuProf ? ["--cpu-prof", `--cpu-prof-dir=${opts.cpuProf}`] : [];
    proxy = await startProxyWithEnv(
      { NODE_OPTIONS: nodeOptionsWith(...profile, `--import=${pathToFileURL(MEMORY_PROBE).href}`), IMPRIMATUR_BENCH_MEMORY_FILE: latencyMemoryFile },
      latencyProxy,
    );
    started.add(proxy.pid);
    if (opts.forwarder) {
      forwarder = await startForwarder(join(dir, "forwarder.sock"), node.containerdEndpoint);
      started.add(forwarder.pid);
    }
    const client: Partial<Record<Side, RuntimeImageClient>> & Record<"proxy" | "direct", RuntimeImageClient> = {
      proxy: new RuntimeImageClient(proxy.endpoint),
      direct: new RuntimeImageClient(node.containerdEndpoint),
      ...(forwarder ? { forwarder: new RuntimeImageClient(forwarder.endpoint) } : {}),
    };
    clients.push(...Object.values(client));
    /** ImageStatus is timed on every side; pulls (which the forwarder would only pass on) on proxy and direct. */
    const statusSides: readonly Side[] = forwarder ? ["proxy", "direct", "forwarder"] : SIDES;
    const to = (side: Side): RuntimeImageClient => client[side]!;

    // The first pull, through the proxy with good credentials: the image is on the node and a record exists.
    const PULLED_POD = "bench-pulled";
    const imageRef = decodePullImageResponse(await client.proxy.call(PKG, "PullImage", pullRequest(image, PULLED_POD, good))).imageRef;
    if (!/^sha256:[0-9a-f]{64}$/.test(imageRef)) throw new Error(`the first pull returned ${JSON.stringify(imageRef)}`);
    const expected = { podVerified: 0, notAPod: 0, podSecrets: 0, mustPull: 0, fromRecords: 0, forwardedOk: 1 };

    const decisionRequest = encodeImageStatusRequestFor(image, podAnnotations(PULLED_POD));
    const plainRequest = encodeImageStatusRequestFor(image, {});
    const forwardedPull = pullRequest(image, PULLED_POD, good);
    // Passthrough is byte for byte: the same answer both ways.
    const viaProxy = await client.proxy.call(PKG, "ImageStatus", plainRequest);
    const viaDirect = await client.direct.call(PKG, "ImageStatus", plainRequest);
    expected.notAPod++;
    if (!viaProxy.equals(viaDirect)) failures.add("plain ImageStatus: the proxy's answer differs from containerd's");

    const servers = [
      ...containerdPids(node).map((pid) => ({ name: "containerd", pid })),
      { name: "node-proxy", pid: proxy.pid },
      ...(forwarder ? [{ name: "grpc-forwarder", pid: forwarder.pid }] : []),
      { name: "docker-registry", pid: registry.pid },
      { name: "kube-apiserver", pid: cluster.pids.apiserver },
      { name: "etcd", pid: cluster.pids.etcd },
    ];
    const pinning = pinProcesses(opts, servers);
    say(`Pinning: ${pinning.description}`);

    const perSide = (n: number) => n / opts.rounds;
    const warm = (n: number) => Math.max(10, Math.round(n / 10));

    // 1. and 2.: ImageStatus, the pull decision of a pod that pulled, and plain.
    const statusOf = async (request: Buffer, count: "podVerified" | "notAPod") => {
      const ignored: number[] = [];
      for (const side of statusSides) {
        await sequential(to(side), "ImageStatus", request, warm(opts.statusCalls), present(imageRef), failures, ignored);
        if (side === "proxy") expected[count] += warm(opts.statusCalls);
      }
      const series = perRound(opts.rounds);
      await alternate(opts.rounds, statusSides, async (side, r) => {
        await sequential(to(side), "ImageStatus", request, perSide(opts.statusCalls), present(imageRef), failures, series[side][r]!);
        if (side === "proxy") expected[count] += perSide(opts.statusCalls);
      });
      return compare(series);
    };
    say(`ImageStatus of the pull decision, ${opts.statusCalls} per side ...`);
    const decision = await statusOf(decisionRequest, "podVerified");
    say(`ImageStatus without annotations, ${opts.statusCalls} per side ...`);
    const plain = await statusOf(plainRequest, "notAPod");

    // ImageStatus of the pull decision with calls in flight.
    let concurrentResult: (Comparison & { concurrency: number; callsPerSecond: Partial<Record<Side, number>> }) | undefined;
    if (opts.concurrency > 0) {
      say(`ImageStatus of the pull decision, ${opts.concurrency} in flight, ${opts.concurrentCalls} per side ...`);
      const ignored: number[] = [];
      for (const side of statusSides) {
        await concurrent(to(side), decisionRequest, warm(opts.concurrentCalls), opts.concurrency, present(imageRef), failures, ignored);
        if (side === "proxy") expected.podVerified += warm(opts.concurrentCalls);
      }
      const series = perRound(opts.rounds);
      const seconds: Record<Side, number> = { proxy: 0, direct: 0, forwarder: 0 };
      await alternate(opts.rounds, statusSides, async (side, r) => {
        seconds[side] += await concurrent(
          to(side),
          decisionRequest,
          perSide(opts.concurrentCalls),
          opts.concurrency,
          present(imageRef),
          failures,
          series[side][r]!,
        );
        if (side === "proxy") expected.podVerified += perSide(opts.concurrentCalls);
      });
      concurrentResult = {
        ...compare(series),
        concurrency: opts.concurrency,
        callsPerSecond: {
          proxy: series.proxy.flat().length / seconds.proxy,
          direct: series.direct.flat().length / seconds.direct,
          ...(forwarder ? { forwarder: series.forwarder.flat().length / seconds.forwarder } : {}),
        },
      };
    }

    // 3a. PullImage forwarded to containerd (no absence reported before it), against containerd directly.
    say(`PullImage of the present image, forwarded, ${opts.pulls} per side ...`);
    const warmPulls: number[] = [];
    for (const side of statusSides) {
      await sequential(to(side), "PullImage", forwardedPull, warm(opts.pulls), pulled(imageRef), failures, warmPulls);
      if (side === "proxy") expected.forwardedOk += warm(opts.pulls);
    }
    // Side by side, not in rounds of one side: each pull through the proxy is next to one straight to containerd
    // (and one through the bare forwarder), the order reversed every time, so the drift of the registry and
    // containerd (a pull's time varies by more than the 5% looked for) falls on every side alike. A pause after
    // every pull lets the proxy finish the record it writes after answering, so that its fsyncs slow no other pull.
    const pullSeries = perRound(opts.rounds);
    for (let i = 0; i < opts.pulls; i++) {
      const round = Math.floor(i / perSide(opts.pulls));
      for (const side of i % 2 === 0 ? statusSides : [...statusSides].reverse()) {
        await sequential(to(side), "PullImage", forwardedPull, 1, pulled(imageRef), failures, pullSeries[side][round]!);
        if (side === "proxy") expected.forwardedOk++;
        await sleep(PULL_PAUSE_MS);
      }
    }
    const forwarded = compare(pullSeries);
    const pullRatio = forwarded.proxy.p50Ms / forwarded.direct.p50Ms;
    const pullRoundRatios = spread(pullSeries.proxy.map((p, r) => median(p) / median(pullSeries.direct[r]!)));

    // 3b. New pods. Each is a Pod object bound to the node, made through the API before its round (not timed),
    // with its own name and annotations, and the UID the apiserver gave it in its PullImage's sandbox; a batch is
    // deleted after its round, so the node holds at most a round's pods (and the warm-up's, during the warm-up).
    // Every side gets the same requests. The proxy answers an ImageStatus from a list of the node's pods that started
    // after the call arrived, a PullImage from a GET of its pod sent when it asks: those reads are part of what it
    // costs here.
    //   (i) with the pull secret: ImageStatus is answered "present" from the secrets of every pod on the node naming
    //       the image (the round's, all with the secret: pod-secrets); the kubelet then pulls nothing, so no PullImage
    //       is sent;
    //   (ii) without a pull secret, the kubelet's credential coming from the node's own keyring: ImageStatus is
    //       answered "absent" (must-pull), and PullImage with the recorded credential is answered from the records
    //       once a GET of its pod shows the pod pulls the image IfNotPresent.
    const admin = loadKubeClient(cluster.kubeconfig);
    // The reads the proxy sends, sent by the bench as the proxy sends them, with the node's identity: what the API
    // alone costs per call.
    const asNode = loadKubeClient(cluster.nodeKubeconfig(NODE_NAME));
    const listAlone: number[] = [];
    const getAlone: number[] = [];
    interface PodName {
      name: string;
    }
    const readAlone = async (path: string, query: Record<string, string>, into: number[]) => {
      const t = performance.now();
      if ((await asNode.read(path, { query, signal: AbortSignal.timeout(10_000) })) === undefined) throw new Error(`GET ${path}: not found`);
      into.push(performance.now() - t);
    };
    interface NewPod extends PodName {
      status: Buffer;
      pull: Buffer;
    }
    const createPods = async (batch: string, n: number, withSecret: boolean): Promise<NewPod[]> => {
      const pods: NewPod[] = [];
      let next = 0;
      const createOne = async () => {
        for (let i = next++; i < n; i = next++) {
          const name = `bench-new-${batch}-${String(i).padStart(5, "0")}`;
          const body = JSON.parse(
            podManifest({
              namespace: NAMESPACE,
              name,
              nodeName: NODE_NAME,
              image,
              imagePullPolicy: "IfNotPresent",
              annotations: { [APP_ANNOTATION]: name },
              ...(withSecret ? { imagePullSecrets: [PULL_SECRET] } : {}),
            }),
          ) as { metadata: { labels?: Record<string, string> } };
          body.metadata.labels = { [BATCH_LABEL]: batch };
          const created = (await admin.request("POST", `/api/v1/namespaces/${NAMESPACE}/pods`, { body })) as { metadata?: { uid?: string } };
          const uid = created.metadata?.uid;
          if (!uid) throw new Error(`the apiserver gave pod ${name} no UID`);
          pods[i] = { name, status: encodeImageStatusRequestFor(image, podAnnotations(name)), pull: pullRequest(image, name, good, uid) };
        }
      };
      await Promise.all(Array.from({ length: CREATE_CONCURRENCY }, createOne));
      return pods;
    };
    const deletePods = async (batch: string) => {
      await admin.request("DELETE", `/api/v1/namespaces/${NAMESPACE}/pods`, { query: { labelSelector: `${BATCH_LABEL}=${batch}`, gracePeriodSeconds: 0 } });
    };
    const newPods = async (withSecret: boolean) => {
      const kind = withSecret ? "secret" : "node";
      const series = { status: perRound(opts.rounds), pull: perRound(opts.rounds), total: perRound(opts.rounds) };
      const run = async (side: Side, pods: readonly NewPod[], r: number | undefined) => {
        for (const pod of pods) {
          const s: number[] = [];
          const p: number[] = [];
          await sequential(to(side), "ImageStatus", pod.status, 1, side === "proxy" && !withSecret ? absent : present(imageRef), failures, s);
          if (!withSecret) await sequential(to(side), "PullImage", pod.pull, 1, pulled(imageRef), failures, p);
          if (side === "proxy" && withSecret) expected.podSecrets++;
          if (side === "proxy" && !withSecret) {
            expected.mustPull++;
            expected.fromRecords++;
          }
          if (r === undefined || s.length !== 1) continue;
          series.status[side][r]!.push(s[0]!);
          if (p.length === 1) {
            series.pull[side][r]!.push(p[0]!);
            series.total[side][r]!.push(s[0]! + p[0]!);
          }
        }
      };
      const before = await podReads(cluster!);
      const warmPods = await createPods(`${kind}-warm`, warm(opts.newPods), withSecret);
      for (const side of statusSides) await run(side, warmPods, undefined);
      await deletePods(`${kind}-warm`);
      for (let r = 0; r < opts.rounds; r++) {
        const pods = await createPods(`${kind}-r${r}`, perSide(opts.newPods), withSecret);
        for (const side of r % 2 === 0 ? statusSides : [...statusSides].reverse()) await run(side, pods, r);
        for (const pod of pods) {
          if (withSecret) await readAlone("/api/v1/pods", { fieldSelector: `spec.nodeName=${NODE_NAME}` }, listAlone);
          else await readAlone(`/api/v1/namespaces/${NAMESPACE}/pods/${pod.name}`, {}, getAlone);
        }
        await deletePods(`${kind}-r${r}`);
      }
      // Calls being one at a time: one list of the node's pods per ImageStatus, one GET of its pod per (ii) PullImage
      // and no list; and the bench's own reads alone, (i) lists, (ii) GETs.
      const proxyPods = warm(opts.newPods) + opts.newPods;
      const after = await podReads(cluster!);
      const lists = after.lists - before.lists;
      const gets = after.gets - before.gets;
      const benchLists = withSecret ? opts.newPods : 0;
      const benchGets = withSecret ? 0 : opts.newPods;
      if (lists !== proxyPods + benchLists) failures.add(`new pods (${kind}): the apiserver counted ${lists} lists of pods, not ${proxyPods + benchLists}`);
      const wantGets = (withSecret ? 0 : proxyPods) + benchGets;
      if (gets !== wantGets) failures.add(`new pods (${kind}): the apiserver counted ${gets} GETs of a pod, not ${wantGets}`);
      return { series, listsPerPod: (lists - benchLists) / proxyPods, getsPerPod: (gets - benchGets) / proxyPods };
    };
    say(`New pods with the pull secret: ImageStatus, ${opts.newPods} per side ...`);
    const withSecret = await newPods(true);
    say(`New pods with a credential from the node: ImageStatus then PullImage, ${opts.newPods} per side ...`);
    const nodeCredential = await newPods(false);
    const newPod: NewPodResult = {
      podsOnNode: perSide(opts.newPods),
      podSecrets: {
        status: compare(withSecret.series.status),
        listsPerPod: withSecret.listsPerPod,
        getsPerPod: withSecret.getsPerPod,
        listAlone: stats(listAlone),
      },
      nodeCredential: {
        status: compare(nodeCredential.series.status),
        pull: compare(nodeCredential.series.pull),
        total: compare(nodeCredential.series.total),
        listsPerPod: nodeCredential.listsPerPod,
        getsPerPod: nodeCredential.getsPerPod,
        getAlone: stats(getAlone),
      },
    };

    // The proxy's own counters must agree with what was sent.
    const counters: Array<[string, string, number]> = [
      ["pod-verified checks", 'imprimatur_node_image_checks_total{result="pod-verified"}', expected.podVerified],
      ["not-a-pod checks", 'imprimatur_node_image_checks_total{result="not-a-pod"}', expected.notAPod],
      ["pod-secrets checks", 'imprimatur_node_image_checks_total{result="pod-secrets"}', expected.podSecrets],
      ["must-pull checks", 'imprimatur_node_image_checks_total{result="must-pull"}', expected.mustPull],
      ["pulls answered from the records", 'imprimatur_node_pulls_total{result="answered-from-records"}', expected.fromRecords],
      ["pulls forwarded", 'imprimatur_node_pulls_total{result="forwarded-ok"}', expected.forwardedOk],
    ];
    const counted: Record<string, number> = {};
    for (const [what, sample, want] of counters) {
      counted[what] = await proxy.metric(sample);
      if (counted[what] !== want) failures.add(`the proxy counted ${counted[what]} ${what}, not ${want}`);
    }
    const latencyProxyRssMiB = vmRssKiB(proxy.pid) / 1024;
    const latencyProxyHeap = (await probeMemory(proxy.pid, latencyMemoryFile)).after;
    for (const c of clients) c.close();
    clients.length = 0;
    await proxy.stop();
    started.delete(proxy.pid);
    proxy = undefined;
    await forwarder?.stop();
    await cluster.stop(); // the memory part needs no API

    // 4. Memory with many records.
    let memory: MemoryResult | undefined;
    if (opts.records > 0) {
      say(`Memory: ${opts.records} records, in-process and in the proxy process (stub runtime) ...`);
      memory = await measureMemory(dir, opts.records, registry.host, started, failures);
    }

    const against = targetsAgainst(decision, plain, forwarded);
    const verdicts = {
      decisionAddedP99: against.decisionAddedP99Ms <= TARGET_ADDED_P99_MS ? "PASS" : "BELOW TARGET",
      plainAddedP99: against.plainAddedP99Ms <= TARGET_ADDED_P99_MS ? "PASS" : "BELOW TARGET",
      pullRatio: against.pullRatio <= TARGET_PULL_RATIO ? "PASS" : "BELOW TARGET",
    };
    const summary = {
      benchmark: "node-proxy",
      date: new Date().toISOString(),
      node: process.version,
      cpus: cpus().length,
      cpuModel: cpus()[0]?.model ?? "unknown",
      criPackage: PKG,
      pin: opts.pin,
      pinned: pinning.pinned,
      pinning: pinning.description,
      rounds: opts.rounds,
      imageRef,
      imageStatusPullDecision: decision,
      imageStatusPlain: plain,
      ...(concurrentResult ? { imageStatusPullDecisionConcurrent: concurrentResult } : {}),
      pullForwarded: {
        ...forwarded,
        ratioOfMedians: pullRatio,
        roundRatios: pullRoundRatios,
        ...(forwarded.forwarder ? { forwarderRatioOfMedians: forwarded.forwarder.p50Ms / forwarded.direct.p50Ms } : {}),
      },
      newPod,
      proxyRssAfterLatencyRunMiB: latencyProxyRssMiB,
      proxyHeapAfterLatencyRunMiB: { used: latencyProxyHeap.heapUsed / 2 ** 20, total: latencyProxyHeap.heapTotal / 2 ** 20 },
      ...(memory ? { memory } : {}),
      counted,
      targets: { addedP99Ms: TARGET_ADDED_P99_MS, pullRatio: TARGET_PULL_RATIO },
      against,
      verdicts,
      seconds: (performance.now() - t0) / 1000,
      ok: failures.count === 0,
      failures: failures.list,
      failureCount: failures.count,
    };
    if (opts.json) process.stdout.write(`${JSON.stringify(summary, null, 2)}\n`);
    else process.stdout.write(renderReport(summary, memory));
    return failures.count === 0 ? 0 : 1;
  } catch (e) {
    process.stderr.write(`node-proxy: FAILED: ${(e as Error).stack ?? String(e)}\n`);
    return 1;
  } finally {
    unguard();
    for (const c of clients) c.close();
    await proxy?.stop();
    await forwarder?.stop();
    await node?.stop();
    await registry?.stop();
    await cluster?.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

// ---------------------------------------------------------------------------------------------------------
// The report

interface Summary {
  date: string;
  node: string;
  cpus: number;
  cpuModel: string;
  criPackage: string;
  pinning: string;
  rounds: number;
  imageStatusPullDecision: Comparison;
  imageStatusPlain: Comparison;
  imageStatusPullDecisionConcurrent?: Comparison & { concurrency: number; callsPerSecond: Partial<Record<Side, number>> };
  pullForwarded: Comparison & {
    ratioOfMedians: number;
    roundRatios: { min: number; median: number; max: number };
    /** The bare forwarder's median over the direct one: the floor of any Node gRPC hop. */
    forwarderRatioOfMedians?: number;
  };
  newPod: NewPodResult;
  proxyRssAfterLatencyRunMiB: number;
  proxyHeapAfterLatencyRunMiB: { used: number; total: number };
  against: TargetBasis;
  verdicts: { decisionAddedP99: string; plainAddedP99: string; pullRatio: string };
  seconds: number;
  failures: string[];
  failureCount: number;
}

/** What the targets are measured against: the bare forwarder when measured, else containerd; and the results. */
interface TargetBasis {
  baseline: "forwarder" | "direct";
  decisionAddedP99Ms: number;
  plainAddedP99Ms: number;
  pullRatio: number;
}

function targetsAgainst(decision: Comparison, plain: Comparison, pulls: Comparison): TargetBasis {
  if (!decision.forwarder || !plain.forwarder || !pulls.forwarder) {
    return {
      baseline: "direct",
      decisionAddedP99Ms: decision.addedP99Ms,
      plainAddedP99Ms: plain.addedP99Ms,
      pullRatio: pulls.proxy.p50Ms / pulls.direct.p50Ms,
    };
  }
  return {
    baseline: "forwarder",
    decisionAddedP99Ms: decision.proxy.p99Ms - decision.forwarder.p99Ms,
    plainAddedP99Ms: plain.proxy.p99Ms - plain.forwarder.p99Ms,
    pullRatio: pulls.proxy.p50Ms / pulls.forwarder.p50Ms,
  };
}

const ms = (n: number) => n.toFixed(3);
const signed = (n: number) => `${n >= 0 ? "+" : ""}${n.toFixed(3)}`;
const mib = (n: number) => n.toFixed(1);

function rowsOf(name: string, c: Comparison): string[][] {
  const row = (label: string, side: string, s: Stats) => [label, side, String(s.calls), ms(s.p50Ms), ms(s.p90Ms), ms(s.p99Ms), ms(s.maxMs)];
  return [
    row(name, "proxy", c.proxy),
    ...(c.forwarder ? [row("", "forwarder", c.forwarder)] : []),
    row("", "direct", c.direct),
    [
      "",
      "added",
      "",
      signed(c.addedP50Ms),
      signed(c.proxy.p90Ms - c.direct.p90Ms),
      signed(c.addedP99Ms),
      `p50 per round ${signed(c.roundAddedP50Ms.min)}..${signed(c.roundAddedP50Ms.max)}`,
    ],
    ...(c.forwarder
      ? [["", "fwd added", "", signed(c.forwarder.addedP50Ms), signed(c.forwarder.p90Ms - c.direct.p90Ms), signed(c.forwarder.addedP99Ms), ""]]
      : []),
  ];
}

function renderReport(s: Summary, memory: MemoryResult | undefined): string {
  const conc = s.imageStatusPullDecisionConcurrent;
  const nr = s.newPod.nodeCredential;
  const ns = s.newPod.podSecrets;
  const lines = [
    "",
    `node-proxy  ${s.date}  node ${s.node}  ${s.cpus} CPUs (${s.cpuModel})  CRI ${s.criPackage}  ${s.rounds} alternating rounds`,
    `pinning: ${s.pinning}`,
    "",
    renderTable([
      ["call (one in flight unless said)", "side", "calls", "p50 ms", "p90 ms", "p99 ms", "max ms"],
      ...rowsOf("ImageStatus, pull decision (present)", s.imageStatusPullDecision),
      ...rowsOf("ImageStatus, no annotations", s.imageStatusPlain),
      ...(conc ? rowsOf(`ImageStatus, pull decision, ${conc.concurrency} in flight`, conc) : []),
      ...rowsOf("PullImage, forwarded", s.pullForwarded),
      ...rowsOf("new pod, pull secret: ImageStatus (proxy: present)", ns.status),
      ...rowsOf("new pod, node credential: ImageStatus (proxy: absent)", nr.status),
      ...rowsOf("new pod, node credential: PullImage (proxy: records)", nr.pull),
      ...rowsOf("new pod, node credential: both calls", nr.total),
    ]),
    "",
  ];
  if (conc) {
    const rates = Object.entries(conc.callsPerSecond).map(([side, rate]) => `${side} ${Math.round(rate)}`);
    lines.push(`${conc.concurrency} in flight, calls/s: ${rates.join(", ")}`);
  }
  const pr = s.pullForwarded;
  lines.push(
    `new pods: ${s.newPod.podsOnNode} on the node per round; per pod, the proxy listed the node's pods ${ns.listsPerPod.toFixed(2)} times and read a pod ${ns.getsPerPod.toFixed(2)} times with the pull secret, ${nr.listsPerPod.toFixed(2)} and ${nr.getsPerPod.toFixed(2)} with a node credential`,
    `the proxy's reads alone (the bench, with the node's identity, after each round's calls): a list of the node's pods ${ms(ns.listAlone.p50Ms)} ms p50, ${ms(ns.listAlone.p99Ms)} ms p99 (${ns.listAlone.calls}); a GET of one pod ${ms(nr.getAlone.p50Ms)} ms p50, ${ms(nr.getAlone.p99Ms)} ms p99 (${nr.getAlone.calls})`,
    `PullImage answered from the records: ${ms(nr.pull.proxy.p50Ms)} ms p50 against ${ms(pr.direct.p50Ms)} ms for a PullImage straight to containerd (${(nr.pull.proxy.p50Ms / pr.direct.p50Ms).toFixed(2)}x)`,
    `proxy after the latency run: RSS ${mib(s.proxyRssAfterLatencyRunMiB)} MiB; after a full GC, heap used ${mib(s.proxyHeapAfterLatencyRunMiB.used)} MiB of ${mib(s.proxyHeapAfterLatencyRunMiB.total)} MiB`,
    "",
  );
  if (memory) {
    const row = (label: string, m: ProcessMemory) => [
      label,
      String(m.records),
      mib(m.rssMiB),
      mib(m.rssAfterGcMiB),
      mib(m.heapUsedMiB),
      mib(m.heapTotalMiB),
      m.startupMs.toFixed(0),
    ];
    lines.push(
      renderTable([
        ["proxy process (stub runtime)", "records", "RSS MiB", "RSS after GC", "heap used MiB", "heap total", "start-up ms"],
        ...memory.process.empty.map((m, i) => row(`empty state folder, run ${i + 1}`, m)),
        ...memory.process.full.map((m, i) => row(`${memory.records} records, run ${i + 1}`, m)),
      ]),
      `in-process RecordStore with ${memory.records} records: heap +${mib(memory.inProcess.heapMiB)} MiB (${Math.round(memory.inProcess.heapBytesPerRecord)} bytes per record), open ${memory.inProcess.openMs.toFixed(0)} ms (empty folder ${memory.inProcess.openEmptyMs.toFixed(1)} ms); median of ${memory.inProcess.rounds}`,
      "",
    );
  }
  lines.push(
    renderTable([
      ["target", "result", "verdict"],
      [
        `ImageStatus, pull decision: p99 added to the ${s.against.baseline} <= ${TARGET_ADDED_P99_MS} ms`,
        `${signed(s.against.decisionAddedP99Ms)} ms`,
        s.verdicts.decisionAddedP99,
      ],
      [
        `ImageStatus, no annotations: p99 added to the ${s.against.baseline} <= ${TARGET_ADDED_P99_MS} ms`,
        `${signed(s.against.plainAddedP99Ms)} ms`,
        s.verdicts.plainAddedP99,
      ],
      [
        `PullImage forwarded: proxy/${s.against.baseline} median <= ${TARGET_PULL_RATIO}x`,
        `${s.against.pullRatio.toFixed(3)}x; proxy/direct ${pr.ratioOfMedians.toFixed(3)}x (per round ${pr.roundRatios.min.toFixed(2)}..${pr.roundRatios.max.toFixed(2)})` +
          (pr.forwarderRatioOfMedians === undefined ? "" : `, bare forwarder/direct ${pr.forwarderRatioOfMedians.toFixed(3)}x`),
        s.verdicts.pullRatio,
      ],
    ]),
    "",
    s.failureCount > 0
      ? `FAILED (${s.failureCount}): ${s.failures.slice(0, 3).join("; ")}`
      : `every call answered as expected; the proxy's counters agree (${s.seconds.toFixed(0)} s)`,
    "",
  );
  return lines.join("\n");
}

process.exitCode = await main();
