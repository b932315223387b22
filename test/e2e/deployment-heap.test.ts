// The installed Deployment's NODE_OPTIONS, as Node.js takes them inside the memory limit the same Deployment sets.
// Node.js sizes V8's heap from the memory its cgroup allows: in a 512Mi container it keeps a 2 MiB young
// generation (bench/admission-throughput.md: 0.78x the throughput of the larger one the benchmarks run with)
// and stops at a heap of about half the limit. A real memory cgroup (v1 or v2, whichever this machine's kernel
// has, as containerd would make for the container) holds a `node` started with the manifest's environment, which
// allocates short-lived garbage and reports what V8 made of it. The same without NODE_OPTIONS shows that the limit
// took effect and what the setting changes. The cgroup is removed after, with the process gone.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { parseAllDocuments } from "yaml";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const DEPLOYMENT = join(ROOT, "deploy/base/core/deployment.yaml");
const MiB = 1024 * 1024;

interface HeapSeen {
  constrainedMemory: number;
  newSpaceBytes: number;
  heapLimitBytes: number;
}

// Allocates 20 million short-lived objects (the young generation grows to its maximum under that), then reports.
const PROBE = `
const v8 = require("node:v8");
let keep = [];
for (let i = 0; i < 2e7; i++) { keep.push({ i }); if (keep.length > 100000) keep = []; }
const newSpace = v8.getHeapSpaceStatistics().find((s) => s.space_name === "new_space");
process.stdout.write(JSON.stringify({
  constrainedMemory: process.constrainedMemory(),
  newSpaceBytes: newSpace.space_size,
  heapLimitBytes: v8.getHeapStatistics().heap_size_limit,
}));`;

function imprimaturContainer(): { nodeOptions: string | undefined; memoryLimitBytes: number } {
  const docs = parseAllDocuments(readFileSync(DEPLOYMENT, "utf8")).map((d) => d.toJS() as Record<string, any>);
  const deployment = docs.find((d) => d?.kind === "Deployment");
  assert.ok(deployment, `${DEPLOYMENT} holds a Deployment`);
  const container = (deployment.spec.template.spec.containers as Array<Record<string, any>>).find((c) => c.name === "imprimatur");
  assert.ok(container, "the Deployment has the imprimatur container");
  const limit = String(container.resources?.limits?.memory ?? "");
  const mi = /^(\d+)Mi$/.exec(limit);
  assert.ok(mi, `the container's memory limit is given in Mi (got "${limit}")`);
  const env = (container.env ?? []) as Array<{ name: string; value?: string }>;
  return { nodeOptions: env.find((e) => e.name === "NODE_OPTIONS")?.value, memoryLimitBytes: Number(mi[1]) * MiB };
}

/** This process's memory cgroup folder and how a limit is written there (v1: memory.limit_in_bytes, v2: memory.max). */
function memoryCgroup(): { dir: string; limitFile: string } {
  const lines = readFileSync("/proc/self/cgroup", "utf8").trim().split("\n");
  const v1 = lines.map((l) => l.split(":")).find(([, controllers]) => controllers!.split(",").includes("memory"));
  if (v1 && existsSync("/sys/fs/cgroup/memory")) return { dir: join("/sys/fs/cgroup/memory", v1[2]!), limitFile: "memory.limit_in_bytes" };
  const v2 = lines.map((l) => l.split(":")).find(([id]) => id === "0");
  for (const mount of ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"]) {
    const dir = join(mount, v2?.[2] ?? "/");
    if (existsSync(join(dir, "cgroup.controllers")) && readFileSync(join(dir, "cgroup.controllers"), "utf8").split(/\s+/).includes("memory"))
      return { dir, limitFile: "memory.max" };
  }
  throw new Error("no memory cgroup controller on this machine (neither v1 nor v2): cannot run node under a memory limit");
}

const made: string[] = [];

/** Runs the probe in a new memory cgroup limited to `limitBytes`, with NODE_OPTIONS as given (none: unset). */
async function probeUnderLimit(limitBytes: number, nodeOptions: string | undefined): Promise<HeapSeen> {
  const parent = memoryCgroup();
  const dir = join(parent.dir, `imprimatur-heap-test-${process.pid}-${made.length}`);
  mkdirSync(dir);
  made.push(dir);
  writeFileSync(join(dir, parent.limitFile), String(limitBytes));
  const env = { ...process.env };
  delete env.NODE_OPTIONS;
  if (nodeOptions !== undefined) env.NODE_OPTIONS = nodeOptions;
  // The shell moves itself into the cgroup, then becomes node: node starts inside the limit, as in the container.
  const child = spawn("sh", ["-c", `echo $$ > "$1/cgroup.procs" && exec "$2" -e "$3"`, "sh", dir, process.execPath, PROBE], {
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.setEncoding("utf8").on("data", (s: string) => (stdout += s));
  child.stderr.setEncoding("utf8").on("data", (s: string) => (stderr += s));
  const code = await new Promise<number | null>((resolve) => child.once("close", resolve));
  rmdirSync(dir);
  made.pop();
  assert.equal(code, 0, `node under a ${limitBytes / MiB} MiB limit with NODE_OPTIONS=${nodeOptions ?? "(unset)"}: ${stderr}`);
  return JSON.parse(stdout) as HeapSeen;
}

describe("the Deployment's NODE_OPTIONS inside its memory limit", () => {
  after(() => {
    for (const dir of made.reverse()) if (existsSync(dir)) rmdirSync(dir);
  });

  const { nodeOptions, memoryLimitBytes } = imprimaturContainer();

  test("give serve a 64 MiB young generation and three quarters of the limit for its heap", async () => {
    assert.ok(nodeOptions, "the imprimatur container sets NODE_OPTIONS");
    const seen = await probeUnderLimit(memoryLimitBytes, nodeOptions);
    assert.equal(seen.constrainedMemory, memoryLimitBytes, "node sees the container's limit");
    assert.ok(seen.newSpaceBytes >= 64 * MiB, `young generation ${seen.newSpaceBytes / MiB} MiB, want 64 MiB (two 32 MiB semi-spaces)`);
    assert.ok(seen.heapLimitBytes >= 0.75 * memoryLimitBytes, `heap limit ${seen.heapLimitBytes / MiB} MiB of a ${memoryLimitBytes / MiB} MiB limit`);
    assert.ok(seen.heapLimitBytes < memoryLimitBytes, "and below the limit itself, so V8 stops before the kernel kills");
  });

  test("without them, Node.js keeps a young generation of a few MiB and about half the limit for its heap there", async () => {
    const seen = await probeUnderLimit(memoryLimitBytes, undefined);
    assert.equal(seen.constrainedMemory, memoryLimitBytes);
    assert.ok(seen.newSpaceBytes <= 8 * MiB, `young generation ${seen.newSpaceBytes / MiB} MiB`);
    assert.ok(seen.heapLimitBytes < 0.6 * memoryLimitBytes, `heap limit ${seen.heapLimitBytes / MiB} MiB`);
  });
});
