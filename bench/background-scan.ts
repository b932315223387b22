// The background scan at scale: how long `imprimatur serve --background-scan` takes to judge every pod of a cluster,
// how many requests it sends the apiserver for it, what it holds in memory, and how it keeps up with a watch of
// 100 changes per second; and `check --profile restricted@v1.25` on 1,000 pods.
//
// One etcd + kube-apiserver v1.20 (test/support/kube-cluster.ts) with the report CRDs; N pods (default 5,000) of 50
// images created as objects in 10 namespaces (nothing runs them); one ImagePolicy that fails 1 image in 5, so a
// fifth of the pods get a PolicyReport. Phases:
//
//   baseline    the floor: a paged list of every pod through the same client (src/kube/kube-client.ts), doing
//               nothing with them, in this process
//   full scan   serve started with --background-scan: from its start until it logs that every pod was judged;
//               apiserver requests during it (apiserver_request_total, by verb), serve's RSS after it and its peak,
//               and its V8 heap (used, held, the young generation) as its /metrics says; serve runs as installed:
//               from the image's app files (src/ compiled to JavaScript, bench/support/installed-app.ts), with the
//               Node.js flags the installed Deployment gives it (its NODE_OPTIONS)
//   changes     100 label changes per second for 10 s on failing pods: how long after the last change every one
//               was judged, and the requests the scan sent for them (a report whose results did not change is not
//               rewritten)
//   check       `imprimatur check --profile restricted@v1.25` and `--profile restricted` on 1,000 pods: wall time
//
// serve runs on CPU 0 and this process (the lister, the patcher) on CPU 1 (taskset), so the baseline is not
// flattered; etcd and the apiserver share the machine with both.
//
//   node bench/background-scan.ts [--pods 5000] [--from image|checkout] [--node-arg=FLAG …] [--json]
//
// Exit 0 when every phase completed, 1 when one did not (or the run overran its budget), 2 on a usage error.
import { execFileSync, spawnSync } from "node:child_process";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { startKubeCluster, type KubeCluster } from "../test/support/kube-cluster.ts";
import { loadKubeClient } from "../src/kube/kube-connection.ts";
import { installedApp, type InstalledApp } from "./support/installed-app.ts";
import { renderTable } from "./support/report.ts";
import { guardRun } from "./support/run-guard.ts";
import { createServeState } from "./support/serve-state.ts";
import { deployedNodeFlags, imprimaturServeArgs, signalServers, startServer, stopServer, type ServerProcess } from "./support/server-process.ts";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const NAMESPACES = 10;
const IMAGES = 50;
const CHANGES_PER_SECOND = 100;
const CHANGE_SECONDS = 10;
const CHECK_PODS = 1000;

const USAGE = `Usage: node bench/background-scan.ts [options]

  --pods N          pods created as objects (default 5000, at most 50000)
  --from WHERE      image: serve runs from the image's files, src/ compiled to JavaScript (default, as installed);
                    checkout: from the TypeScript of this checkout, types stripped at start
  --node-arg=FLAG   a Node.js flag for serve after the Deployment's NODE_OPTIONS (repeatable):
                    --node-arg=--max-semi-space-size=16
  --json            print only the JSON report
  -h, --help        show this help
`;

const POLICY = `apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: registries}
spec:
  rules:
    - {action: deny, images: ["registry.example.com/retired-*"], message: retired image}
    - {action: allow, images: ["registry.example.com/*"]}
  default: deny
`;

/** Image i of 50: one in five is retired, so a fifth of the pods fail. */
const imageOf = (i: number) => `registry.example.com/${i % IMAGES < IMAGES / 5 ? "retired" : "app"}-${i % IMAGES}:1.${i % 7}`;

function pod(i: number) {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: `pod-${i}`, namespace: `scan-${i % NAMESPACES}`, labels: { app: `app-${i % IMAGES}` } },
    spec: { containers: [{ name: "app", image: imageOf(i), securityContext: { allowPrivilegeEscalation: false } }] },
  };
}

async function kubectlOk(cluster: KubeCluster, args: string[], input?: string): Promise<string> {
  const res = await cluster.kubectl(args, { ...(input === undefined ? {} : { input }), timeoutMs: 300_000 });
  if (res.code !== 0) throw new Error(`kubectl ${args.join(" ")}: ${res.stderr}`);
  return res.stdout;
}

/** apiserver_request_total summed by verb, read from the apiserver's own /metrics. */
async function requestsByVerb(cluster: KubeCluster): Promise<Map<string, number>> {
  const text = await kubectlOk(cluster, ["get", "--raw", "/metrics"]);
  const out = new Map<string, number>();
  for (const line of text.split("\n")) {
    const m = /^apiserver_request_total\{([^}]*)\} ([0-9.e+]+)$/.exec(line);
    if (!m) continue;
    const verb = /verb="([A-Z]+)"/.exec(m[1]!)?.[1] ?? "?";
    out.set(verb, (out.get(verb) ?? 0) + Number(m[2]));
  }
  return out;
}

function difference(after: Map<string, number>, before: Map<string, number>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [verb, n] of after) {
    const d = n - (before.get(verb) ?? 0);
    if (d > 0) out[verb] = d;
  }
  return out;
}

function memoryMiB(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kib = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(status)?.[1] ?? 0);
  return { rss: kib("VmRSS") / 1024, peak: kib("VmHWM") / 1024 };
}

/** serve's log lines "every pod judged" so far. */
function fullScans(logFile: string): Array<{ pods: number; seconds: number }> {
  return readFileSync(logFile, "utf8")
    .split("\n")
    .filter((l) => l.includes('"background scan: every pod judged"'))
    .map((l) => JSON.parse(l) as { pods: number; seconds: number });
}

async function scannedPods(server: ServerProcess, ca: string): Promise<number> {
  const text = await metricsText(server, ca);
  let n = 0;
  for (const m of text.matchAll(/^imprimatur_scan_pods_total\{outcome="[a-z]+"\} (\d+)$/gm)) n += Number(m[1]);
  return n;
}

/** Where serve's memory is, as its /metrics says (prom-client's process metrics): V8's heap, used and held. */
async function heapMiB(server: ServerProcess, ca: string): Promise<{ used: number; total: number; youngGeneration: number }> {
  const text = await metricsText(server, ca);
  const value = (re: RegExp) => Number(re.exec(text)?.[1] ?? NaN) / 2 ** 20;
  return {
    used: value(/^nodejs_heap_size_used_bytes (\d+)$/m),
    total: value(/^nodejs_heap_size_total_bytes (\d+)$/m),
    youngGeneration: value(/^nodejs_heap_space_size_total_bytes\{space="new"\} (\d+)$/m),
  };
}

async function metricsText(server: ServerProcess, ca: string): Promise<string> {
  const { Agent } = await import("undici");
  const agent = new Agent({ connect: { ca } });
  try {
    const res = await agent.request({ origin: server.origin, path: "/metrics", method: "GET" });
    return await res.body.text();
  } finally {
    await agent.close();
  }
}

async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out: ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

function pinSelf(cpu: number): void {
  const taskset = spawnSync("taskset", ["-cp", String(cpu), String(process.pid)], { stdio: "ignore" });
  if (taskset.status !== 0) process.stderr.write("taskset unavailable: this process is not pinned\n");
}

async function main(): Promise<number> {
  let values;
  try {
    ({ values } = parseArgs({
      options: {
        pods: { type: "string", default: "5000" },
        from: { type: "string", default: "image" },
        "node-arg": { type: "string", multiple: true, default: [] },
        json: { type: "boolean" },
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
  const pods = Number(values.pods);
  if (!Number.isInteger(pods) || pods < 100 || pods > 50_000) {
    process.stderr.write(`--pods must be a whole number from 100 to 50000, got ${values.pods}\n\n${USAGE}`);
    return 2;
  }
  if (values.from !== "image" && values.from !== "checkout") {
    process.stderr.write(`--from must be image or checkout, got ${values.from}\n\n${USAGE}`);
    return 2;
  }
  const say = (s: string) => void (values.json ? undefined : process.stderr.write(`${s}\n`));
  pinSelf(1);

  const state = await createServeState("imprimatur-bench-scan-", "serve.log");
  let cluster: KubeCluster | undefined;
  let server: ServerProcess | undefined;
  let installed: InstalledApp | undefined;
  let completed = false;
  const unguard = guardRun("background-scan", 45 * 60_000, (signal) => {
    signalServers([server], signal);
    installed?.remove();
  });
  try {
    if (values.from === "image") installed = installedApp();
    cluster = await startKubeCluster();
    await kubectlOk(cluster, ["apply", "-k", join(ROOT, "deploy/crds/reports")]);
    await kubectlOk(cluster, ["wait", "--for=condition=Established", "crd", "--all", "--timeout=60s"]);
    for (let n = 0; n < NAMESPACES; n++) await kubectlOk(cluster, ["create", "namespace", `scan-${n}`]);
    say(`creating ${pods} pods…`);
    for (let start = 0; start < pods; start += 500) {
      const items = Array.from({ length: Math.min(500, pods - start) }, (_, k) => pod(start + k));
      await kubectlOk(cluster, ["create", "-f", "-"], JSON.stringify({ apiVersion: "v1", kind: "List", items }));
    }
    const kube = loadKubeClient(cluster.kubeconfig);

    // Baseline: a paged list of every pod, the least a scan must do.
    const listRuns: number[] = [];
    for (let run = 0; run < 3; run++) {
      const started = performance.now();
      let token: string | undefined;
      let listed = 0;
      do {
        const page = (await kube.request("GET", "/api/v1/pods", { query: { limit: 500, continue: token } })) as {
          items: unknown[];
          metadata?: { continue?: string };
        };
        listed += page.items.length;
        token = page.metadata?.continue || undefined;
      } while (token);
      if (listed !== pods) throw new Error(`listed ${listed} pods, created ${pods}`);
      listRuns.push(performance.now() - started);
    }
    const listMs = Math.min(...listRuns);

    // The full scan.
    const policyFile = join(state.stateDir, "policies.yaml");
    writeFileSync(policyFile, POLICY);
    const before = await requestsByVerb(cluster);
    const started = performance.now();
    server = await startServer(
      "imprimatur",
      imprimaturServeArgs(
        state.stateDir,
        [
          "--policies",
          policyFile,
          "--kubeconfig",
          cluster.kubeconfig,
          "--background-scan",
          "--scan-rate",
          "10000",
          "--scan-lease",
          "default/imprimatur-scan",
          "--drain",
          "0",
        ],
        installed?.entry,
      ),
      state.caFile,
      state.logFd,
      // As installed: the memory measured is the installed server's.
      [...deployedNodeFlags(), ...values["node-arg"]],
    );
    execFileSync("taskset", ["-cp", "0", String(server.child.pid)], { stdio: "ignore" });
    await until("the first full scan", () => fullScans(state.logFile).some((s) => s.pods === pods), 30 * 60_000);
    const fullScanMs = performance.now() - started;
    const scanLogged = fullScans(state.logFile).find((s) => s.pods === pods)!;
    const scanRequests = difference(await requestsByVerb(cluster), before);
    const memory = memoryMiB(server.child.pid!);
    const heap = await heapMiB(server, readFileSync(state.caFile, "utf8"));
    const reports = JSON.parse(await kubectlOk(cluster, ["get", "policyreports", "-A", "-o", "json"])) as { items: unknown[] };
    const ca = readFileSync(state.caFile, "utf8");

    // 100 changes per second on failing pods (a label), for 10 s.
    const changes = CHANGES_PER_SECOND * CHANGE_SECONDS;
    const judgedBefore = await scannedPods(server, ca);
    const beforeChanges = await requestsByVerb(cluster);
    const changeStart = performance.now();
    const failing = Array.from({ length: pods }, (_, i) => i).filter((i) => imageOf(i).includes("/retired-"));
    const patches: Array<Promise<unknown>> = [];
    for (let k = 0; k < changes; k++) {
      const i = failing[k % failing.length]!;
      const due = changeStart + (k * 1000) / CHANGES_PER_SECOND;
      const wait = due - performance.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      patches.push(
        kube.request("PATCH", `/api/v1/namespaces/scan-${i % NAMESPACES}/pods/pod-${i}`, {
          body: { metadata: { labels: { change: String(k) } } },
          contentType: "application/merge-patch+json",
        }),
      );
    }
    const settled = await Promise.allSettled(patches);
    const failedPatches = settled.filter((p) => p.status === "rejected").length;
    if (failedPatches > 0)
      throw new Error(
        `${failedPatches} of ${changes} label changes failed: ${String((settled.find((p) => p.status === "rejected") as PromiseRejectedResult).reason)}`,
      );
    const lastChange = performance.now();
    // Changes to one pod that arrive before it is judged are judged once: every changed pod judged at least once
    // after its last change (with the default 5,000 pods, each change is to another pod).
    const changedPods = Math.min(changes, failing.length);
    await until("every change judged", async () => (await scannedPods(server!, ca)) - judgedBefore >= changedPods, 10 * 60_000);
    const lagMs = performance.now() - lastChange;
    const changeRequests = difference(await requestsByVerb(cluster), beforeChanges);
    await stopServer(server);
    server = undefined;

    // check --profile restricted@v1.25 on 1,000 pods, against the latest profile on the same pods.
    const manifests = join(state.stateDir, "pods.json");
    writeFileSync(manifests, JSON.stringify({ apiVersion: "v1", kind: "List", items: Array.from({ length: CHECK_PODS }, (_, i) => pod(i)) }));
    const timeCheck = (profile: string) => {
      const t0 = performance.now();
      const r = spawnSync(
        process.execPath,
        ["bin/imprimatur.js", "check", "--profile", profile, "--allow-empty", "--policies", policyFile, "-f", manifests, "-o", "json"],
        {
          cwd: ROOT,
          maxBuffer: 256 * 1024 * 1024,
        },
      );
      if (r.status !== 0 && r.status !== 1) throw new Error(`check --profile ${profile}: exit ${r.status}: ${r.stderr}`);
      return performance.now() - t0;
    };
    const checkVersioned = Math.min(timeCheck("restricted@v1.25"), timeCheck("restricted@v1.25"));
    const checkLatest = Math.min(timeCheck("restricted"), timeCheck("restricted"));

    const report = {
      pods,
      servedFrom: values.from,
      nodeFlags: [...deployedNodeFlags(), ...values["node-arg"]],
      images: IMAGES,
      baseline: { listMs },
      fullScan: {
        ms: fullScanMs,
        loggedSeconds: scanLogged.seconds,
        ratioToList: fullScanMs / listMs,
        apiserverRequests: scanRequests,
        rssMiB: memory.rss,
        peakRssMiB: memory.peak,
        heapUsedMiB: heap.used,
        heapTotalMiB: heap.total,
        youngGenerationMiB: heap.youngGeneration,
        reports: reports.items.length,
      },
      changes: { count: changes, pods: changedPods, perSecond: CHANGES_PER_SECOND, lagAfterLastMs: lagMs, apiserverRequests: changeRequests },
      check: { pods: CHECK_PODS, versionedMs: checkVersioned, latestMs: checkLatest, ratio: checkVersioned / checkLatest },
    };
    if (values.json) process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
    else {
      const reqs = (r: Record<string, number>) =>
        Object.entries(r)
          .map(([v, n]) => `${v} ${n}`)
          .join(", ");
      process.stdout.write(
        `${renderTable([
          ["phase", "result"],
          ["serve", `from the ${values.from === "image" ? "image's compiled JavaScript" : "checkout's TypeScript"}, node ${report.nodeFlags.join(" ")}`],
          ["baseline: paged list of every pod", `${listMs.toFixed(0)} ms`],
          [
            `full scan of ${pods} pods (${IMAGES} images)`,
            `${(fullScanMs / 1000).toFixed(1)} s from start (${scanLogged.seconds.toFixed(1)} s judging), ${(fullScanMs / listMs).toFixed(1)}× the list`,
          ],
          ["  apiserver requests", reqs(scanRequests)],
          ["  serve memory", `RSS ${memory.rss.toFixed(0)} MiB, peak ${memory.peak.toFixed(0)} MiB`],
          ["  V8 heap", `${heap.used.toFixed(0)} MiB used of ${heap.total.toFixed(0)} MiB held (young generation ${heap.youngGeneration.toFixed(0)} MiB)`],
          ["  policy reports written", String(reports.items.length)],
          [`${changes} changes at ${CHANGES_PER_SECOND}/s`, `all judged ${lagMs.toFixed(0)} ms after the last`],
          ["  apiserver requests", reqs(changeRequests)],
          [
            `check on ${CHECK_PODS} pods`,
            `restricted@v1.25 ${checkVersioned.toFixed(0)} ms, restricted ${checkLatest.toFixed(0)} ms (${(checkVersioned / checkLatest).toFixed(2)}×)`,
          ],
        ])}\n`,
      );
    }
    completed = true;
    return 0;
  } catch (e) {
    process.stderr.write(`background-scan: ${(e as Error).stack ?? e}\n`);
    return 1;
  } finally {
    unguard();
    await stopServer(server);
    installed?.remove();
    state.closeLog();
    await cluster?.stop();
    // serve's state and log: kept when the run failed, to read what went wrong.
    if (completed) rmSync(state.stateDir, { recursive: true, force: true });
    else process.stderr.write(`background-scan: serve's state and log kept in ${state.stateDir}\n`);
  }
}

process.exitCode = await main();
