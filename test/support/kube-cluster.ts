// End-to-end harness: a private etcd + kube-apiserver on loopback, driven with kubectl.
//
// Everything (etcd data, certificates, tokens, keys, kubeconfig, logs) lives in one private temp dir
// that stop() removes. The components come from scripts/provision-kube.sh (see kubeToolPaths()).
// There is no controller-manager, scheduler or kubelet: objects are stored and admitted, never run.

import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { generateKeyPairSync, randomBytes } from "node:crypto";
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { request as httpRequest } from "node:http";
import { request as httpsRequest } from "node:https";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { freePorts } from "./ports.ts";
import { installExitHooks, liveChildren, liveDirs } from "./child-cleanup.ts";
import { tailFile } from "./log-tail.ts";
import { describeExit, followExit, terminate } from "./logged-process.ts";
import { findCommand, isExecutable } from "./executables.ts";
import { recordPrivateKey, recordSecret, scanOutputsBeforeRemoval } from "./secret-ledger.ts";

export interface KubeToolPaths {
  etcd: string;
  apiserver: string;
  kubectl: string;
}

export interface ClusterOptions {
  /** Appended (deduplicated) to the default admission plugins, e.g. ["ImagePolicyWebhook"]. */
  enableAdmissionPlugins?: string[];
  /** AdmissionConfiguration text; written to the cluster dir and passed as --admission-control-config-file. */
  admissionConfigYaml?: string;
  /** Extra kube-apiserver flags, appended last (a repeated flag overrides the harness's value). */
  extraArgs?: string[];
  /** Node names that get a kubelet identity (user system:node:NAME in group system:nodes, a token each): see nodeKubeconfig. */
  nodes?: string[];
}

export interface KubectlResult {
  code: number;
  stdout: string;
  stderr: string;
}

export interface KubeCluster {
  /** Private temp dir with all state, certs and logs. */
  dir: string;
  /** https://127.0.0.1:<port> */
  url: string;
  /** Admin kubeconfig (bearer token in group system:masters, CA = the apiserver's self-generated cert). */
  kubeconfig: string;
  /** A kubeconfig with the node identity of `name` (one of ClusterOptions.nodes; the Node authorizer applies). */
  nodeKubeconfig(name: string): string;
  /** Process ids, so tests can check that stop() really ended them. */
  pids: { etcd: number; apiserver: number };
  /** Runs kubectl with --kubeconfig (and a private --cache-dir). Never rejects; a timeout gives code -1. */
  kubectl(args: string[], opts?: { input?: string; timeoutMs?: number }): Promise<KubectlResult>;
  /** kubectl apply -f - */
  apply(yaml: string): Promise<KubectlResult>;
  /** Tail of the apiserver's stderr, for assertion messages. */
  logs(): string;
  /** SIGTERM the apiserver, then etcd (by PID), wait for both to exit, remove dir. Idempotent. */
  stop(): Promise<void>;
}

const DEFAULT_ADMISSION_PLUGINS = ["NamespaceLifecycle", "LimitRanger", "DefaultStorageClass", "ResourceQuota"];
const START_DEADLINE_MS = 90_000;
const STOP_GRACE_MS = 15_000;
const KUBECTL_TIMEOUT_MS = 30_000;
const PORT_ATTEMPTS = 5;
const SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local";

// ---------------------------------------------------------------------------------------------
// Tool discovery

function findEtcd(): string {
  return isExecutable("/usr/bin/etcd") ? "/usr/bin/etcd" : (findCommand("etcd") ?? "/usr/bin/etcd");
}

/** Where scripts/provision-kube.sh put the components; throws, naming what is missing, if it has not run. */
export function kubeToolPaths(): KubeToolPaths {
  const cacheDir = process.env.IMPRIMATUR_CACHE || join(homedir(), ".cache", "imprimatur");
  const bin = join(cacheDir, "bin");
  const paths: KubeToolPaths = {
    etcd: findEtcd(),
    apiserver: join(bin, "kube-apiserver"),
    kubectl: join(bin, "kubectl"),
  };
  const missing = Object.entries(paths)
    .filter(([, path]) => !isExecutable(path))
    .map(([name, path]) => `${name} (${path})`);
  if (missing.length > 0) {
    throw new Error(
      `Kubernetes test components not found: ${missing.join(", ")}. ` +
        `Run scripts/provision-kube.sh first (once per machine; it installs etcd and caches ` +
        `kubectl and kube-apiserver under ${bin}).`,
    );
  }
  return paths;
}

// ---------------------------------------------------------------------------------------------
// Child processes, and killing them if the test process dies first

interface Proc {
  name: string;
  child: ChildProcess;
  pid: number;
  stderrPath: string;
  /** Set once the process has exited. */
  exit: { code: number | null; signal: NodeJS.Signals | null } | null;
  exited: Promise<void>;
}

function childEnv(dropPrefix?: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (dropPrefix !== undefined && key.startsWith(dropPrefix)) continue;
    if (key === "KUBECONFIG") continue;
    env[key] = value;
  }
  return env;
}

function spawnLogged(name: string, bin: string, args: string[], dir: string, env: NodeJS.ProcessEnv): Proc {
  const stdoutPath = join(dir, `${name}.stdout.log`);
  const stderrPath = join(dir, `${name}.stderr.log`);
  writeFileSync(join(dir, `${name}.cmdline`), [bin, ...args].join("\n") + "\n");
  const out = openSync(stdoutPath, "w");
  const err = openSync(stderrPath, "w");
  let child: ChildProcess;
  try {
    child = spawn(bin, args, { cwd: dir, env, detached: false, stdio: ["ignore", out, err] });
  } finally {
    closeSync(out);
    closeSync(err);
  }
  if (child.pid === undefined) {
    throw new Error(`could not start ${name} (${bin})`);
  }
  liveChildren.add(child);
  return followExit<Proc>({ name, child, pid: child.pid, stderrPath, exit: null, exited: Promise.resolve() });
}

// ---------------------------------------------------------------------------------------------
// HTTP probes

function probe(url: string, opts: { ca?: string; token?: string; timeoutMs?: number } = {}): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const request = url.startsWith("https:") ? httpsRequest : httpRequest;
    const headers: Record<string, string> = {};
    if (opts.token) headers.authorization = `Bearer ${opts.token}`;
    const req = request(url, { method: "GET", headers, ca: opts.ca, timeout: opts.timeoutMs ?? 2_000 }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (chunk: Buffer) => chunks.push(chunk));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString("utf8") }));
      res.on("error", reject);
    });
    req.on("timeout", () => req.destroy(new Error(`timeout requesting ${url}`)));
    req.on("error", reject);
    req.end();
  });
}

// ---------------------------------------------------------------------------------------------
// etcd

async function startEtcd(paths: KubeToolPaths, dir: string, deadline: number): Promise<{ proc: Proc; url: string }> {
  const dataDir = join(dir, "etcd-data");
  for (let attempt = 1; ; attempt++) {
    const [clientPort, peerPort] = await freePorts(2);
    const clientUrl = `http://127.0.0.1:${clientPort}`;
    const peerUrl = `http://127.0.0.1:${peerPort}`;
    rmSync(dataDir, { recursive: true, force: true });
    const proc = spawnLogged(
      "etcd",
      paths.etcd,
      [
        "--name=imprimatur-e2e",
        `--data-dir=${dataDir}`,
        `--listen-client-urls=${clientUrl}`,
        `--advertise-client-urls=${clientUrl}`,
        `--listen-peer-urls=${peerUrl}`,
        `--initial-advertise-peer-urls=${peerUrl}`,
        `--initial-cluster=imprimatur-e2e=${peerUrl}`,
        "--initial-cluster-state=new",
        "--logger=zap",
        "--log-outputs=stderr",
      ],
      dir,
      // etcd also reads ETCD_* variables; the test process's must not leak in.
      childEnv("ETCD_"),
    );
    while (!proc.exit) {
      try {
        const health = await probe(`${clientUrl}/health`, { timeoutMs: 1_000 });
        if (health.status === 200 && (JSON.parse(health.body) as { health?: string }).health === "true") {
          return { proc, url: clientUrl };
        }
      } catch {
        // not listening yet
      }
      if (Date.now() > deadline) {
        await terminate(proc, STOP_GRACE_MS);
        throw new Error(`etcd did not become healthy in time; etcd log:\n${tailFile(proc.stderrPath)}`);
      }
      await sleep(100);
    }
    const log = tailFile(proc.stderrPath);
    if (attempt < PORT_ATTEMPTS && /address already in use/i.test(log)) continue;
    throw new Error(`etcd exited (${describeExit(proc)}) before becoming healthy; etcd log:\n${log}`);
  }
}

// ---------------------------------------------------------------------------------------------
// kube-apiserver

/** The apiserver writes apiserver.crt (serving cert + its own CA) into --cert-dir; null until complete. */
export function readCaBundle(certDir: string): string | null {
  let pem: string;
  try {
    pem = readFileSync(join(certDir, "apiserver.crt"), "utf8");
  } catch {
    return null;
  }
  const begins = pem.match(/-----BEGIN CERTIFICATE-----/g)?.length ?? 0;
  const ends = pem.match(/-----END CERTIFICATE-----/g)?.length ?? 0;
  return begins > 0 && begins === ends ? pem : null;
}

function kubeconfigYaml(url: string, caPem: string, token: string): string {
  // JSON strings are valid YAML double-quoted scalars.
  const q = (s: string) => JSON.stringify(s);
  return [
    "apiVersion: v1",
    "kind: Config",
    "clusters:",
    "- name: imprimatur-e2e",
    "  cluster:",
    `    server: ${q(url)}`,
    `    certificate-authority-data: ${q(Buffer.from(caPem).toString("base64"))}`,
    "users:",
    "- name: admin",
    "  user:",
    `    token: ${q(token)}`,
    "contexts:",
    "- name: imprimatur-e2e",
    "  context:",
    "    cluster: imprimatur-e2e",
    "    user: admin",
    "current-context: imprimatur-e2e",
    "",
  ].join("\n");
}

function runKubectl(
  bin: string,
  kubeconfig: string,
  cacheDir: string,
  args: string[],
  opts: { input?: string; timeoutMs?: number } = {},
): Promise<KubectlResult> {
  return new Promise((resolve) => {
    const timeoutMs = opts.timeoutMs ?? KUBECTL_TIMEOUT_MS;
    const child = spawn(bin, ["--kubeconfig", kubeconfig, `--cache-dir=${cacheDir}`, ...args], {
      env: childEnv(),
      stdio: ["pipe", "pipe", "pipe"],
    });
    liveChildren.add(child);
    const stdout: Buffer[] = [];
    const stderr: Buffer[] = [];
    let timedOut = false;
    let spawnError: Error | undefined;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill("SIGKILL");
    }, timeoutMs);
    child.stdout.on("data", (chunk: Buffer) => stdout.push(chunk));
    child.stderr.on("data", (chunk: Buffer) => stderr.push(chunk));
    child.stdin.on("error", () => {
      // kubectl may exit without reading its input (EPIPE); the exit code tells the story.
    });
    child.on("error", (err) => {
      spawnError = err;
    });
    child.on("close", (code) => {
      clearTimeout(timer);
      liveChildren.delete(child);
      let err = Buffer.concat(stderr).toString("utf8");
      if (timedOut) err += `\n[kube-cluster] kubectl ${args.join(" ")} timed out after ${timeoutMs} ms`;
      if (spawnError) err += `\n[kube-cluster] ${spawnError.message}`;
      resolve({ code: timedOut || code === null ? -1 : code, stdout: Buffer.concat(stdout).toString("utf8"), stderr: err });
    });
    child.stdin.end(opts.input ?? "");
  });
}

interface ApiserverFiles {
  certDir: string;
  tokenFile: string;
  saPublicKey: string;
  saPrivateKey: string;
  admissionConfig: string | undefined;
}

function apiserverArgs(port: number, etcdUrl: string, files: ApiserverFiles, opts: ClusterOptions): string[] {
  const plugins = [...new Set([...DEFAULT_ADMISSION_PLUGINS, ...(opts.enableAdmissionPlugins ?? [])])];
  return [
    `--etcd-servers=${etcdUrl}`,
    "--bind-address=127.0.0.1",
    "--advertise-address=127.0.0.1",
    `--secure-port=${port}`,
    `--cert-dir=${files.certDir}`,
    `--token-auth-file=${files.tokenFile}`,
    "--authorization-mode=Node,RBAC",
    `--service-account-issuer=${SERVICE_ACCOUNT_ISSUER}`,
    `--api-audiences=${SERVICE_ACCOUNT_ISSUER}`,
    `--service-account-key-file=${files.saPublicKey}`,
    `--service-account-signing-key-file=${files.saPrivateKey}`,
    "--service-cluster-ip-range=10.0.0.0/24",
    `--enable-admission-plugins=${plugins.join(",")}`,
    "--disable-admission-plugins=ServiceAccount",
    ...(files.admissionConfig ? [`--admission-control-config-file=${files.admissionConfig}`] : []),
    "--allow-privileged=true",
    // With --advertise-address=127.0.0.1 the default "lease" reconciler fails every 10 s writing the
    // kubernetes Endpoints ("may not be in the loopback range"); nothing here needs those endpoints.
    "--endpoint-reconciler-type=none",
    "-v=2",
    ...(opts.extraArgs ?? []),
  ];
}

/** Starts etcd and kube-apiserver and resolves once /readyz is 200 and the default namespace exists. */
export async function startKubeCluster(opts: ClusterOptions = {}): Promise<KubeCluster> {
  const paths = kubeToolPaths();
  const deadline = Date.now() + START_DEADLINE_MS;
  installExitHooks();

  const dir = mkdtempSync(join(tmpdir(), "imprimatur-kube-"));
  liveDirs.add(dir);
  let etcd: Proc | undefined;
  let apiserver: Proc | undefined;

  const abandon = async (error: Error): Promise<never> => {
    if (apiserver) await terminate(apiserver, STOP_GRACE_MS);
    if (etcd) await terminate(etcd, STOP_GRACE_MS);
    liveDirs.delete(dir);
    rmSync(dir, { recursive: true, force: true });
    throw error;
  };

  try {
    // Credentials and configuration files.
    const token = randomBytes(24).toString("hex");
    recordSecret("the apiserver admin token", token);
    const files: ApiserverFiles = {
      certDir: join(dir, "certs"),
      tokenFile: join(dir, "tokens.csv"),
      saPublicKey: join(dir, "sa.pub"),
      saPrivateKey: join(dir, "sa.key"),
      admissionConfig: opts.admissionConfigYaml === undefined ? undefined : join(dir, "admission-config.yaml"),
    };
    mkdirSync(files.certDir, { mode: 0o700 });
    const nodeTokens = new Map((opts.nodes ?? []).map((name) => [name, randomBytes(24).toString("hex")]));
    for (const t of nodeTokens.values()) recordSecret("an apiserver node token", t);
    const nodeLines = [...nodeTokens].map(([name, t]) => `${t},system:node:${name},node-${name}-uid,"system:nodes"\n`);
    writeFileSync(files.tokenFile, `${token},admin,admin-uid,"system:masters"\n${nodeLines.join("")}`, { mode: 0o600 });
    const { publicKey, privateKey } = generateKeyPairSync("rsa", {
      modulusLength: 2048,
      publicKeyEncoding: { type: "spki", format: "pem" },
      privateKeyEncoding: { type: "pkcs1", format: "pem" },
    });
    writeFileSync(files.saPublicKey, publicKey);
    recordPrivateKey(privateKey, "the service-account signing key");
    writeFileSync(files.saPrivateKey, privateKey, { mode: 0o600 });
    if (files.admissionConfig !== undefined) writeFileSync(files.admissionConfig, opts.admissionConfigYaml ?? "");
    const kubeconfig = join(dir, "admin.kubeconfig");
    const kubectlCache = join(dir, "kubectl-cache");

    const started = await startEtcd(paths, dir, deadline);
    etcd = started.proc;

    for (let attempt = 1; ; attempt++) {
      const [port] = await freePorts(1);
      const url = `https://127.0.0.1:${port}`;
      apiserver = spawnLogged("apiserver", paths.apiserver, apiserverArgs(port!, started.url, files, opts), dir, childEnv());
      const current = apiserver;
      let lastState = "no response yet";
      let kubeconfigWritten = false;

      while (!current.exit) {
        if (Date.now() > deadline) {
          return await abandon(
            new Error(`kube-apiserver not ready within ${START_DEADLINE_MS / 1000} s (${lastState}); apiserver log tail:\n` + tailFile(current.stderrPath)),
          );
        }
        const ca = readCaBundle(files.certDir);
        if (ca === null) {
          lastState = "serving certificate not written yet";
        } else if (!kubeconfigWritten) {
          try {
            const ready = await probe(`${url}/readyz?verbose`, { ca, token });
            if (ready.status === 200) {
              writeFileSync(kubeconfig, kubeconfigYaml(url, ca, token), { mode: 0o600 });
              for (const [name, t] of nodeTokens) writeFileSync(join(dir, `node-${name}.kubeconfig`), kubeconfigYaml(url, ca, t), { mode: 0o600 });
              kubeconfigWritten = true;
            } else {
              lastState = `/readyz returned ${ready.status}: ${ready.body
                .split("\n")
                .filter((l) => l.startsWith("[-]"))
                .join("; ")}`;
            }
          } catch (err) {
            lastState = `/readyz: ${(err as Error).message}`;
          }
        }
        if (kubeconfigWritten) {
          const ns = await runKubectl(paths.kubectl, kubeconfig, kubectlCache, ["get", "namespace", "default", "-o", "name"], {
            timeoutMs: 10_000,
          });
          if (ns.code === 0) {
            return makeCluster(dir, url, kubeconfig, kubectlCache, paths, etcd, current);
          }
          lastState = `kubectl get namespace default: ${ns.stderr.trim()}`;
        }
        await sleep(kubeconfigWritten ? 200 : 250);
      }

      const log = tailFile(current.stderrPath);
      if (attempt < PORT_ATTEMPTS && /address already in use/i.test(log)) continue;
      return await abandon(new Error(`kube-apiserver exited (${describeExit(current)}) during start; apiserver log tail:\n${log}`));
    }
  } catch (err) {
    if (liveDirs.has(dir)) return await abandon(err as Error);
    throw err;
  }
}

function makeCluster(dir: string, url: string, kubeconfig: string, kubectlCache: string, paths: KubeToolPaths, etcd: Proc, apiserver: Proc): KubeCluster {
  let stopping: Promise<void> | undefined;
  const kubectl = (args: string[], opts?: { input?: string; timeoutMs?: number }) => runKubectl(paths.kubectl, kubeconfig, kubectlCache, args, opts);
  return {
    dir,
    url,
    kubeconfig,
    nodeKubeconfig: (name: string) => {
      const path = join(dir, `node-${name}.kubeconfig`);
      if (!existsSync(path)) throw new Error(`no node identity for ${name}: start the cluster with nodes: [${JSON.stringify(name)}]`);
      return path;
    },
    pids: { etcd: etcd.pid, apiserver: apiserver.pid },
    kubectl,
    apply: (yaml: string) => kubectl(["apply", "-f", "-"], { input: yaml }),
    logs: () => tailFile(apiserver.stderrPath),
    stop: () => {
      stopping ??= (async () => {
        await terminate(apiserver, STOP_GRACE_MS);
        await terminate(etcd, STOP_GRACE_MS);
        scanOutputsBeforeRemoval(
          ["apiserver", "etcd"].flatMap((name) => [join(dir, `${name}.stdout.log`), join(dir, `${name}.stderr.log`)]),
          "kube-cluster",
        );
        liveDirs.delete(dir);
        rmSync(dir, { recursive: true, force: true });
      })();
      return stopping;
    },
  };
}

/**
 * Webhook configurations take effect asynchronously: repeats a server-side dry run of `input` until `ready`
 * says the webhook answered it (≈ 20 s at most), else fails with `context()` (e.g. the server's log).
 */
export async function untilWebhookActive(
  cluster: KubeCluster,
  input: string,
  ready: (probe: KubectlResult) => boolean,
  opts: { extraArgs?: string[]; context?: () => Promise<string> } = {},
): Promise<void> {
  for (let i = 0; ; i++) {
    const probe = await cluster.kubectl(["create", "--dry-run=server", ...(opts.extraArgs ?? []), "-f", "-"], { input });
    if (ready(probe)) return;
    if (i > 100) throw new Error(`the webhook never took effect: ${probe.stderr} ${(await opts.context?.()) ?? ""}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** A rule of a webhook configuration: these operations on `resource` (core "pods", "namespaces", or "apps/deployments"). */
export function webhookRule(resource: string, operations: string[] = ["CREATE"]) {
  const [group, plural] = resource.includes("/") ? resource.split("/", 2) : ["", resource];
  return { apiGroups: [group!], apiVersions: ["v1"], operations, resources: [plural!], scope: plural === "namespaces" ? "Cluster" : "Namespaced" };
}

/**
 * A ValidatingWebhookConfiguration (as JSON for `apply`) with one fail-closed webhook that sends `rules` to a
 * server's /validate by URL, trusting its CA, for namespaces that `namespaceSelector` selects.
 */
export function validatingWebhookConfiguration(
  server: { baseUrl: string; ca: string },
  opts: {
    name: string;
    rules: ReturnType<typeof webhookRule>[];
    namespaceSelector: Record<string, unknown>;
    webhookName?: string;
    sideEffects?: "None" | "NoneOnDryRun";
  },
): string {
  const webhook = urlWebhook(opts.webhookName ?? "validate.imprimatur.dev", `${server.baseUrl}/validate`, {
    caPem: server.ca,
    rules: opts.rules,
    namespaceSelector: opts.namespaceSelector,
    ...(opts.sideEffects ? { sideEffects: opts.sideEffects } : {}),
  });
  return webhookConfiguration("ValidatingWebhookConfiguration", opts.name, [webhook]);
}

/**
 * One webhook of a configuration written by hand, calling `url` (its certificate checked against `caPem` when given,
 * else against the apiserver's own trust): AdmissionReview v1, fail-closed within 10 s, side effects None unless said.
 */
export function urlWebhook(
  name: string,
  url: string,
  opts: { caPem?: string; rules: unknown[]; namespaceSelector?: Record<string, unknown>; sideEffects?: "None" | "NoneOnDryRun" },
): Record<string, unknown> {
  return {
    name,
    admissionReviewVersions: ["v1"],
    sideEffects: opts.sideEffects ?? "None",
    failurePolicy: "Fail",
    timeoutSeconds: 10,
    clientConfig: { url, ...(opts.caPem !== undefined ? { caBundle: Buffer.from(opts.caPem).toString("base64") } : {}) },
    rules: opts.rules,
    ...(opts.namespaceSelector ? { namespaceSelector: opts.namespaceSelector } : {}),
  };
}

/** A Validating- or MutatingWebhookConfiguration named `name` with these webhooks, as JSON for `apply`. */
export function webhookConfiguration(
  kind: "ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration",
  name: string,
  webhooks: Array<Record<string, unknown>>,
): string {
  return JSON.stringify({ apiVersion: "admissionregistration.k8s.io/v1", kind, metadata: { name }, webhooks });
}

/** Creates a kubernetes.io/dockerconfigjson Secret for `registry` with its first user and `password` (a wrong one, say). */
export async function createPullSecret(
  cluster: KubeCluster,
  namespace: string,
  name: string,
  registry: { host: string; username: string },
  password: string,
): Promise<void> {
  recordSecret("a registry password", password);
  const r = await cluster.kubectl([
    "create",
    "secret",
    "docker-registry",
    name,
    "-n",
    namespace,
    `--docker-server=${registry.host}`,
    `--docker-username=${registry.username}`,
    `--docker-password=${password}`,
  ]);
  if (r.code !== 0) throw new Error(`kubectl create secret ${name}: ${r.stderr}`);
}
