// End-to-end harness: a whole small Kubernetes cluster on this machine, in a network namespace of its own.
//
// etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kube-proxy, and one node (containerd + the
// kubelet + the CNI bridge, from real-node.ts) all run under `nsenter --net=/run/netns/NAME`, so Deployments
// create pods, pods are scheduled, Services get endpoints and Service IPs answer, while nothing of the cluster
// listens on, or sends to, the host's network. Test registries started on the host's loopback (registry.ts)
// are relayed into the namespace at the same address (netns-forward.ts), so their certificates stay valid.
// kubectl runs inside the namespace too (SmallCluster.kubectl).
//
// The flags that make this work are explained where they are set, and in docs/CONTRIBUTING.md ("Small cluster").
// stop() leaves the machine as it was: the processes (by PID), the node's mounts, cgroups, sysctls and host
// directories (real-node.ts), the relays, the namespace (with its bridge, routes and kube-proxy's iptables
// rules) and the temp dir. Needs root. The components come from scripts/provision-kube.sh and provision-node.sh.

import { generateKeyPairSync, randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { installExitHooks, liveDirs } from "./child-cleanup.ts";
import { isExecutable } from "./executables.ts";
import type { KubeCluster, KubectlResult } from "./kube-cluster.ts";
import { kubeToolPaths, readCaBundle } from "./kube-cluster.ts";
import { tailFile } from "./log-tail.ts";
import { describeExit, spawnLogged, terminate, type LoggedProcess } from "./logged-process.ts";
import { recordPrivateKey, recordSecret } from "./secret-ledger.ts";
import { forwardIntoNetns, type NetnsForward } from "./netns-forward.ts";
import { createNetnsWithBridge, deleteNetns, netnsExists, runInNetns } from "./netns.ts";
import { nodeToolPaths, startNodeRuntime, type NodeRuntime, type NodeStopReport } from "./real-node.ts";

export interface SmallClusterOptions {
  /** Registries on the host's loopback ("127.0.0.1:PORT") that the node pulls from: relayed into the namespace, trusted with their CA. */
  registries?: Array<{ host: string; caFile: string }>;
  /** Added to kube-apiserver's --enable-admission-plugins (its defaults stay on: ServiceAccount, the webhooks, …). */
  enableAdmissionPlugins?: string[];
  /** AdmissionConfiguration text; written to the cluster dir and passed as --admission-control-config-file. */
  admissionConfigYaml?: string;
  /** Extra kube-apiserver flags, appended last (a repeated flag overrides the harness's value). */
  apiserverArgs?: string[];
}

export interface SmallCluster extends KubeCluster {
  /** The network namespace everything runs in (/run/netns/NAME). */
  netns: string;
  /** The bridge's address: the apiserver, the kubelet and kube-proxy listen there; pods route through it. */
  gateway: string;
  /** The pods' subnet on the bridge, e.g. "10.88.77.0/24". */
  podSubnet: string;
  /** Service IPs; its first address is the `kubernetes` Service. */
  serviceCidr: string;
  /** The one node's name. */
  nodeName: string;
  node: NodeRuntime;
  /** PIDs of the components (the node's containerd and shims: node.pidsSeen()). */
  componentPids: Record<"etcd" | "apiserver" | "controllerManager" | "scheduler" | "kubeProxy" | "kubelet", number>;
  /** How long start took, for the report (never asserted). */
  startMs: number;
  /** Runs a program inside the namespace to completion (e.g. iptables-save). Never rejects. */
  exec(bin: string, args: string[], opts?: { timeoutMs?: number; input?: string }): Promise<KubectlResult>;
  /** Creates a namespace and waits until its `default` ServiceAccount has a token (pods can be created then). */
  createNamespace(name: string, labels?: Record<string, string>): Promise<void>;
  /** The tail of a component's log. */
  componentLogs(name: "etcd" | "apiserver" | "controller-manager" | "scheduler" | "kube-proxy" | "kubelet" | "containerd", lines?: number): string;
  /** Tears everything down (see the file comment); rejects naming what could not be undone. Idempotent. */
  stop(): Promise<void>;
  /** The node's report (real-node.ts), once stop() has run. */
  nodeStopReport(): NodeStopReport | undefined;
}

export interface SmallClusterToolPaths {
  etcd: string;
  apiserver: string;
  controllerManager: string;
  scheduler: string;
  kubeProxy: string;
  kubectl: string;
  iptables: string;
}

const NODE_NAME = "node1";
// Inside a namespace of its own the cluster may use fixed addresses and ports: nothing else is there.
const GATEWAY = "10.88.77.1";
const POD_SUBNET = "10.88.77.0/24";
const SERVICE_CIDR = "10.96.0.0/24";
const APISERVER_PORT = 6443;
const ETCD_CLIENT = "http://127.0.0.1:2379";
const ETCD_PEER = "http://127.0.0.1:2380";
const START_DEADLINE_MS = 120_000;
const STOP_GRACE_MS = 15_000;
const KUBECTL_TIMEOUT_MS = 30_000;
const SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local";

/** Where scripts/provision-kube.sh put the control plane; throws, naming what is missing, if it has not run. */
export function smallClusterToolPaths(): SmallClusterToolPaths {
  const kube = kubeToolPaths();
  const bin = join(process.env.IMPRIMATUR_CACHE || join(homedir(), ".cache", "imprimatur"), "bin");
  const paths: SmallClusterToolPaths = {
    etcd: kube.etcd,
    apiserver: kube.apiserver,
    kubectl: kube.kubectl,
    controllerManager: join(bin, "kube-controller-manager"),
    scheduler: join(bin, "kube-scheduler"),
    kubeProxy: join(bin, "kube-proxy"),
    iptables: "/usr/sbin/iptables",
  };
  const missing = Object.entries(paths)
    .filter(([, path]) => !isExecutable(path))
    .map(([name, path]) => `${name} (${path})`);
  if (missing.length > 0) {
    throw new Error(
      `small-cluster components not found: ${missing.join(", ")}. Run scripts/provision-kube.sh and scripts/provision-node.sh first (once per machine).`,
    );
  }
  return paths;
}

function childEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    // etcd reads ETCD_*; kubectl and the components' client libraries KUBECONFIG.
    if (key.startsWith("ETCD_") || key === "KUBECONFIG") continue;
    env[key] = value;
  }
  return env;
}

function kubeconfigYaml(server: string, caPem: string, user: string, token: string): string {
  const q = (s: string) => JSON.stringify(s); // JSON strings are YAML double-quoted scalars
  return [
    "apiVersion: v1",
    "kind: Config",
    "clusters:",
    "- name: small-cluster",
    "  cluster:",
    `    server: ${q(server)}`,
    `    certificate-authority-data: ${q(Buffer.from(caPem).toString("base64"))}`,
    "users:",
    `- name: ${q(user)}`,
    "  user:",
    `    token: ${q(token)}`,
    "contexts:",
    "- name: small-cluster",
    "  context:",
    "    cluster: small-cluster",
    `    user: ${q(user)}`,
    "current-context: small-cluster",
    "",
  ].join("\n");
}

/** The identities of the components: each authenticates with a static token as the user bootstrap RBAC expects. */
const IDENTITIES = {
  admin: { user: "admin", groups: ["system:masters"] },
  node: { user: `system:node:${NODE_NAME}`, groups: ["system:nodes"] },
  controllerManager: { user: "system:kube-controller-manager", groups: [] },
  scheduler: { user: "system:kube-scheduler", groups: [] },
  kubeProxy: { user: "system:kube-proxy", groups: [] },
} as const;
type Identity = keyof typeof IDENTITIES;

export async function startSmallCluster(opts: SmallClusterOptions = {}): Promise<SmallCluster> {
  const tools = smallClusterToolPaths();
  nodeToolPaths(); // fail early, naming what is missing
  installExitHooks();
  const started = Date.now();
  const deadline = started + START_DEADLINE_MS;
  const runId = randomBytes(4).toString("hex");
  const netns = `imprimatur-${runId}`;
  const bridge = `impr${runId}`; // ≤ 15 characters (IFNAMSIZ)
  const dir = mkdtempSync(join(tmpdir(), "imprimatur-cluster-"));
  liveDirs.add(dir);
  const server = `https://${GATEWAY}:${APISERVER_PORT}`;
  const certDir = join(dir, "certs");
  const kubectlCache = join(dir, "kubectl-cache");
  const kubeconfigs = Object.fromEntries(Object.keys(IDENTITIES).map((id) => [id, join(dir, `${id}.kubeconfig`)])) as Record<Identity, string>;
  const tokens = Object.fromEntries(Object.keys(IDENTITIES).map((id) => [id, randomBytes(24).toString("hex")])) as Record<Identity, string>;
  for (const token of Object.values(tokens)) recordSecret("an apiserver token", token);

  const procs = new Map<string, LoggedProcess>();
  const forwards: NetnsForward[] = [];
  let node: NodeRuntime | undefined;
  /** The node starts beside the control plane; a stop() during start waits for it, so that it stops too. */
  let nodeStarting: Promise<NodeRuntime | undefined> = Promise.resolve(undefined);
  let nodeReport: NodeStopReport | undefined;
  let stopping: Promise<void> | undefined;

  const start = (name: string, bin: string, args: string[]): LoggedProcess => {
    const proc = spawnLogged(name, bin, args, { dir, env: childEnv(), netns, killAtExit: true });
    procs.set(name, proc);
    return proc;
  };
  const exec = async (bin: string, args: string[], o: { timeoutMs?: number; input?: string } = {}): Promise<KubectlResult> => {
    const out = await runInNetns(netns, bin, args, {
      env: childEnv(),
      timeoutMs: o.timeoutMs ?? KUBECTL_TIMEOUT_MS,
      input: o.input,
      label: `[small-cluster] ${bin}`,
    });
    return { code: out.code, stdout: out.stdout.toString("utf8"), stderr: out.stderr };
  };
  const kubectl = (args: string[], o: { input?: string; timeoutMs?: number } = {}) =>
    exec(tools.kubectl, ["--kubeconfig", kubeconfigs.admin, `--cache-dir=${kubectlCache}`, ...args], o);
  const logOf = (name: string, lines = 60) => {
    const proc = procs.get(name);
    return proc ? tailFile(proc.logPath, lines) : `(no ${name})`;
  };

  // What the kubelet needs of the cluster (real-node.ts): its identity, and kubectl for its readiness.
  const controlPlane: KubeCluster = {
    dir,
    url: server,
    kubeconfig: kubeconfigs.admin,
    nodeKubeconfig: (name: string) => {
      if (name !== NODE_NAME) throw new Error(`the small cluster has one node, ${NODE_NAME}`);
      return kubeconfigs.node;
    },
    get pids() {
      return { etcd: procs.get("etcd")?.pid ?? 0, apiserver: procs.get("apiserver")?.pid ?? 0 };
    },
    kubectl,
    apply: (yaml: string) => kubectl(["apply", "-f", "-"], { input: yaml }),
    logs: () => logOf("apiserver"),
    stop: () => stop(),
  };
  let kubeletPid: number | undefined;

  // The namespace goes even if the test process dies without stop(); its processes are killed by child-cleanup.ts.
  const onExit = () => void deleteNetns(netns);
  process.on("exit", onExit);

  const stop = (): Promise<void> => {
    stopping ??= (async () => {
      const problems: string[] = [];
      // Controllers first, so that nothing recreates the pods the node deletes on its way down.
      await Promise.all(["controller-manager", "scheduler"].map((name) => procs.get(name)).map((p) => (p ? terminate(p, STOP_GRACE_MS) : undefined)));
      await nodeStarting;
      if (node) {
        try {
          nodeReport = await node.stop();
        } catch (err) {
          problems.push((err as Error).message);
        }
      }
      const proxy = procs.get("kube-proxy");
      if (proxy) await terminate(proxy, STOP_GRACE_MS);
      // The apiserver before etcd: without etcd it waits ~30 s in its shutdown.
      const apiserver = procs.get("apiserver");
      if (apiserver) await terminate(apiserver, STOP_GRACE_MS);
      const etcd = procs.get("etcd");
      if (etcd) await terminate(etcd, STOP_GRACE_MS);
      await Promise.all(forwards.map((f) => f.stop()));
      const netnsProblem = deleteNetns(netns);
      if (netnsProblem) problems.push(netnsProblem);
      process.off("exit", onExit);
      liveDirs.delete(dir);
      rmSync(dir, { recursive: true, force: true });
      if (problems.length > 0) throw new Error(`small cluster cleanup incomplete: ${problems.join("; ")}`);
    })();
    return stopping;
  };

  const failStart = async (message: string, component?: string): Promise<never> => {
    const log = component ? `\n${component} log tail:\n${logOf(component)}` : "";
    await stop().catch(() => {});
    throw new Error(`small cluster did not start: ${message}${log}`);
  };
  const alive = (name: string) => {
    const proc = procs.get(name);
    if (proc?.exit) throw new ComponentExited(name, describeExit(proc));
  };

  try {
    createNetnsWithBridge(netns, bridge, `${GATEWAY}/24`);
    for (const registry of opts.registries ?? []) {
      const port = Number(/^127\.0\.0\.1:(\d+)$/.exec(registry.host)?.[1]);
      if (!Number.isInteger(port) || port <= 0)
        throw new Error(`registry host ${registry.host}: only 127.0.0.1:PORT registries can be relayed into the namespace`);
      forwards.push(await forwardIntoNetns(netns, port, dir));
    }
    // containerd starts while the control plane does.
    const starting = startNodeRuntime({ registries: opts.registries ?? [], network: { netns, bridge, subnet: POD_SUBNET } });
    nodeStarting = starting.then(
      (started) => (node = started),
      () => undefined, // its error is thrown where start awaits it
    );

    // Credentials: static tokens for the components, the service-account key pair.
    mkdirSync(certDir, { mode: 0o700 });
    const tokenFile = join(dir, "tokens.csv");
    writeFileSync(
      tokenFile,
      (Object.keys(IDENTITIES) as Identity[]).map((id) => `${tokens[id]},${IDENTITIES[id].user},${id}-uid,"${IDENTITIES[id].groups.join(",")}"\n`).join(""),
      { mode: 0o600 },
    );
    const saKey = join(dir, "sa.key");
    const saPub = join(dir, "sa.pub");
    const { publicKey, privateKey } = generateKeyPairSync("rsa", {
      modulusLength: 2048,
      publicKeyEncoding: { type: "spki", format: "pem" },
      privateKeyEncoding: { type: "pkcs1", format: "pem" },
    });
    writeFileSync(saPub, publicKey);
    recordPrivateKey(privateKey, "the service-account signing key");
    writeFileSync(saKey, privateKey, { mode: 0o600 });
    const admissionConfig = opts.admissionConfigYaml === undefined ? undefined : join(dir, "admission-config.yaml");
    if (admissionConfig) writeFileSync(admissionConfig, opts.admissionConfigYaml ?? "");

    start("etcd", tools.etcd, [
      "--name=small-cluster",
      `--data-dir=${join(dir, "etcd-data")}`,
      `--listen-client-urls=${ETCD_CLIENT}`,
      `--advertise-client-urls=${ETCD_CLIENT}`,
      `--listen-peer-urls=${ETCD_PEER}`,
      `--initial-advertise-peer-urls=${ETCD_PEER}`,
      `--initial-cluster=small-cluster=${ETCD_PEER}`,
      "--initial-cluster-state=new",
      "--logger=zap",
      "--log-outputs=stderr",
    ]);
    start("apiserver", tools.apiserver, [
      `--etcd-servers=${ETCD_CLIENT}`,
      // The bridge's address: pods (through the `kubernetes` Service), kube-proxy and the kubelet reach it there,
      // and it becomes the endpoint of the `kubernetes` Service.
      `--bind-address=${GATEWAY}`,
      `--advertise-address=${GATEWAY}`,
      `--secure-port=${APISERVER_PORT}`,
      `--cert-dir=${certDir}`,
      `--token-auth-file=${tokenFile}`,
      "--authorization-mode=Node,RBAC",
      // Service accounts as in a real cluster: the ServiceAccount admission plugin (on by default) gives pods a
      // token, signed with this key and checked with its public half.
      `--service-account-issuer=${SERVICE_ACCOUNT_ISSUER}`,
      `--api-audiences=${SERVICE_ACCOUNT_ISSUER}`,
      `--service-account-key-file=${saPub}`,
      `--service-account-signing-key-file=${saKey}`,
      `--service-cluster-ip-range=${SERVICE_CIDR}`,
      // Webhooks (and aggregated APIs) behind a Service are dialled at their endpoints' pod IPs: no cluster DNS,
      // and the apiserver does not depend on kube-proxy's rules for its own calls.
      "--enable-aggregator-routing=true",
      // For logs and exec the apiserver calls the kubelet at the node's InternalIP, not at its name (no DNS here).
      "--kubelet-preferred-address-types=InternalIP",
      "--allow-privileged=true",
      ...(opts.enableAdmissionPlugins?.length ? [`--enable-admission-plugins=${opts.enableAdmissionPlugins.join(",")}`] : []),
      ...(admissionConfig ? [`--admission-control-config-file=${admissionConfig}`] : []),
      "-v=2",
      ...(opts.apiserverArgs ?? []),
    ]);

    // Ready: its certificate written, /readyz answering 200 through kubectl inside the namespace.
    let lastState = "no serving certificate yet";
    let ca: string | null = null;
    for (;;) {
      alive("etcd");
      alive("apiserver");
      if (Date.now() > deadline) return await failStart(`kube-apiserver not ready (${lastState})`, "apiserver");
      ca ??= readCaBundle(certDir);
      if (ca !== null) {
        for (const id of Object.keys(IDENTITIES) as Identity[]) {
          writeFileSync(kubeconfigs[id], kubeconfigYaml(server, ca, IDENTITIES[id].user, tokens[id]), { mode: 0o600 });
        }
        const ready = await kubectl(["get", "--raw=/readyz"], { timeoutMs: 10_000 });
        if (ready.code === 0) break;
        lastState = ready.stderr.trim().split("\n").slice(-1)[0] ?? "";
      }
      await sleep(200);
    }

    start("controller-manager", tools.controllerManager, [
      `--kubeconfig=${kubeconfigs.controllerManager}`,
      // Each controller acts as its own service account (as kubeadm sets it up): bootstrap RBAC grants those.
      "--use-service-account-credentials=true",
      // The tokens it mints for service accounts, and the CA put beside them in every pod: the apiserver's own.
      `--service-account-private-key-file=${saKey}`,
      `--root-ca-file=${join(certDir, "apiserver.crt")}`,
      "--controllers=*",
      "--leader-elect=false",
      // No serving ports: nothing scrapes it here, and it then needs no serving certificate.
      "--port=0",
      "--secure-port=0",
      "-v=1",
    ]);
    start("scheduler", tools.scheduler, [`--kubeconfig=${kubeconfigs.scheduler}`, "--leader-elect=false", "--port=0", "--secure-port=0", "-v=1"]);
    start("kube-proxy", tools.kubeProxy, [
      `--kubeconfig=${kubeconfigs.kubeProxy}`,
      "--proxy-mode=iptables",
      `--hostname-override=${NODE_NAME}`,
      `--cluster-cidr=${POD_SUBNET}`,
      // 0: leave the conntrack table size alone, a host-wide setting (the namespace would not contain it).
      "--conntrack-max-per-core=0",
      "--healthz-bind-address=127.0.0.1:10256",
      "--metrics-bind-address=127.0.0.1:10249",
      "-v=1",
    ]);

    node = await starting;
    const kubelet = await node.startKubelet({
      cluster: controlPlane,
      nodeName: NODE_NAME,
      extraArgs: [
        // The apiserver calls the kubelet (logs, exec) at the node's InternalIP: the bridge's address.
        `--node-ip=${GATEWAY}`,
        `--address=${GATEWAY}`,
        // Inside the namespace only the apiserver can reach it; it presents no client certificate here.
        "--anonymous-auth=true",
      ],
    });
    kubeletPid = kubelet.pid;

    // Pods can be created once the default ServiceAccount has its token; Services answer once kube-proxy has
    // written the `kubernetes` Service's rules.
    for (;;) {
      for (const name of ["controller-manager", "scheduler", "kube-proxy"]) alive(name);
      if (Date.now() > deadline) return await failStart(lastState);
      const sa = await kubectl(["get", "serviceaccount", "default", "-n", "default", "-o", "jsonpath={.secrets[0].name}"], { timeoutMs: 10_000 });
      if (sa.code !== 0 || sa.stdout.trim() === "") lastState = "the default ServiceAccount has no token yet (controller-manager)";
      else {
        const rules = await exec(tools.iptables, ["-t", "nat", "-S", "KUBE-SERVICES"], { timeoutMs: 10_000 });
        if (rules.stdout.includes("default/kubernetes:https")) break;
        lastState = "kube-proxy has not written the kubernetes Service's rules yet";
      }
      await sleep(200);
    }
  } catch (err) {
    if (err instanceof ComponentExited) return await failStart(err.message, err.component);
    await stop().catch(() => {});
    throw err;
  }

  const runningNode = node;
  const cluster: SmallCluster = {
    dir: controlPlane.dir,
    url: controlPlane.url,
    kubeconfig: controlPlane.kubeconfig,
    nodeKubeconfig: controlPlane.nodeKubeconfig,
    pids: controlPlane.pids,
    kubectl,
    apply: controlPlane.apply,
    logs: controlPlane.logs,
    netns,
    gateway: GATEWAY,
    podSubnet: POD_SUBNET,
    serviceCidr: SERVICE_CIDR,
    nodeName: NODE_NAME,
    node: runningNode!,
    componentPids: {
      etcd: procs.get("etcd")!.pid,
      apiserver: procs.get("apiserver")!.pid,
      controllerManager: procs.get("controller-manager")!.pid,
      scheduler: procs.get("scheduler")!.pid,
      kubeProxy: procs.get("kube-proxy")!.pid,
      kubelet: kubeletPid ?? 0,
    },
    startMs: Date.now() - started,
    exec,
    createNamespace: async (name: string, labels: Record<string, string> = {}) => {
      const manifest = { apiVersion: "v1", kind: "Namespace", metadata: { name, labels } };
      const created = await kubectl(["apply", "-f", "-"], { input: JSON.stringify(manifest) });
      if (created.code !== 0) throw new Error(`creating namespace ${name}: ${created.stderr}`);
      for (let i = 0; ; i++) {
        const sa = await kubectl(["get", "serviceaccount", "default", "-n", name, "-o", "jsonpath={.secrets[0].name}"]);
        if (sa.code === 0 && sa.stdout.trim() !== "") return;
        if (i > 150) throw new Error(`namespace ${name}: the default ServiceAccount got no token: ${sa.stderr}\n${logOf("controller-manager")}`);
        await sleep(200);
      }
    },
    componentLogs: (name, lines = 60) => {
      if (name === "kubelet") return runningNode!.kubeletLogs(lines);
      if (name === "containerd") return runningNode!.containerdLogs(lines);
      return logOf(name, lines);
    },
    stop,
    nodeStopReport: () => nodeReport,
  };
  if (!netnsExists(netns)) throw new Error(`network namespace ${netns} vanished during start`);
  return cluster;
}

class ComponentExited extends Error {
  readonly component: string;
  constructor(component: string, how: string) {
    super(`${component} exited during start (${how})`);
    this.component = component;
  }
}
