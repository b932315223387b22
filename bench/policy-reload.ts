// Policy reload from custom resources: how long after `kubectl apply` a set of ImagePolicies and PodRestrictions
// is in force at `imprimatur serve --policy-crds`, and what the server holds in memory for it.
//
// One etcd + kube-apiserver v1.20 (test/support/kube-cluster.ts) with the CRDs of deploy/crds, and one
// `imprimatur serve --policy-crds --kubeconfig …` child process with the memory probe loaded. For each size N:
//
//   apply      N ImagePolicies and N PodRestrictions (each bound to a namespace of its own) and, last, one marker of
//              each kind bound to the probe namespace, in one `kubectl apply -f -`; timed from the start of kubectl
//              until /validate denies a probe pod for both markers' reasons (so every object before them is in)
//   one edit   the marker ImagePolicy changed with `kubectl apply`, among the N others: time to its new effect
//   memory     the server's heap after a full GC and its RSS, with the N + N policies loaded
//   delete     `kubectl delete` of all of them: time until the markers' effect is gone
//
// The probe calls serve's /validate directly (every 20 ms), so the apiserver's webhook call is not in the figure;
// the apiserver is on the path of the objects only (kubectl → apiserver → watch → serve).
//
//   node bench/policy-reload.ts [--sizes 1,100,1000] [--json] [--keep-state]
//
// Exit 0 when every step took effect, 1 when one did not (or the run overran its budget), 2 on a usage error.
import { readFile, rm } from "node:fs/promises";
import { join } from "node:path";
import { pathToFileURL, fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { Agent } from "undici";
import { startKubeCluster, type KubeCluster } from "../test/support/kube-cluster.ts";
import { podReview } from "../test/support/admission.ts";
import { renderTable } from "./support/report.ts";
import { guardRun } from "./support/run-guard.ts";
import { createServeState } from "./support/serve-state.ts";
import { imprimaturServeArgs, signalServers, startServer, stopServer, type ServerProcess } from "./support/server-process.ts";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const MEMORY_PROBE = fileURLToPath(new URL("./support/memory-probe.ts", import.meta.url));
const PROBE_NAMESPACE = "bench-probe";
const MARKER_IMAGE_POLICY = "zz-marker-images";
const MARKER_POD_RESTRICTION = "zz-marker-pods";
const POLL_MS = 20;
const EFFECT_TIMEOUT_MS = 600_000;

const USAGE = `Usage: node bench/policy-reload.ts [options]

  --sizes LIST     comma-separated numbers of ImagePolicies (and as many PodRestrictions) (default 1,100,1000)
  --json           print only the JSON report
  --keep-state     keep the temporary state folder (serve's log, CA)
  -h, --help       show this help
`;

interface SizeResult {
  size: number;
  objects: number;
  kubectlApplyMs: number;
  applyToEffectMs: number;
  oneEditToEffectMs: number;
  deleteToEffectMs: number;
  heapUsedMiB: number;
  rssMiB: number;
  reloads: number;
}

function policyList(size: number, markerImage: string): string {
  const items: unknown[] = [];
  for (let i = 0; i < size; i++) {
    items.push({
      apiVersion: "imprimatur.dev/v1alpha1",
      kind: "ImagePolicy",
      metadata: { name: `images-${i}` },
      spec: {
        namespaces: [`team-${i}`],
        rules: [
          { action: "allow", images: [`registry.example.com/team-${i}/*`] },
          { action: "deny", images: ["*:latest"], message: "pin a version" },
        ],
        default: "deny",
      },
    });
    items.push({
      apiVersion: "imprimatur.dev/v1alpha1",
      kind: "PodRestriction",
      metadata: { name: `pods-${i}` },
      binding: { namespaces: [`team-${i}`] },
      spec: {
        spec: { securityContext: { hostNetwork: { require: false } }, containers: [{ securityContext: { privileged: { allowNil: true, require: false } } }] },
      },
    });
  }
  items.push(markerImagePolicy(markerImage), {
    apiVersion: "imprimatur.dev/v1alpha1",
    kind: "PodRestriction",
    metadata: { name: MARKER_POD_RESTRICTION },
    binding: { namespaces: [PROBE_NAMESPACE] },
    spec: { spec: { securityContext: { hostNetwork: { require: false } } } },
  });
  return JSON.stringify({ apiVersion: "v1", kind: "List", items });
}

function markerImagePolicy(image: string) {
  return {
    apiVersion: "imprimatur.dev/v1alpha1",
    kind: "ImagePolicy",
    metadata: { name: MARKER_IMAGE_POLICY },
    spec: { namespaces: [PROBE_NAMESPACE], rules: [{ action: "deny", images: [image] }], default: "allow" },
  };
}

/** What /validate says to a host-network pod running `image` in the probe namespace. */
async function probe(agent: Agent, server: ServerProcess, image: string): Promise<{ imageDenied: boolean; podDenied: boolean }> {
  const review = podReview({ images: [image], namespace: PROBE_NAMESPACE });
  (review.request.object.spec as Record<string, unknown>).hostNetwork = true;
  const res = await agent.request({
    origin: server.origin,
    path: "/validate",
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(review),
  });
  const body = (await res.body.json()) as { response?: { allowed?: boolean; status?: { message?: string } } };
  const message = body.response?.status?.message ?? "";
  return { imageDenied: message.includes(MARKER_IMAGE_POLICY), podDenied: message.includes(MARKER_POD_RESTRICTION) };
}

async function until(what: string, check: () => Promise<boolean>): Promise<number> {
  const start = performance.now();
  for (;;) {
    if (await check()) return performance.now() - start;
    if (performance.now() - start > EFFECT_TIMEOUT_MS) throw new Error(`${what}: no effect within ${EFFECT_TIMEOUT_MS / 1000} s`);
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
}

async function kubectlOk(cluster: KubeCluster, args: string[], input?: string, timeoutMs = 900_000): Promise<number> {
  const start = performance.now();
  const res = await cluster.kubectl(args, { ...(input !== undefined ? { input } : {}), timeoutMs });
  if (res.code !== 0) throw new Error(`kubectl ${args.join(" ")}: ${res.stderr.trim()}`);
  return performance.now() - start;
}

async function probeMemory(pid: number, file: string): Promise<NodeJS.MemoryUsage> {
  await rm(file, { force: true });
  process.kill(pid, "SIGUSR2");
  for (const deadline = Date.now() + 10_000; Date.now() < deadline; await new Promise((r) => setTimeout(r, 20))) {
    const text = await readFile(file, "utf8").catch(() => "");
    if (text !== "") return (JSON.parse(text) as { after: NodeJS.MemoryUsage }).after;
  }
  throw new Error(`the memory probe of process ${pid} did not answer`);
}

async function rssMiB(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, "utf8");
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? NaN) / 1024;
}

async function reloadCount(logFile: string): Promise<number> {
  const text = await readFile(logFile, "utf8").catch(() => "");
  return text.split("\n").filter((l) => l.includes('"msg":"policies reloaded"')).length;
}

async function measure(cluster: KubeCluster, server: ServerProcess, agent: Agent, size: number, logFile: string, memoryFile: string): Promise<SizeResult> {
  const reloadsBefore = await reloadCount(logFile);
  const applyStart = performance.now();
  let kubectlApplyMs = 0;
  const applied = kubectlOk(cluster, ["apply", "-f", "-"], policyList(size, "registry.example.com/marker-a")).then((ms) => (kubectlApplyMs = ms));
  await until(`apply ${size}`, async () => {
    const p = await probe(agent, server, "registry.example.com/marker-a:1");
    return p.imageDenied && p.podDenied;
  });
  const applyToEffectMs = performance.now() - applyStart;
  await applied;
  // Let the reloads the watch may still deliver finish before the memory figure.
  await new Promise((r) => setTimeout(r, 1_000));
  const heap = await probeMemory(server.child.pid!, memoryFile);
  const rss = await rssMiB(server.child.pid!);
  const reloads = (await reloadCount(logFile)) - reloadsBefore;

  const editStart = performance.now();
  await kubectlOk(cluster, ["apply", "-f", "-"], JSON.stringify(markerImagePolicy("registry.example.com/marker-b")));
  await until(`one edit among ${size}`, async () => {
    const [a, b] = [await probe(agent, server, "registry.example.com/marker-a:1"), await probe(agent, server, "registry.example.com/marker-b:1")];
    return !a.imageDenied && b.imageDenied;
  });
  const oneEditToEffectMs = performance.now() - editStart;

  const deleteStart = performance.now();
  const deleted = kubectlOk(cluster, ["delete", "imagepolicies,podrestrictions", "--all", "--wait=false"]);
  await until(`delete ${size}`, async () => {
    const p = await probe(agent, server, "registry.example.com/marker-b:1");
    return !p.imageDenied && !p.podDenied;
  });
  const deleteToEffectMs = performance.now() - deleteStart;
  await deleted;
  // Wait until every object is gone before the next size.
  for (;;) {
    const left = await cluster.kubectl(["get", "imagepolicies,podrestrictions", "-o", "name"]);
    if (left.code === 0 && left.stdout.trim() === "") break;
    await new Promise((r) => setTimeout(r, 200));
  }
  return {
    size,
    objects: 2 * size + 2,
    kubectlApplyMs,
    applyToEffectMs,
    oneEditToEffectMs,
    deleteToEffectMs,
    heapUsedMiB: heap.heapUsed / 1024 / 1024,
    rssMiB: rss,
    reloads,
  };
}

async function main(): Promise<number> {
  let values;
  try {
    ({ values } = parseArgs({
      options: {
        sizes: { type: "string", default: "1,100,1000" },
        json: { type: "boolean" },
        "keep-state": { type: "boolean" },
        help: { type: "boolean", short: "h" },
      },
    }));
  } catch (e) {
    process.stderr.write(`${(e as Error).message}\n\n${USAGE}`);
    return 2;
  }
  if (values.help) {
    process.stdout.write(USAGE);
    return 0;
  }
  const sizes = values.sizes!.split(",").map(Number);
  if (sizes.some((n) => !Number.isInteger(n) || n < 1 || n > 10_000)) {
    process.stderr.write(`--sizes must be whole numbers from 1 to 10000, got ${values.sizes}\n\n${USAGE}`);
    return 2;
  }
  const say = (s: string) => void (values.json ? undefined : process.stderr.write(`${s}\n`));

  const state = await createServeState("imprimatur-bench-reload-", "serve.log");
  const memoryFile = join(state.stateDir, "memory.json");
  let cluster: KubeCluster | undefined;
  let server: ServerProcess | undefined;
  const unguard = guardRun("policy-reload", 60 * 60_000, (signal) => signalServers([server], signal));
  try {
    say("starting etcd and kube-apiserver…");
    cluster = await startKubeCluster();
    await kubectlOk(cluster, ["apply", "-k", join(ROOT, "deploy/crds")]);
    await kubectlOk(cluster, ["wait", "--for=condition=Established", "crd", "--all", "--timeout=60s"]);
    process.env.IMPRIMATUR_BENCH_MEMORY_FILE = memoryFile;
    server = await startServer(
      "imprimatur",
      imprimaturServeArgs(state.stateDir, ["--policy-crds", "--kubeconfig", cluster.kubeconfig, "--drain", "0"]),
      state.caFile,
      state.logFd,
      [`--import=${pathToFileURL(MEMORY_PROBE).href}`],
    );
    const ca = await readFile(state.caFile, "utf8");
    const probeAgent = new Agent({ connect: { ca } });
    const results: SizeResult[] = [];
    for (const size of sizes) {
      say(`${size} ImagePolicies + ${size} PodRestrictions…`);
      results.push(await measure(cluster, server, probeAgent, size, state.logFile, memoryFile));
    }
    await probeAgent.close();
    const report = { benchmark: "policy-reload", pollMs: POLL_MS, results };
    if (values.json) process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
    else {
      const ms = (n: number) => `${(n / 1000).toFixed(2)} s`;
      process.stdout.write(
        `${renderTable([
          ["policies (IP + PR)", "kubectl apply", "apply → effect", "one edit → effect", "delete → effect", "reloads", "heap after GC", "RSS"],
          ...results.map((r) => [
            `${r.size} + ${r.size}`,
            ms(r.kubectlApplyMs),
            ms(r.applyToEffectMs),
            ms(r.oneEditToEffectMs),
            ms(r.deleteToEffectMs),
            String(r.reloads),
            `${r.heapUsedMiB.toFixed(1)} MiB`,
            `${r.rssMiB.toFixed(1)} MiB`,
          ]),
        ])}\n`,
      );
    }
    return 0;
  } catch (e) {
    process.stderr.write(`policy-reload: ${(e as Error).message}\n`);
    if (server) process.stderr.write(`serve stderr:\n${server.stderr().slice(-4000)}\n`);
    return 1;
  } finally {
    await stopServer(server);
    await cluster?.stop();
    state.closeLog();
    if (!values["keep-state"]) await rm(state.stateDir, { recursive: true, force: true });
    unguard();
  }
}

process.exitCode = await main();
