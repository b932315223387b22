// Namespaced policies on a real etcd + kube-apiserver v1.20 with `imprimatur serve --policy-crds` behind a
// ValidatingWebhookConfiguration: a user bound only to the built-in `admin` ClusterRole in team-a (through the
// shipped ClusterRoles aggregated into it by a real kube-controller-manager running only its
// clusterrole-aggregation controller) writes a NamespacedImagePolicy and a NamespacedPodRestriction in team-a,
// not in team-b; they apply to team-a's pods only and cannot lift the cluster ImagePolicy's denial; one that
// reaches beyond its namespace is refused on its status and by an Event in its namespace.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import {
  kubeToolPaths,
  startKubeCluster,
  untilWebhookActive,
  type KubeCluster,
  type KubectlResult,
  validatingWebhookConfiguration,
  webhookRule,
} from "../support/kube-cluster.ts";
import { startImprimatur, type ImprimaturProcess } from "../support/imprimatur-process.ts";
import { spawnLogged, terminate, type LoggedProcess } from "../support/logged-process.ts";
import { podYaml } from "../support/manifests.ts";
import { teardown } from "../support/teardown.ts";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const USER = "alice";
let cluster: KubeCluster;
let controllerManager: LoggedProcess | undefined;
let server: ImprimaturProcess | undefined;
let dir: string;

const asAlice = (args: string[], input?: string): Promise<KubectlResult> => cluster.kubectl([`--as=${USER}`, ...args], input === undefined ? {} : { input });

async function until(what: string, check: () => Promise<boolean>): Promise<void> {
  for (let i = 0; ; i++) {
    if (await check()) return;
    if (i > 150) throw new Error(`${what} did not happen; serve log:\n${(await server?.log())?.slice(-4000)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

const CLUSTER_POLICY = {
  apiVersion: "imprimatur.dev/v1alpha1",
  kind: "ImagePolicy",
  metadata: { name: "no-docker-hub" },
  spec: { rules: [{ action: "deny", images: ["docker.io/*"], message: "Docker Hub is not allowed" }], default: "allow" },
};

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "imprimatur-e2e-namespaced-"));
  cluster = await startKubeCluster({ enableAdmissionPlugins: ["ValidatingAdmissionWebhook"] });
  for (const args of [
    ["apply", "-k", join(ROOT, "deploy/crds")],
    ["apply", "-f", join(ROOT, "deploy/base/core/namespaced-policies-rbac.yaml")],
    ["wait", "--for=condition=Established", "crd", "--all", "--timeout=60s"],
    ["create", "namespace", "team-a"],
    ["create", "namespace", "team-b"],
    // v1.20 does not label namespaces with their name yet: label them so the webhook's selector matches.
    ["label", "namespace", "team-a", "kubernetes.io/metadata.name=team-a"],
    ["label", "namespace", "team-b", "kubernetes.io/metadata.name=team-b"],
    ["create", "rolebinding", "alice-admin", "--clusterrole=admin", `--user=${USER}`, "-n", "team-a"],
  ]) {
    const res = await cluster.kubectl(args);
    assert.equal(res.code, 0, `${args.join(" ")}: ${res.stderr}`);
  }
  // The harness runs no controller-manager; the rules of aggregated ClusterRoles are filled in by its
  // clusterrole-aggregation controller, so that controller alone runs here, as the admin identity.
  controllerManager = spawnLogged(
    "controller-manager",
    join(dirname(kubeToolPaths().apiserver), "kube-controller-manager"),
    [`--kubeconfig=${cluster.kubeconfig}`, "--controllers=clusterrole-aggregation", "--leader-elect=false", "--port=0", "--secure-port=0", "-v=1"],
    { dir, env: process.env, killAtExit: true },
  );
  await until("the admin ClusterRole aggregates the namespaced policy rules", async () => {
    const res = await asAlice(["auth", "can-i", "create", "namespacedimagepolicies.imprimatur.dev", "-n", "team-a"]);
    return res.stdout.trim() === "yes";
  });
  assert.equal((await cluster.apply(JSON.stringify(CLUSTER_POLICY))).code, 0);

  server = await startImprimatur(["--kubeconfig", cluster.kubeconfig, "--policy-crds"]);
  const vwc = validatingWebhookConfiguration(server, {
    name: "imprimatur-namespaced",
    rules: [webhookRule("pods")],
    namespaceSelector: { matchExpressions: [{ key: "kubernetes.io/metadata.name", operator: "In", values: ["team-a", "team-b"] }] },
  });
  assert.equal((await cluster.apply(vwc)).code, 0);
  await untilWebhookActive(cluster, podYaml("probe", "team-b", ["docker.io/library/nginx:1"]), (p) => /denied the request/.test(p.stderr), {
    context: async () => (await server?.log()) ?? "",
  });
});

after(() =>
  teardown([
    () => server?.stop(),
    () => controllerManager && terminate(controllerManager, 10_000),
    () => cluster?.stop(),
    () => dir && rm(dir, { recursive: true, force: true }),
  ]),
);

let pods = 0;
/** Creates a pod for real (kubectl create; nothing runs it here): its outcome, and the message of a denial. */
async function createPod(namespace: string, image: string, opts: { privileged?: boolean } = {}): Promise<{ created: boolean; stderr: string }> {
  const pod = JSON.parse(podYaml(`pod-${++pods}`, namespace, [image])) as { spec: { containers: Array<Record<string, unknown>> } };
  if (opts.privileged) pod.spec.containers[0]!.securityContext = { privileged: true };
  const res = await cluster.kubectl(["create", "-f", "-"], { input: JSON.stringify(pod) });
  if (res.code !== 0 && !/denied the request/.test(res.stderr)) throw new Error(`unexpected failure: ${res.stderr}`);
  return { created: res.code === 0, stderr: res.stderr };
}

const namespacedImagePolicy = (namespace: string, name: string, spec: unknown) =>
  JSON.stringify({ apiVersion: "imprimatur.dev/v1alpha1", kind: "NamespacedImagePolicy", metadata: { name, namespace }, spec });

interface Condition {
  type: string;
  status?: string;
  reason?: string;
  message?: string;
}

async function readyOf(resource: string, name: string, namespace: string): Promise<Condition | undefined> {
  const res = await cluster.kubectl(["get", resource, name, "-n", namespace, "-o", "json"]);
  assert.equal(res.code, 0, res.stderr);
  return (JSON.parse(res.stdout) as { status?: { conditions?: Condition[] } }).status?.conditions?.find((c) => c.type === "Ready");
}

test("a team-a admin writes namespaced policies in team-a only", async () => {
  const corpOnly = {
    rules: [
      { action: "allow", images: ["registry.example.com/*"] },
      // An attempt to lift the cluster's denial of Docker Hub: it must change nothing (next test).
      { action: "allow", images: ["docker.io/*"] },
    ],
    defaultMessage: "team-a runs images of registry.example.com only",
  };
  const created = await asAlice(["create", "-f", "-"], namespacedImagePolicy("team-a", "corp-only", corpOnly));
  assert.equal(created.code, 0, created.stderr);
  const elsewhere = await asAlice(["create", "-f", "-"], namespacedImagePolicy("team-b", "corp-only", corpOnly));
  assert.notEqual(elsewhere.code, 0);
  assert.match(
    elsewhere.stderr,
    /forbidden: User "alice" cannot create resource "namespacedimagepolicies" in API group "imprimatur\.dev" in the namespace "team-b"/,
  );
  // Nor may alice write cluster policies, or the status Imprimatur writes.
  assert.equal((await asAlice(["auth", "can-i", "create", "imagepolicies.imprimatur.dev"])).stdout.trim(), "no");
  assert.equal(
    (await asAlice(["auth", "can-i", "patch", "namespacedimagepolicies.imprimatur.dev", "--subresource=status", "-n", "team-a"])).stdout.trim(),
    "no",
  );

  const restriction = {
    apiVersion: "imprimatur.dev/v1alpha1",
    kind: "NamespacedPodRestriction",
    metadata: { name: "no-privileged", namespace: "team-a" },
    spec: { spec: { containers: [{ securityContext: { privileged: { allowNil: true, require: false } } }] } },
  };
  const restricted = await asAlice(["create", "-f", "-"], JSON.stringify(restriction));
  assert.equal(restricted.code, 0, restricted.stderr);

  await until(
    "both are Ready",
    async () =>
      (await readyOf("nsimgpol", "corp-only", "team-a"))?.status === "True" && (await readyOf("nspodres", "no-privileged", "team-a"))?.status === "True",
  );
  const listed = await asAlice(["get", "imprimatur", "-n", "team-a"]);
  assert.match(listed.stdout, /namespacedimagepolicy\.imprimatur\.dev\/corp-only\s+True/, listed.stdout);
});

test("they apply to team-a's pods only, and cannot lift the cluster policy's denial", async () => {
  await until("the namespaced ImagePolicy denies in team-a", async () => !(await createPod("team-a", "quay.io/app:1")).created);
  const denied = await createPod("team-a", "quay.io/app:1");
  assert.match(denied.stderr, /denied by NamespacedImagePolicy team-a\/corp-only default: team-a runs images of registry\.example\.com only/);
  assert.equal((await createPod("team-b", "quay.io/app:1")).created, true, "team-b is not team-a's to restrict");
  assert.equal((await createPod("team-a", "registry.example.com/app:1")).created, true);

  // The namespaced policy allows Docker Hub images; the cluster policy still denies them, in team-a as everywhere.
  const hub = await createPod("team-a", "docker.io/library/nginx:1");
  assert.equal(hub.created, false);
  assert.match(hub.stderr, /denied by policy no-docker-hub rules\[0\]: Docker Hub is not allowed/);

  const privileged = await createPod("team-a", "registry.example.com/app:1", { privileged: true });
  assert.equal(privileged.created, false);
  assert.match(privileged.stderr, /denied by NamespacedPodRestriction team-a\/no-privileged /);
  assert.equal((await createPod("team-b", "registry.example.com/app:1", { privileged: true })).created, true);
});

test("one that reaches beyond its namespace is refused on its status and by an Event in its namespace", async () => {
  const wide = await asAlice(
    ["create", "-f", "-"],
    namespacedImagePolicy("team-a", "wide", { namespaces: ["team-b"], rules: [{ action: "deny", images: ["quay.io/*"] }], default: "allow" }),
  );
  assert.equal(wide.code, 0, wide.stderr);
  await until("Ready=False", async () => (await readyOf("namespacedimagepolicy", "wide", "team-a"))?.status === "False");
  const ready = await readyOf("namespacedimagepolicy", "wide", "team-a");
  assert.equal(ready?.reason, "InvalidPolicy");
  assert.match(ready?.message ?? "", /^spec\.namespaces: a NamespacedImagePolicy cannot set namespaces: it applies only in its own namespace/);
  await until("a Warning Event in team-a", async () => {
    const events = await asAlice(["get", "events", "-n", "team-a", "--field-selector", "involvedObject.name=wide,type=Warning", "-o", "json"]);
    const items =
      (JSON.parse(events.stdout || "{}") as { items?: Array<{ reason: string; involvedObject: { kind: string; namespace?: string } }> }).items ?? [];
    return items.some((e) => e.reason === "InvalidPolicy" && e.involvedObject.kind === "NamespacedImagePolicy" && e.involvedObject.namespace === "team-a");
  });
  assert.equal((await createPod("team-b", "quay.io/other:1")).created, true, "team-b is untouched");
});

test("a team-a condition that fails on every unlabelled pod fails closed in team-a only", async () => {
  const labelledOnly = namespacedImagePolicy("team-a", "labelled-only", {
    matchConditions: [{ name: "team-pods", expression: "object.metadata.labels['team'] == 'a'" }],
    rules: [{ action: "allow", images: ["registry.example.com/*"] }],
  });
  const created = await asAlice(["create", "-f", "-"], labelledOnly);
  assert.equal(created.code, 0, created.stderr);
  try {
    await until("team-a's condition is in force", async () => !(await createPod("team-a", "registry.example.com/app:1")).created);
    const denied = await createPod("team-a", "registry.example.com/app:1");
    assert.match(denied.stderr, /NamespacedImagePolicy team-a\/labelled-only matchConditions\[team-pods\]: matchCondition "team-pods" failed/);
    const elsewhere = await createPod("team-b", "registry.example.com/app:1");
    assert.equal(elsewhere.created, true, `team-a's condition is not asked about team-b's pods: ${elsewhere.stderr}`);
  } finally {
    assert.equal((await asAlice(["delete", "nsimgpol", "labelled-only", "-n", "team-a"])).code, 0);
  }
});
