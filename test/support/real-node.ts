// End-to-end harness: a real Kubernetes node on this machine — containerd 1.6 (CRI), runc, the CNI bridge plugin
// and a kubelet v1.20.2 — registered with the test kube-apiserver of kube-cluster.ts.
//
// Everything a run owns lives under one private temp dir: containerd's config, root, state and socket, the CNI
// config and IPAM state, the registry trust (certs.d), the kubelet's root and cert dirs, logs. What cannot live
// there, stop() undoes: the run's processes (the shims found by its containerd's socket, the containers by their
// cgroups; always by PID), its mounts (deepest first), its bridge and its containers' cgroups. Machine-wide
// changes — the sysctls the kubelet and the bridge plugin set, the fixed host directories the kubelet, go-cni and
// the shims create, the k8s.io cgroup parents — are restored by the last of concurrent runs (see joinShared).
// The components come from scripts/provision-node.sh.
//
// No scheduler or controller-manager runs here: pods name their node (spec.nodeName; see podManifest). The small
// cluster (small-cluster.ts) adds them, and runs this node inside its own network namespace (see NodeNetwork).

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, rmdirSync, statSync, writeFileSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import type { KubeCluster } from "./kube-cluster.ts";
import { runCommand } from "./command.ts";
import { findCommand, isExecutable } from "./executables.ts";
import { freePorts } from "./ports.ts";
import { signalPid, spawnLogged as spawnLogged_, terminate as terminate_, type LoggedProcess } from "./logged-process.ts";
import { tailFile } from "./log-tail.ts";
import { buildRunnableImage } from "./runnable-image.ts";

export interface NodeRuntimeOptions {
  /** Registries containerd trusts (TLS with their test CA), e.g. `{ host: registry.host, caFile: registry.caFile }`. */
  registries: Array<{ host: string; caFile: string }>;
  /** Run inside a network namespace someone else owns. Default: the host's, with a bridge of this run's own. */
  network?: NodeNetwork;
}

/**
 * A network namespace (`ip netns add NAME`) with a bridge already up in it, owned by the caller: containerd and
 * the kubelet start under `nsenter --net=/run/netns/NAME` (not `ip netns exec`, which remounts /sys and so hides
 * the cgroup mounts the kubelet needs), pods get their addresses from `subnet` on `bridge` and their default
 * route through it, and the bridge goes with the namespace (stop() leaves both to the caller).
 */
export interface NodeNetwork {
  netns: string;
  bridge: string;
  subnet: string;
}

export interface KubeletOptions {
  /** Started with `nodes: [nodeName]`: the kubelet authenticates as system:node:<nodeName>. */
  cluster: KubeCluster;
  /** Where the kubelet's image service is ("unix:///…", e.g. an image-service proxy). Default: this containerd. */
  imageServiceEndpoint?: string;
  /** Default "node1". */
  nodeName?: string;
  /** Extra kubelet flags, appended last. */
  extraArgs?: string[];
}

export interface CommandResult {
  code: number;
  stdout: string;
  stderr: string;
}

export interface NodeRuntime {
  /** The run's private temp dir (removed by stop()). */
  dir: string;
  /** containerd's CRI/gRPC socket (a path). */
  containerdSocket: string;
  /** "unix://" + containerdSocket: the kubelet's runtime endpoint, and the upstream for an image-service proxy. */
  containerdEndpoint: string;
  /** The local sandbox image containerd runs for every pod. */
  pauseImage: string;
  /** The CNI bridge of this run, and the pods' subnet on it. */
  bridge: string;
  subnet: string;
  /** `ctr -n k8s.io` against this containerd. Never rejects; a timeout gives code -1. */
  ctr(args: string[], opts?: { timeoutMs?: number }): Promise<CommandResult>;
  /** Starts the kubelet and resolves once its Node reports Ready (with a heartbeat from this start). */
  startKubelet(opts: KubeletOptions): Promise<{ nodeName: string; pid: number; readyMs: number }>;
  /** SIGTERM the kubelet (SIGKILL after a grace period); pods keep running in containerd. Idempotent. */
  stopKubelet(): Promise<void>;
  /**
   * containerd gone and back, as a node's containerd restarts (an upgrade, a crash): SIGKILL when `kill`, else
   * SIGTERM; its socket is removed as a dead daemon leaves it absent or stale; after `downMs` it starts again with
   * the same config, root and state, and this resolves once it answers. Its shims and containers keep running.
   */
  restartContainerd(opts?: { kill?: boolean; downMs?: number }): Promise<void>;
  /** Every process id this run has started or found (containerd, kubelets, shims, container processes). */
  pidsSeen(): number[];
  /** Processes alive now that belong to this run: by command line (the temp dir) or by cgroup. */
  liveProcesses(): number[];
  /** Mount points under dir. */
  mounts(): string[];
  kubeletLogs(lines?: number): string;
  containerdLogs(lines?: number): string;
  /** This run's container cgroups (k8s.io/<container id>, in every hierarchy). */
  cgroups(): string[];
  /** How many other runs of this harness were active when this one started (they share the machine-wide state). */
  otherRunsAtStart: number;
  /** Tears everything down (see the file comment). Idempotent; also runs, synchronously, if the process exits. */
  stop(): Promise<NodeStopReport>;
}

export interface NodeStopReport {
  /** Whether this was the last active run, which restored the machine-wide state. */
  lastRun: boolean;
  /** Runs still active (when not the last). */
  otherRuns: number;
  /** What the first run recorded: restored by the last. */
  originals: NodeOriginals | null;
  /** Empty when everything went (stop() rejects otherwise). */
  problems: string[];
}

/** The kernel settings the kubelet (kernel tunables) and the bridge plugin (gateway forwarding) change. */
export const TOUCHED_SYSCTLS = ["vm/overcommit_memory", "kernel/panic", "kernel/panic_on_oops", "net/ipv4/ip_forward"] as const;
/** Fixed paths the kubelet (device plugins, pod logs), go-cni (result cache) and the shims (sockets) create. */
export const NODE_HOST_DIRS = ["/var/lib/kubelet", "/var/log/pods", "/var/log/containers", "/var/lib/cni", "/run/containerd", "/opt/containerd"];
const CGROUP_ROOT = "/sys/fs/cgroup";
/** How long the last run waits for the k8s.io cgroup parents to empty before it reports them left. */
const CGROUP_EMPTY_WAIT_MS = 15_000;
/** containerd's default cgroup parent for CRI containers with the cgroupfs driver and no pod cgroups. */
export const CGROUP_PARENT = "k8s.io";
const CNI_BIN_DIR = "/usr/lib/cni";
const PAUSE_IMAGE = "imprimatur.test/pause:busybox";
const DEFAULT_NODE = "node1";
const START_DEADLINE_MS = 60_000;
const STOP_GRACE_MS = 10_000;
const CTR_TIMEOUT_MS = 30_000;

export interface NodeToolPaths {
  containerd: string;
  ctr: string;
  shim: string;
  runc: string;
  kubelet: string;
  ip: string;
  umount: string;
}

/** Where scripts/provision-node.sh put the components; throws, naming what is missing, if it has not run. */
export function nodeToolPaths(): NodeToolPaths {
  const cacheDir = process.env.IMPRIMATUR_CACHE || join(homedir(), ".cache", "imprimatur");
  const paths: Record<keyof NodeToolPaths, string | null> = {
    containerd: findCommand("containerd"),
    ctr: findCommand("ctr"),
    shim: findCommand("containerd-shim-runc-v2"),
    runc: findCommand("runc"),
    kubelet: join(cacheDir, "bin", "kubelet"),
    ip: findCommand("ip"),
    umount: findCommand("umount"),
  };
  const missing = Object.entries(paths)
    .filter(([, path]) => path === null || !isExecutable(path))
    .map(([name, path]) => `${name}${path ? ` (${path})` : ""}`);
  for (const plugin of ["bridge", "host-local", "loopback"]) if (!isExecutable(join(CNI_BIN_DIR, plugin))) missing.push(`CNI ${plugin}`);
  if (missing.length > 0) {
    throw new Error(`real-node components not found: ${missing.join(", ")}. Run scripts/provision-node.sh first (once per machine).`);
  }
  return paths as NodeToolPaths;
}

// ---------------------------------------------------------------------------------------------
// Processes

type Proc = LoggedProcess;

function childEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    // containerd and ctr read CONTAINERD_*; the kubelet and its client libraries KUBECONFIG.
    if (key.startsWith("CONTAINERD_") || key === "KUBECONFIG") continue;
    env[key] = value;
  }
  return env;
}

const spawnLogged = (name: string, bin: string, args: string[], dir: string, netns?: string): Proc =>
  spawnLogged_(name, bin, args, { dir, env: childEnv(), netns });

const terminate = (proc: Proc, graceMs = STOP_GRACE_MS): Promise<void> => terminate_(proc, graceMs);

/** Runs a command to completion; never rejects (spawn failure or timeout: code -1). */
async function run(bin: string, args: string[], opts: { timeoutMs?: number; input?: string } = {}): Promise<CommandResult> {
  const out = await runCommand(bin, args, {
    env: childEnv(),
    timeoutMs: opts.timeoutMs ?? CTR_TIMEOUT_MS,
    label: `[real-node] ${bin} ${args.join(" ")}`,
    input: opts.input,
  });
  return { ...out, stdout: out.stdout.toString("utf8") };
}

/** A synchronous pause, for the exit-time cleanup (no event loop then). */
function sleepSync(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

// ---------------------------------------------------------------------------------------------
// /proc, mounts, cgroups, sysctls

function procCmdline(pid: number): string[] | null {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").filter(Boolean);
  } catch {
    return null;
  }
}

/** Alive and not a zombie (a killed shim's parent is init, which may reap it late). */
export function isAlive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z";
  } catch {
    return false;
  }
}

function allPids(): number[] {
  return readdirSync("/proc")
    .filter((name) => /^\d+$/.test(name))
    .map(Number);
}

/** The shims this containerd started: their command line names its socket. */
function shimPids(socket: string): number[] {
  return allPids().filter((pid) => {
    const argv = procCmdline(pid);
    return argv !== null && (argv[0] ?? "").endsWith("containerd-shim-runc-v2") && argv.includes(socket);
  });
}

/** Mount points at or under dir, deepest (and most recently stacked) first. */
function mountsUnder(dir: string): string[] {
  let info: string;
  try {
    info = readFileSync("/proc/self/mountinfo", "utf8");
  } catch {
    return [];
  }
  const points = info
    .split("\n")
    .filter(Boolean)
    .map((line) => (line.split(" ")[4] ?? "").replace(/\\([0-7]{3})/g, (_m, oct: string) => String.fromCharCode(parseInt(oct, 8))))
    .filter((point) => point === dir || point.startsWith(dir + "/"));
  // Later lines are stacked on top of earlier ones at the same point.
  return points
    .map((point, i) => ({ point, i }))
    .sort((a, b) => b.point.split("/").length - a.point.split("/").length || b.i - a.i)
    .map((m) => m.point);
}

function cgroupHierarchies(): string[] {
  try {
    return readdirSync(CGROUP_ROOT)
      .map((name) => join(CGROUP_ROOT, name))
      .filter((path) => {
        try {
          return statSync(path).isDirectory() && existsSync(join(path, "cgroup.procs"));
        } catch {
          return false;
        }
      });
  } catch {
    return [];
  }
}

/** Directories of a cgroup subtree, deepest first. */
function cgroupTree(path: string): string[] {
  let children: string[];
  try {
    children = readdirSync(path, { withFileTypes: true })
      .filter((d) => d.isDirectory())
      .map((d) => join(path, d.name));
  } catch {
    return [];
  }
  return [...children.flatMap(cgroupTree), path];
}

/**
 * Removes a cgroup and what is left below it, deepest first, waiting for each to empty: the kernel refuses
 * (EBUSY) while a pod's last processes are still exiting, a moment after they were killed. Undefined when gone.
 */
function removeCgroupOnceEmpty(path: string, waitMs: number): string | undefined {
  const deadline = Date.now() + waitMs;
  let last: Error | undefined;
  while (existsSync(path)) {
    for (const cg of cgroupTree(path)) {
      if (cgroupProcs(cg).length > 0) continue;
      try {
        rmdirSync(cg);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== "ENOENT") last = err as Error;
      }
    }
    if (!existsSync(path)) break;
    if (Date.now() >= deadline) {
      const busy = cgroupTree(path).filter((cg) => cgroupProcs(cg).length > 0);
      return `rmdir ${path}: still in use after ${waitMs} ms (${busy.length > 0 ? `processes in ${busy.join(", ")}` : (last?.message ?? "busy")})`;
    }
    sleepSync(100);
  }
  return undefined;
}

function cgroupProcs(path: string): number[] {
  try {
    return readFileSync(join(path, "cgroup.procs"), "utf8").split("\n").filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

function readSysctl(name: string): string | null {
  try {
    return readFileSync(join("/proc/sys", name), "utf8").trim();
  } catch {
    return null;
  }
}

function randomPrivateSubnet(ip: string): string {
  const routes = spawnSync(ip, ["-4", "route", "show", "table", "all"], { encoding: "utf8" }).stdout ?? "";
  for (let i = 0; i < 50; i++) {
    const subnet = `10.${200 + (randomBytes(1)[0]! % 50)}.${randomBytes(1)[0]!}.0/24`;
    if (!routes.includes(subnet.slice(0, subnet.lastIndexOf(".")))) return subnet;
  }
  throw new Error("no unused private /24 found for the CNI bridge");
}

// ---------------------------------------------------------------------------------------------
// Machine-wide state shared by concurrent runs (several test files may each run a node at once)
//
// The sysctls, the fixed host directories and the k8s.io cgroup parents are one per machine. The first run to
// start records their original state in a file under the temp dir; the last run to stop restores it and removes
// the file. Everything else (processes, mounts, bridge, container cgroups) belongs to one run and goes with it.

const SHARED_STATE_FILE = join(tmpdir(), "imprimatur-node-shared.json");
const SHARED_LOCK_DIR = join(tmpdir(), "imprimatur-node-shared.lock");
const STALE_LOCK_MS = 30_000;

export interface NodeOriginals {
  sysctls: Record<string, string | null>;
  /** Host directories that did not exist before the first run. */
  createdHostDirs: string[];
  /** Cgroup hierarchies that had no k8s.io cgroup before the first run. */
  createdCgroupParents: string[];
}

interface SharedState {
  runs: Array<{ pid: number; dir: string }>;
  originals: NodeOriginals;
}

/** Runs fn under a lock (a directory: mkdir is atomic), synchronously so that exit-time cleanup can use it too. */
function withSharedState<T>(fn: (state: SharedState | null) => { state: SharedState | null; result: T }): T {
  for (let waited = 0; ; waited += 20) {
    try {
      mkdirSync(SHARED_LOCK_DIR);
      break;
    } catch {
      try {
        // A holder that died (SIGKILL) leaves the lock behind.
        if (Date.now() - statSync(SHARED_LOCK_DIR).mtimeMs > STALE_LOCK_MS) rmdirSync(SHARED_LOCK_DIR);
      } catch {
        // released meanwhile
      }
      if (waited > 2 * STALE_LOCK_MS) throw new Error(`could not take ${SHARED_LOCK_DIR}`);
      sleepSync(20);
    }
  }
  try {
    let state: SharedState | null = null;
    try {
      state = JSON.parse(readFileSync(SHARED_STATE_FILE, "utf8")) as SharedState;
    } catch {
      // none yet (or torn by a crash): this run records the originals
    }
    const out = fn(state);
    if (out.state) writeFileSync(SHARED_STATE_FILE, JSON.stringify(out.state, null, 2));
    else rmSync(SHARED_STATE_FILE, { force: true });
    return out.result;
  } finally {
    rmdirSync(SHARED_LOCK_DIR);
  }
}

const runAlive = (r: { pid: number; dir: string }): boolean => isAlive(r.pid) && existsSync(r.dir);
const hierarchiesWithoutParent = (): string[] => cgroupHierarchies().filter((h) => !existsSync(join(h, CGROUP_PARENT)));

/** Registers a run; returns the originals and how many other runs are active. */
function joinShared(dir: string): { originals: NodeOriginals; otherRuns: number } {
  return withSharedState((state) => {
    const others = (state?.runs ?? []).filter(runAlive);
    const absentDirs = NODE_HOST_DIRS.filter((path) => !existsSync(path));
    const absentParents = hierarchiesWithoutParent();
    // Kept from a run that died without cleaning up: those are still the machine's original values.
    const originals: NodeOriginals = state?.originals
      ? {
          sysctls: state.originals.sysctls,
          createdHostDirs: [...new Set([...state.originals.createdHostDirs, ...absentDirs])],
          createdCgroupParents: [...new Set([...state.originals.createdCgroupParents, ...absentParents])],
        }
      : { sysctls: sysctlValues(), createdHostDirs: absentDirs, createdCgroupParents: absentParents };
    return { state: { runs: [...others, { pid: process.pid, dir }], originals }, result: { originals, otherRuns: others.length } };
  });
}

/** Unregisters a run; the last one restores the originals. */
function leaveShared(dir: string): NodeStopReport {
  return withSharedState<NodeStopReport>((state) => {
    const others = (state?.runs ?? []).filter((r) => r.dir !== dir && runAlive(r));
    if (!state) return { state: null, result: { lastRun: true, otherRuns: 0, originals: null, problems: [] } };
    if (others.length > 0)
      return { state: { ...state, runs: others }, result: { lastRun: false, otherRuns: others.length, originals: state.originals, problems: [] } };
    const problems: string[] = [];
    for (const [name, value] of Object.entries(state.originals.sysctls)) {
      if (value === null || readSysctl(name) === value) continue;
      try {
        writeFileSync(join("/proc/sys", name), value);
      } catch (err) {
        problems.push(`restoring ${name}=${value}: ${(err as Error).message}`);
      }
    }
    for (const path of state.originals.createdHostDirs) {
      if (mountsUnder(path).length === 0) rmSync(path, { recursive: true, force: true });
      else problems.push(`${path} has mounts; left in place`);
    }
    for (const hierarchy of state.originals.createdCgroupParents) {
      const problem = removeCgroupOnceEmpty(join(hierarchy, CGROUP_PARENT), CGROUP_EMPTY_WAIT_MS);
      if (problem) problems.push(problem);
    }
    return { state: null, result: { lastRun: true, otherRuns: 0, originals: state.originals, problems } };
  });
}

// ---------------------------------------------------------------------------------------------
// Configuration files

function containerdConfig(dir: string, sandboxImage: string): string {
  const q = (s: string) => JSON.stringify(s); // TOML basic strings accept JSON's escapes
  const cri = 'plugins."io.containerd.grpc.v1.cri"';
  return [
    "version = 2",
    `root = ${q(join(dir, "containerd", "root"))}`,
    `state = ${q(join(dir, "containerd", "state"))}`,
    // Fail at start rather than serve a containerd without CRI.
    'required_plugins = ["io.containerd.grpc.v1.cri"]',
    "[grpc]",
    `  address = ${q(join(dir, "containerd.sock"))}`,
    "[ttrpc]",
    `  address = ${q(join(dir, "containerd.sock.ttrpc"))}`,
    "[debug]",
    '  level = "info"',
    '[plugins."io.containerd.internal.v1.opt"]',
    `  path = ${q(join(dir, "containerd", "opt"))}`,
    `[${cri}]`,
    `  sandbox_image = ${q(sandboxImage)}`,
    // This VM refuses negative oom_score_adj even to root; without this every sandbox fails in runc.
    "  restrict_oom_score_adj = true",
    "  disable_apparmor = true",
    "  netns_mounts_under_state_dir = true",
    '  stream_server_address = "127.0.0.1"',
    '  stream_server_port = "0"',
    `[${cri}.containerd]`,
    '  snapshotter = "overlayfs"',
    '  default_runtime_name = "runc"',
    `[${cri}.containerd.runtimes.runc]`,
    '  runtime_type = "io.containerd.runc.v2"',
    `[${cri}.containerd.runtimes.runc.options]`,
    "  SystemdCgroup = false",
    // runc's state, otherwise in /run/containerd/runc.
    `  Root = ${q(join(dir, "runc"))}`,
    `[${cri}.cni]`,
    `  bin_dir = ${q(CNI_BIN_DIR)}`,
    `  conf_dir = ${q(join(dir, "cni", "net.d"))}`,
    "  max_conf_num = 1",
    `[${cri}.registry]`,
    `  config_path = ${q(join(dir, "certs.d"))}`,
    "",
  ].join("\n");
}

function cniConflist(dir: string, name: string, bridge: string, subnet: string, defaultGateway: boolean): string {
  return JSON.stringify(
    {
      cniVersion: "0.4.0",
      name,
      plugins: [
        {
          type: "bridge",
          bridge,
          isGateway: true,
          // In a namespace with Services: without a default route through the bridge, a pod's packets to a
          // Service IP (the `kubernetes` Service too) find no route ("Network is unreachable").
          ...(defaultGateway ? { isDefaultGateway: true } : {}),
          // No masquerading: pods only ever talk inside this machine, and no iptables rules are left behind.
          ipMasq: false,
          hairpinMode: true,
          // The default route: from isDefaultGateway when set (both would add it twice, and the second fails).
          ipam: {
            type: "host-local",
            ranges: [[{ subnet }]],
            ...(defaultGateway ? {} : { routes: [{ dst: "0.0.0.0/0" }] }),
            dataDir: join(dir, "cni", "ipam"),
          },
        },
        { type: "loopback" },
      ],
    },
    null,
    2,
  );
}

function hostsToml(host: string, caFile: string): string {
  const q = (s: string) => JSON.stringify(s);
  return [`server = ${q(`https://${host}`)}`, "", `[host.${q(`https://${host}`)}]`, '  capabilities = ["pull", "resolve"]', `  ca = ${q(caFile)}`, ""].join(
    "\n",
  );
}

// ---------------------------------------------------------------------------------------------
// Start

export async function startNodeRuntime(opts: NodeRuntimeOptions): Promise<NodeRuntime> {
  const tools = nodeToolPaths();
  const dir = mkdtempSync(join(tmpdir(), "imprimatur-node-"));
  const runId = randomBytes(4).toString("hex");
  const netns = opts.network?.netns;
  const bridge = opts.network?.bridge ?? `impr${runId}`; // ≤ 15 characters (IFNAMSIZ)
  const subnet = opts.network?.subnet ?? randomPrivateSubnet(tools.ip);
  const socket = join(dir, "containerd.sock");

  // What the last run's stop() restores or removes: recorded before anything starts.
  const joined = joinShared(dir);

  const seen = new Set<number>();
  let containerd: Proc | undefined;
  let kubelet: Proc | undefined;
  let kubeletCount = 0;
  let currentCluster: KubeCluster | undefined;
  let currentNode: string | undefined;
  let stopping: Promise<NodeStopReport> | undefined;
  let finished: NodeStopReport | undefined;
  /** Ids of this containerd's containers and sandboxes: their cgroups are k8s.io/<id>. */
  const containerIds = new Set<string>();
  const collectIds = () => {
    for (const sub of [join(dir, "runc", "k8s.io"), join(dir, "containerd", "state", "io.containerd.runtime.v2.task", "k8s.io")]) {
      try {
        for (const id of readdirSync(sub)) containerIds.add(id);
      } catch {
        // not created yet, or removed
      }
    }
  };

  const ctr = (args: string[], o: { timeoutMs?: number } = {}) => run(tools.ctr, ["--address", socket, "--namespace", "k8s.io", ...args], o);

  /** containerd, ready once ctr gets an answer. */
  let containerdStarts = 0;
  const startContainerd = async (configPath: string): Promise<void> => {
    containerdStarts++;
    const proc = spawnLogged(containerdStarts === 1 ? "containerd" : `containerd-${containerdStarts}`, tools.containerd, ["--config", configPath], dir, netns);
    containerd = proc;
    seen.add(proc.pid);
    const deadline = Date.now() + START_DEADLINE_MS;
    for (;;) {
      if (proc.exit) throw new Error(`containerd exited during start; log tail:\n${tailFile(proc.logPath)}`);
      if (existsSync(socket) && (await ctr(["version"], { timeoutMs: 5_000 })).code === 0) break;
      if (Date.now() > deadline) throw new Error(`containerd not ready within ${START_DEADLINE_MS / 1000} s; log tail:\n${tailFile(proc.logPath)}`);
      await sleep(50);
    }
  };

  const restartContainerd = async (o: { kill?: boolean; downMs?: number } = {}): Promise<void> => {
    if (stopping) throw new Error("the node runtime is stopped");
    const current = containerd;
    if (!current || current.exit) throw new Error("containerd is not running");
    if (o.kill) {
      signalPid(current.pid, "SIGKILL");
      for (let i = 0; i < 100 && !current.exit; i++) await sleep(50);
    } else await terminate(current);
    rmSync(socket, { force: true });
    await sleep(o.downMs ?? 0);
    await startContainerd(join(dir, "containerd.toml"));
  };

  /** Our cgroups, deepest first: those of this containerd's containers (others' runs have their own ids). */
  const ourCgroups = (): string[] => {
    collectIds();
    return cgroupHierarchies().flatMap((h) =>
      [...containerIds].flatMap((id) => (existsSync(join(h, CGROUP_PARENT, id)) ? cgroupTree(join(h, CGROUP_PARENT, id)) : [])),
    );
  };

  const liveProcesses = (): number[] => {
    const found = new Set<number>();
    for (const pid of allPids()) {
      if (pid === process.pid) continue;
      const argv = procCmdline(pid);
      if (argv?.some((arg) => arg.includes(dir)) && isAlive(pid)) found.add(pid);
    }
    for (const cg of ourCgroups()) for (const pid of cgroupProcs(cg)) if (isAlive(pid)) found.add(pid);
    return [...found];
  };

  /**
   * The part of the teardown that needs no running component, synchronous so that it can also run at exit:
   * kill what is left (by PID), unmount, delete the bridge, remove cgroups, and if it is the last run, restore
   * sysctls and remove the host directories and cgroup parents (leaveShared).
   */
  const finalCleanupSync = (): NodeStopReport => {
    if (finished) return finished;
    const problems: string[] = [];
    collectIds();
    for (const proc of [kubelet, containerd]) if (proc && !proc.exit) signalPid(proc.pid, "SIGKILL");
    for (let round = 0; round < 50; round++) {
      const left = liveProcesses();
      for (const pid of left) seen.add(pid);
      if (left.length === 0) break;
      for (const pid of left) signalPid(pid, "SIGKILL");
      sleepSync(100);
    }
    const stillAlive = liveProcesses();
    if (stillAlive.length > 0) problems.push(`processes still alive: ${stillAlive.join(", ")}`);

    // Deepest first: the kubelet bind-mounts its root dir onto itself, overlays and netns mounts sit below.
    for (let round = 0; round < 5; round++) {
      const points = mountsUnder(dir);
      if (points.length === 0) break;
      for (const point of points) {
        const result = spawnSync(tools.umount, [point], { encoding: "utf8" });
        if (result.status !== 0) spawnSync(tools.umount, ["-l", point], { encoding: "utf8" });
      }
    }
    const leftMounts = mountsUnder(dir);
    if (leftMounts.length > 0) problems.push(`mounts left: ${leftMounts.join(", ")}`);

    // A namespace's bridge is its owner's to remove (with the namespace).
    if (netns === undefined && spawnSync(tools.ip, ["link", "show", bridge], { stdio: "ignore" }).status === 0) {
      const del = spawnSync(tools.ip, ["link", "delete", bridge], { encoding: "utf8" });
      if (del.status !== 0) problems.push(`ip link delete ${bridge}: ${del.stderr}`);
    }

    for (let round = 0; round < 20; round++) {
      const groups = ourCgroups();
      if (groups.length === 0) break;
      for (const cg of groups) {
        try {
          rmdirSync(cg);
        } catch {
          // busy for a moment after its last process died; retried
        }
      }
      if (ourCgroups().length > 0) sleepSync(50);
    }
    const leftGroups = ourCgroups();
    if (leftGroups.length > 0) problems.push(`cgroups left: ${leftGroups.join(", ")}`);

    // Never recurse through a mount that refused to go away.
    if (leftMounts.length === 0) rmSync(dir, { recursive: true, force: true });
    const left = leaveShared(dir);
    problems.push(...left.problems);
    removeExitHook();
    finished = { lastRun: left.lastRun, otherRuns: left.otherRuns, originals: left.originals, problems };
    return finished;
  };

  // The test process may die without calling stop() (an exception in a hook, a signal): clean up at exit.
  const onExit = () => {
    finalCleanupSync();
  };
  const onSignal = (signal: NodeJS.Signals) => {
    finalCleanupSync();
    // As child-cleanup.ts does: restore the signal's default effect if nobody else handles it.
    if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
  };
  const signals = ["SIGINT", "SIGTERM", "SIGHUP"] as const;
  process.on("exit", onExit);
  for (const signal of signals) process.once(signal, onSignal);
  function removeExitHook(): void {
    process.off("exit", onExit);
    for (const signal of signals) process.off(signal, onSignal);
  }

  const stopKubelet = async (): Promise<void> => {
    const current = kubelet;
    if (!current) return;
    await terminate(current);
    kubelet = undefined;
  };

  const stop = (): Promise<NodeStopReport> => {
    stopping ??= (async () => {
      collectIds();
      // 1. Pods away while the kubelet still runs, so it stops their containers and tears their networks down.
      if (currentCluster && currentNode && kubelet && !kubelet.exit) {
        await currentCluster.kubectl(
          ["delete", "pods", "--all-namespaces", `--field-selector=spec.nodeName=${currentNode}`, "--grace-period=0", "--force", "--wait=false"],
          { timeoutMs: 10_000 },
        );
        const deadline = Date.now() + 8_000;
        while (Date.now() < deadline) {
          const tasks = await ctr(["tasks", "list", "--quiet"], { timeoutMs: 5_000 });
          if (tasks.code !== 0 || tasks.stdout.trim() === "") break;
          await sleep(250);
        }
      }
      await stopKubelet();
      if (currentCluster && currentNode) await currentCluster.kubectl(["delete", "node", currentNode, "--wait=false"], { timeoutMs: 10_000 });
      // 2. Whatever the kubelet left: kill tasks, delete them and their containers.
      if (containerd && !containerd.exit) {
        for (const pid of shimPids(socket)) seen.add(pid);
        const tasks = await ctr(["tasks", "list", "--quiet"], { timeoutMs: 5_000 });
        for (const id of tasks.stdout.split("\n").filter(Boolean)) {
          await ctr(["tasks", "kill", "--signal", "SIGKILL", id], { timeoutMs: 5_000 });
          await ctr(["tasks", "delete", "--force", id], { timeoutMs: 5_000 });
        }
        const containers = await ctr(["containers", "list", "--quiet"], { timeoutMs: 5_000 });
        for (const id of containers.stdout.split("\n").filter(Boolean)) {
          containerIds.add(id);
          await ctr(["containers", "delete", id], { timeoutMs: 5_000 });
        }
        for (const pid of shimPids(socket)) seen.add(pid);
        await terminate(containerd);
      }
      // 3. The rest: leftover shims and container processes, mounts, bridge, cgroups, sysctls, directories.
      const report = finalCleanupSync();
      if (report.problems.length > 0) throw new Error(`real node cleanup incomplete: ${report.problems.join("; ")}`);
      return report;
    })();
    return stopping;
  };

  try {
    // Files: CNI config, registry trust, the pause image.
    for (const sub of ["cni/net.d", "cni/ipam", "certs.d", "kubelet", "runc"]) mkdirSync(join(dir, sub), { recursive: true });
    writeFileSync(join(dir, "cni", "net.d", "10-imprimatur.conflist"), cniConflist(dir, `imprimatur-${runId}`, bridge, subnet, netns !== undefined));
    for (const registry of opts.registries) {
      const hostDir = join(dir, "certs.d", registry.host);
      mkdirSync(hostDir, { recursive: true });
      // A copy: the registry's own dir may go before this node does.
      copyFileSync(registry.caFile, join(hostDir, "ca.crt"));
      writeFileSync(join(hostDir, "hosts.toml"), hostsToml(registry.host, join(hostDir, "ca.crt")));
    }
    const pauseArchive = join(dir, "pause.tar");
    buildRunnableImage({
      tag: "pause",
      seed: "pause",
      entrypoint: ["/bin/sleep", "2147483647"],
      dir: join(dir, "pause-layout"),
      archive: { path: pauseArchive, importName: PAUSE_IMAGE },
    });
    const configPath = join(dir, "containerd.toml");
    writeFileSync(configPath, containerdConfig(dir, PAUSE_IMAGE));

    await startContainerd(configPath);
    const imported = await ctr(["images", "import", pauseArchive], { timeoutMs: 60_000 });
    if (imported.code !== 0) throw new Error(`ctr images import of the pause image failed: ${imported.stderr}`);
    const listed = await ctr(["images", "list", "--quiet"]);
    if (!listed.stdout.split("\n").includes(PAUSE_IMAGE)) throw new Error(`the pause image is not listed after import: ${listed.stdout}`);
  } catch (err) {
    await stop().catch(() => {});
    throw err;
  }

  const startKubelet = async (k: KubeletOptions): Promise<{ nodeName: string; pid: number; readyMs: number }> => {
    if (kubelet && !kubelet.exit) throw new Error("the kubelet is running; stopKubelet() first");
    if (stopping) throw new Error("the node runtime is stopped");
    const nodeName = k.nodeName ?? DEFAULT_NODE;
    const kubeconfig = k.cluster.nodeKubeconfig(nodeName);
    const started = Date.now();
    const [port, healthzPort] = await freePorts(2);
    const root = join(dir, "kubelet");
    const args = [
      `--kubeconfig=${kubeconfig}`,
      "--container-runtime=remote",
      `--container-runtime-endpoint=unix://${socket}`,
      `--image-service-endpoint=${k.imageServiceEndpoint ?? `unix://${socket}`}`,
      `--containerd=${socket}`,
      `--pod-infra-container-image=${PAUSE_IMAGE}`,
      `--hostname-override=${nodeName}`,
      "--register-node=true",
      `--root-dir=${join(root, "root")}`,
      `--cert-dir=${join(root, "pki")}`,
      `--volume-plugin-dir=${join(root, "volume-plugins")}`,
      "--fail-swap-on=false",
      "--cgroup-driver=cgroupfs",
      "--cgroups-per-qos=false",
      "--enforce-node-allocatable=",
      "--make-iptables-util-chains=false",
      "--address=127.0.0.1",
      `--port=${port}`,
      "--read-only-port=0",
      "--healthz-bind-address=127.0.0.1",
      `--healthz-port=${healthzPort}`,
      "--anonymous-auth=false",
      "--authentication-token-webhook=false",
      "--authorization-mode=AlwaysAllow",
      "--image-gc-high-threshold=100",
      "--image-gc-low-threshold=99",
      "--eviction-hard=",
      "--node-status-update-frequency=2s",
      "--v=2",
      ...(k.extraArgs ?? []),
    ];
    kubeletCount++;
    const proc = spawnLogged(`kubelet-${kubeletCount}`, tools.kubelet, args, dir, netns);
    kubelet = proc;
    seen.add(proc.pid);
    currentCluster = k.cluster;
    currentNode = nodeName;
    const fail = async (message: string): Promise<never> => {
      const log = tailFile(proc.logPath);
      // Stopped, so that the caller may try again (e.g. with another image-service endpoint).
      await stopKubelet();
      throw new Error(`${message}; kubelet log tail:\n${log}`);
    };

    // Ready with a heartbeat from this kubelet (a restarted one finds the previous Ready condition in place).
    const startSecond = Math.floor(started / 1000) * 1000;
    const deadline = started + START_DEADLINE_MS;
    let last = "no Node yet";
    for (;;) {
      if (proc.exit) return await fail(`the kubelet exited during start (${JSON.stringify(proc.exit)})`);
      const got = await k.cluster.kubectl(["get", "node", nodeName, "-o", "json"], { timeoutMs: 10_000 });
      if (got.code === 0) {
        const node = JSON.parse(got.stdout) as {
          status?: { conditions?: Array<{ type: string; status: string; lastHeartbeatTime?: string; message?: string }> };
        };
        const ready = node.status?.conditions?.find((c) => c.type === "Ready");
        if (ready?.status === "True" && Date.parse(ready.lastHeartbeatTime ?? "") >= startSecond) {
          return { nodeName, pid: proc.pid, readyMs: Date.now() - started };
        }
        last = ready ? `Ready=${ready.status}: ${ready.message ?? ""}` : "no Ready condition yet";
      }
      if (Date.now() > deadline) return await fail(`node ${nodeName} not Ready within ${START_DEADLINE_MS / 1000} s (${last})`);
      await sleep(200);
    }
  };

  return {
    dir,
    containerdSocket: socket,
    containerdEndpoint: `unix://${socket}`,
    pauseImage: PAUSE_IMAGE,
    bridge,
    subnet,
    ctr,
    startKubelet,
    stopKubelet,
    restartContainerd,
    pidsSeen: () => {
      if (!finished) for (const pid of liveProcesses()) seen.add(pid);
      return [...seen];
    },
    liveProcesses,
    mounts: () => mountsUnder(dir),
    cgroups: ourCgroups,
    otherRunsAtStart: joined.otherRuns,
    kubeletLogs: (lines = 60) => (kubelet ? tailFile(kubelet.logPath, lines) : "(no kubelet running)"),
    containerdLogs: (lines = 60) => (containerd ? tailFile(containerd.logPath, lines) : "(no containerd)"),
    stop,
  };
}

// ---------------------------------------------------------------------------------------------
// Pods

export interface PodManifestOptions {
  name: string;
  namespace: string;
  nodeName: string;
  image: string;
  imagePullPolicy?: "Always" | "IfNotPresent" | "Never";
  /** Names of kubernetes.io/dockerconfigjson secrets in the namespace. */
  imagePullSecrets?: string[];
  /** The pod's securityContext, e.g. { runAsNonRoot: true }. */
  securityContext?: Record<string, unknown>;
  /** The container's securityContext. */
  containerSecurityContext?: Record<string, unknown>;
  command?: string[];
  args?: string[];
  annotations?: Record<string, string>;
}

/** A Pod bound to nodeName (no scheduler), without service account token, that stops within a second. JSON. */
export function podManifest(o: PodManifestOptions): string {
  return JSON.stringify({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: o.name, namespace: o.namespace, ...(o.annotations ? { annotations: o.annotations } : {}) },
    spec: {
      nodeName: o.nodeName,
      automountServiceAccountToken: false,
      terminationGracePeriodSeconds: 1,
      restartPolicy: "Always",
      // There is no cluster DNS; "Default" (the node's resolv.conf) spares a MissingClusterDNS warning per pod.
      dnsPolicy: "Default",
      ...(o.imagePullSecrets ? { imagePullSecrets: o.imagePullSecrets.map((name) => ({ name })) } : {}),
      ...(o.securityContext ? { securityContext: o.securityContext } : {}),
      containers: [
        {
          name: "main",
          image: o.image,
          ...(o.imagePullPolicy ? { imagePullPolicy: o.imagePullPolicy } : {}),
          ...(o.command ? { command: o.command } : {}),
          ...(o.args ? { args: o.args } : {}),
          ...(o.containerSecurityContext ? { securityContext: o.containerSecurityContext } : {}),
        },
      ],
    },
  });
}

export interface PodEvent {
  type: string;
  reason: string;
  message: string;
  count: number;
}

export interface PodObservation {
  /** The Pod as the API returned it (null while it does not exist). */
  pod: any;
  phase: string;
  /** Waiting reasons of the containers, e.g. ["ErrImagePull"] or ["ImagePullBackOff"]. */
  waitingReasons: string[];
  /** The pod's events, oldest first. */
  events: PodEvent[];
}

/** Phase Running with every container running. */
export const podRunning = (o: PodObservation): boolean =>
  o.phase === "Running" && ((o.pod?.status?.containerStatuses ?? []) as Array<{ state?: { running?: unknown } }>).every((c) => c.state?.running !== undefined);

/** The kubelet gave up pulling: ErrImagePull or ImagePullBackOff. */
export const podPullFailed = (o: PodObservation): boolean => o.waitingReasons.some((r) => r === "ErrImagePull" || r === "ImagePullBackOff");

export async function observePod(cluster: KubeCluster, namespace: string, name: string): Promise<PodObservation> {
  const [got, events] = await Promise.all([
    cluster.kubectl(["get", "pod", name, "-n", namespace, "-o", "json"], { timeoutMs: 10_000 }),
    cluster.kubectl(["get", "events", "-n", namespace, `--field-selector=involvedObject.kind=Pod,involvedObject.name=${name}`, "-o", "json"], {
      timeoutMs: 10_000,
    }),
  ]);
  const pod = got.code === 0 ? JSON.parse(got.stdout) : null;
  const statuses = (pod?.status?.containerStatuses ?? []) as Array<{ state?: { waiting?: { reason?: string } } }>;
  const items =
    events.code === 0
      ? (JSON.parse(events.stdout).items as Array<{
          type?: string;
          reason?: string;
          message?: string;
          count?: number;
          firstTimestamp?: string;
          metadata?: { creationTimestamp?: string };
        }>)
      : [];
  const when = (e: (typeof items)[number]) => Date.parse(e.firstTimestamp ?? e.metadata?.creationTimestamp ?? "") || 0;
  return {
    pod,
    phase: pod?.status?.phase ?? (pod ? "Unknown" : "Absent"),
    waitingReasons: statuses.map((s) => s.state?.waiting?.reason).filter((r): r is string => typeof r === "string"),
    events: items.sort((a, b) => when(a) - when(b)).map((e) => ({ type: e.type ?? "", reason: e.reason ?? "", message: e.message ?? "", count: e.count ?? 1 })),
  };
}

/**
 * Polls the pod (and its events) until `until` holds, and returns that observation; throws after timeoutMs with
 * the last one (and `context()`, e.g. the kubelet's log) in the message.
 */
export async function waitForPod(
  cluster: KubeCluster,
  namespace: string,
  name: string,
  until: (o: PodObservation) => boolean,
  timeoutMs = 30_000,
  context?: () => string,
): Promise<PodObservation> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const o = await observePod(cluster, namespace, name);
    if (until(o)) return o;
    if (Date.now() > deadline) {
      const events = o.events.map((e) => `${e.type} ${e.reason}: ${e.message}`).join("\n  ");
      throw new Error(
        `pod ${namespace}/${name} did not reach the expected state within ${timeoutMs} ms: phase ${o.phase}, waiting ${JSON.stringify(o.waitingReasons)}\n` +
          `events:\n  ${events}${context ? `\n${context()}` : ""}`,
      );
    }
    await sleep(250);
  }
}

/**
 * Waits (45 s at most) until the kubelet gave up pulling the pod's image with a "Failed to pull image" event, and
 * asserts that the registry refused the pod's credentials (401) and that the pod does not run.
 */
export async function waitForPullRefused(cluster: KubeCluster, namespace: string, name: string, context?: () => string): Promise<PodObservation> {
  const failure = (x: PodObservation) => x.events.find((e) => e.reason === "Failed" && e.message.includes("Failed to pull image"));
  const seen = await waitForPod(cluster, namespace, name, (x) => podPullFailed(x) && failure(x) !== undefined, 45_000, context);
  assert.notEqual(seen.phase, "Running");
  assert.match(failure(seen)!.message, /401 Unauthorized/, "the registry refused the pod's credentials");
  return seen;
}

/** The current values of TOUCHED_SYSCTLS (a test records them before the node starts and compares after stop). */
export function sysctlValues(): Record<string, string | null> {
  return Object.fromEntries(TOUCHED_SYSCTLS.map((name) => [name, readSysctl(name)]));
}

/** Whether a network link exists. */
export function linkExists(name: string): boolean {
  return existsSync(join("/sys/class/net", name));
}
