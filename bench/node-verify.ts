// What verification at pull time (`imprimatur node-proxy --policies`, issue 37) costs the kubelet's image calls,
// against the floor of any Node gRPC hop: the bare forwarder (bench/support/grpc-forwarder.ts), in the same run,
// with the same client code and request bytes. A real docker-registry (TLS, htpasswd) holds key-signed images
// (the project's test signer, logged in a mock Rekor), a real containerd 1.6 pulls them, and the real proxy runs as
// a child process with a policy that verifies every image. See bench/node-verify.md.
//
//   node bench/node-verify.ts [--pulls N] [--cold N] [--status-calls N] [--rounds N] [--pin on|off] [--json]
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { parseArgs } from "node:util";
import { decodeImageStatusResponse, decodePullImageResponse, encodeImageStatusRequestFor, encodePullImageRequest } from "../src/cri/cri-messages.ts";
import { RuntimeImageClient } from "../src/cri/image-service-proxy.ts";
import { startNodeProxy, type NodeProxyProcess } from "../test/support/node-proxy-process.ts";
import { startNodeRuntime, type NodeRuntime } from "../test/support/real-node.ts";
import { startRegistry, type TestRegistry } from "../test/support/registry.ts";
import { buildRunnableImage } from "../test/support/runnable-image.ts";
import { generateSigningKey } from "../test/support/signer/keys.ts";
import { createMockSigstore } from "../test/support/signer/mock-sigstore.ts";
import { pushCosignSignatures } from "../test/support/signer/registry-signatures.ts";
import { writeSignedOnlyFolder } from "../test/support/node-signing-policies.ts";
import { startForwarder, type Forwarder } from "./support/forwarder-process.ts";
import { multiplesOfRounds, numberOption } from "./support/options.ts";
import { findTaskset, pin } from "./support/pinning.ts";
import { percentile, renderTable } from "./support/report.ts";
import { guardRun } from "./support/run-guard.ts";

const USAGE = `Usage: node bench/node-verify.ts [options]

  --pulls N          PullImage calls of an image already on the node, per side (default 40)
  --cold N           PullImage calls of images never pulled, per side (default 6)
  --status-calls N   ImageStatus calls of a pod's pull decision, per side (default 1000)
  --rounds N         how many times the measurement switches sides (default 4; the counts must be multiples of it)
  --pin on|off       servers on CPU 0, the load generator on CPU 1 (default on)
  --json             print only the JSON report
`;

const SERVER_CPU = 0;
const GENERATOR_CPU = 1;
const BUDGET_MS = 10 * 60_000;
const NAMESPACE = "bench";

interface Options {
  pulls: number;
  cold: number;
  statusCalls: number;
  rounds: number;
  pin: "on" | "off";
  json: boolean;
}

function parseOptions(argv: string[]): Options {
  const { values } = parseArgs({
    args: argv,
    options: {
      pulls: { type: "string", default: "40" },
      cold: { type: "string", default: "6" },
      "status-calls": { type: "string", default: "1000" },
      rounds: { type: "string", default: "4" },
      pin: { type: "string", default: "on" },
      json: { type: "boolean", default: false },
      help: { type: "boolean", short: "h", default: false },
    },
    strict: true,
  });
  if (values.help) {
    process.stdout.write(USAGE);
    process.exit(0);
  }
  if (values.pin !== "on" && values.pin !== "off") throw new Error(`--pin must be on or off, got ${values.pin}`);
  const opts: Options = {
    pulls: numberOption("pulls", values.pulls, 4, 2_000),
    cold: numberOption("cold", values.cold, 2, 100),
    statusCalls: numberOption("status-calls", values["status-calls"], 100, 100_000),
    rounds: numberOption("rounds", values.rounds, 2, 50),
    pin: values.pin,
    json: values.json,
  };
  multiplesOfRounds(opts.rounds, [
    ["pulls", opts.pulls],
    ["cold", opts.cold],
    ["status-calls", opts.statusCalls],
  ]);
  return opts;
}

type Side = "verifying" | "forwarder";
const SIDES: readonly Side[] = ["verifying", "forwarder"];

interface Stats {
  calls: number;
  p50Ms: number;
  p99Ms: number;
  meanMs: number;
}

function stats(ms: readonly number[]): Stats {
  const sorted = Float64Array.from(ms).sort();
  return { calls: sorted.length, p50Ms: percentile(sorted, 50), p99Ms: percentile(sorted, 99), meanMs: ms.reduce((a, b) => a + b, 0) / Math.max(1, ms.length) };
}

/** A pod's annotations as the kubelet sends them: config.seen makes each pod's calls its own. */
const annotations = (pod: string) => ({ "kubernetes.io/config.source": "api", "kubernetes.io/config.seen": `2026-11-30T10:00:00.${pod}Z`, app: pod });

function pullRequest(image: string, pod: string, auth: { username: string; password: string }): Buffer {
  const a = annotations(pod);
  return encodePullImageRequest({ image, annotations: a, auth, sandbox: { name: pod, namespace: NAMESPACE, uid: `uid-${pod}`, annotations: a } });
}

/** Alternating rounds: one side first, then the other first, and so on. */
async function alternate(rounds: number, measure: (side: Side, round: number) => Promise<void>): Promise<void> {
  for (let r = 0; r < rounds; r++) for (const side of r % 2 === 0 ? SIDES : [...SIDES].reverse()) await measure(side, r);
}

async function main(opts: Options): Promise<number> {
  const dir = await mkdtemp(join(tmpdir(), "imprimatur-bench-node-verify-"));
  let registry: TestRegistry | undefined;
  let node: NodeRuntime | undefined;
  let proxy: NodeProxyProcess | undefined;
  let forwarder: Forwarder | undefined;
  const clients: RuntimeImageClient[] = [];
  const layouts: string[] = [];
  const unguard = guardRun("node-verify", BUDGET_MS, (signal) => {
    for (const pid of [proxy?.pid, forwarder?.pid]) if (pid) process.kill(pid, signal);
  });
  const failures: string[] = [];
  try {
    const sigstore = await createMockSigstore({ name: "bench-node-verify" });
    const key = generateSigningKey("ecdsa-p256");
    registry = await startRegistry({ auth: "htpasswd" });
    const auth = { username: registry.username, password: registry.password };
    const push = async (repository: string, seed: string) => {
      const built = buildRunnableImage({ tag: "v1", seed });
      layouts.push(built.layoutDir);
      await registry!.push(built.layoutDir, "v1", repository, "v1");
      await pushCosignSignatures({ registry: registry!, repository, digest: built.digest, signers: [{ key, rekor: sigstore, hash: "sha256" }] });
      return `${registry!.host}/${repository}:v1`;
    };
    const cached = await push("bench/app", "bench-node-verify-app");
    const cold: Record<Side, string[]> = { verifying: [], forwarder: [] };
    for (const side of SIDES) for (let i = 0; i < opts.cold; i++) cold[side].push(await push(`bench/cold-${side}-${i}`, `bench-node-verify-${side}-${i}`));
    const policies = await writeSignedOnlyFolder(join(dir, "policies"), { sigstore, key, images: [`${registry.host}/*`] });
    const registriesFile = join(dir, "registries.yaml");
    await writeFile(registriesFile, registry.registryConfig());
    node = await startNodeRuntime({ registries: [{ host: registry.host, caFile: registry.caFile }] });
    proxy = await startNodeProxy({
      dir: await mkdtemp(join(dir, "proxy-")),
      stateDir: join(dir, "state"),
      runtimeEndpoint: node.containerdEndpoint,
      args: ["--policies", policies, "--registries", registriesFile],
    });
    forwarder = await startForwarder(join(dir, "forwarder.sock"), node.containerdEndpoint);
    const pinned = pinServers(opts, [
      { name: "proxy", pid: proxy.pid },
      { name: "forwarder", pid: forwarder.pid },
      { name: "registry", pid: registry.pid },
    ]);
    const client: Record<Side, RuntimeImageClient> = {
      verifying: new RuntimeImageClient(proxy.endpoint),
      forwarder: new RuntimeImageClient(forwarder.endpoint),
    };
    clients.push(client.verifying, client.forwarder);
    const pull = async (side: Side, image: string, pod: string): Promise<{ ms: number; imageRef: string }> => {
      const t0 = performance.now();
      const response = await client[side].call("runtime.v1", "PullImage", pullRequest(image, pod, auth), { deadline: Date.now() + 120_000 });
      return { ms: performance.now() - t0, imageRef: decodePullImageResponse(response).imageRef };
    };

    // Cold: images on neither the node nor in any cache; the verifying side also verifies each signature afresh.
    const coldMs: Record<Side, number[]> = { verifying: [], forwarder: [] };
    await alternate(opts.rounds, async (side, r) => {
      const per = opts.cold / opts.rounds;
      for (let i = r * per; i < (r + 1) * per; i++) coldMs[side].push((await pull(side, cold[side][i]!, `cold-${side}-${i}`)).ms);
    });
    // Cached: the image is on the node and its verification cached; every pull is a new pod's, so each is judged.
    const warm = { verifying: await pull("verifying", cached, "warm-v"), forwarder: await pull("forwarder", cached, "warm-f") };
    if (warm.verifying.imageRef !== warm.forwarder.imageRef) failures.push(`the two sides pulled different images: ${JSON.stringify(warm)}`);
    const cachedMs: Record<Side, number[]> = { verifying: [], forwarder: [] };
    let pod = 0;
    await alternate(opts.rounds, async (side) => {
      for (let i = 0; i < opts.pulls / opts.rounds; i++) {
        const { ms, imageRef } = await pull(side, cached, `cached-${pod++}`);
        if (imageRef !== warm.forwarder.imageRef) failures.push(`${side} pull answered ${imageRef}`);
        cachedMs[side].push(ms);
      }
    });
    // ImageStatus of a pod's pull decision for an image it had verified (the verifying side checks its records).
    await pull("verifying", cached, "status-pod");
    const statusRequest = encodeImageStatusRequestFor(cached, annotations("status-pod"));
    const statusMs: Record<Side, number[]> = { verifying: [], forwarder: [] };
    await alternate(opts.rounds, async (side) => {
      for (let i = 0; i < opts.statusCalls / opts.rounds; i++) {
        const t0 = performance.now();
        const response = await client[side].call("runtime.v1", "ImageStatus", statusRequest, { deadline: Date.now() + 10_000 });
        statusMs[side].push(performance.now() - t0);
        if (decodeImageStatusResponse(response)?.id !== warm.forwarder.imageRef) failures.push(`${side} ImageStatus did not show the image`);
      }
    });
    const verified = await proxy.metric('imprimatur_node_pull_verifications_total{outcome="verified"}');
    const expected = opts.cold + 1 + opts.pulls + 1; // cold, the warm-up, the cached pulls, the status pod's pull
    if (verified !== expected) failures.push(`the proxy verified ${verified} pulls, expected ${expected}`);

    const summary = {
      date: new Date().toISOString(),
      loadAverage: loadavg()[0],
      pinned,
      cold: { verifying: stats(coldMs.verifying), forwarder: stats(coldMs.forwarder), p50Ratio: ratio(coldMs, 50) },
      cached: { verifying: stats(cachedMs.verifying), forwarder: stats(cachedMs.forwarder), p50Ratio: ratio(cachedMs, 50), p99Ratio: ratio(cachedMs, 99) },
      imageStatus: {
        verifying: stats(statusMs.verifying),
        forwarder: stats(statusMs.forwarder),
        addedP50Ms: added(statusMs, 50),
        addedP99Ms: added(statusMs, 99),
      },
      failures,
    };
    if (opts.json) process.stdout.write(`${JSON.stringify(summary, null, 2)}\n`);
    else process.stdout.write(render(summary));
    return failures.length === 0 ? 0 : 1;
  } finally {
    unguard();
    for (const c of clients) c.close();
    await proxy?.stop();
    await forwarder?.stop();
    await node?.stop();
    await registry?.stop();
    for (const l of layouts) await rm(l, { recursive: true, force: true });
    await rm(dir, { recursive: true, force: true });
  }
}

function percentileOf(ms: readonly number[], p: number): number {
  return percentile(Float64Array.from(ms).sort(), p);
}

function ratio(series: Record<Side, number[]>, p: number): number {
  return percentileOf(series.verifying, p) / percentileOf(series.forwarder, p);
}

function added(series: Record<Side, number[]>, p: number): number {
  return percentileOf(series.verifying, p) - percentileOf(series.forwarder, p);
}

/** The servers on SERVER_CPU, this process (the load generator) on GENERATOR_CPU; both sides end in the same containerd. */
function pinServers(opts: Options, servers: Array<{ name: string; pid: number }>): string {
  if (opts.pin === "off") return "off (--pin off)";
  if (cpus().length < 2) return `not pinned: ${cpus().length} CPU`;
  const taskset = findTaskset();
  if (!taskset) return "not pinned: taskset is not installed";
  return [...servers.map((s) => pin(taskset, s.pid, SERVER_CPU, s.name)), pin(taskset, process.pid, GENERATOR_CPU, "load generator")].join(", ");
}

function render(s: {
  date: string;
  pinned: string;
  cold: { verifying: Stats; forwarder: Stats; p50Ratio: number };
  cached: { verifying: Stats; forwarder: Stats; p50Ratio: number; p99Ratio: number };
  imageStatus: { verifying: Stats; forwarder: Stats; addedP50Ms: number; addedP99Ms: number };
  failures: string[];
}): string {
  const ms = (x: number) => x.toFixed(2);
  const rows = [
    ["call", "side", "calls", "p50 ms", "p99 ms", "verifying / forwarder"],
    [
      "PullImage, cold",
      "verifying",
      String(s.cold.verifying.calls),
      ms(s.cold.verifying.p50Ms),
      ms(s.cold.verifying.p99Ms),
      `${s.cold.p50Ratio.toFixed(2)}× p50`,
    ],
    ["", "forwarder", String(s.cold.forwarder.calls), ms(s.cold.forwarder.p50Ms), ms(s.cold.forwarder.p99Ms), ""],
    [
      "PullImage, cached",
      "verifying",
      String(s.cached.verifying.calls),
      ms(s.cached.verifying.p50Ms),
      ms(s.cached.verifying.p99Ms),
      `${s.cached.p50Ratio.toFixed(2)}× p50, ${s.cached.p99Ratio.toFixed(2)}× p99`,
    ],
    ["", "forwarder", String(s.cached.forwarder.calls), ms(s.cached.forwarder.p50Ms), ms(s.cached.forwarder.p99Ms), ""],
    [
      "ImageStatus",
      "verifying",
      String(s.imageStatus.verifying.calls),
      ms(s.imageStatus.verifying.p50Ms),
      ms(s.imageStatus.verifying.p99Ms),
      `+${ms(s.imageStatus.addedP50Ms)} ms p50, +${ms(s.imageStatus.addedP99Ms)} ms p99`,
    ],
    ["", "forwarder", String(s.imageStatus.forwarder.calls), ms(s.imageStatus.forwarder.p50Ms), ms(s.imageStatus.forwarder.p99Ms), ""],
  ];
  return `node-verify ${s.date}, pinning: ${s.pinned}\n${renderTable(rows)}\n${s.failures.length === 0 ? "every answer as expected" : `WRONG ANSWERS:\n${s.failures.slice(0, 20).join("\n")}`}\n`;
}

let options: Options;
try {
  options = parseOptions(process.argv.slice(2));
} catch (e) {
  process.stderr.write(`node-verify: ${(e as Error).message}\n${USAGE}`);
  process.exit(2);
}
main(options).then(
  (code) => process.exit(code),
  (e: unknown) => {
    process.stderr.write(`node-verify: ${(e as Error).stack ?? String(e)}\n`);
    process.exit(1);
  },
);
