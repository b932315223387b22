// A namespace's policy decides for its namespace only, on a real etcd + kube-apiserver v1.20: team-a's
// NamespacedImagePolicy and NamespacedPodRestriction are scoped by a matchCondition that fails on every pod
// without labels. Pods of prod and kube-system are created through the validating webhook (fail closed) and
// judged by the background scan and `imprimatur audit` without anything of team-a's; team-a's own pods still
// fail closed with the condition's error. The serve endpoints and `check` without a cluster:
// test/unit/namespaced-policy-reach.test.ts.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { setTimeout as sleep } from "node:timers/promises";
import { startKubeCluster, untilWebhookActive, validatingWebhookConfiguration, webhookRule, type KubeCluster } from "../support/kube-cluster.ts";
import { startImprimatur, type ImprimaturProcess } from "../support/imprimatur-process.ts";
import { imprimatur } from "../support/cli-process.ts";
import { podYaml } from "../support/manifests.ts";
import { NO_DOCKER_HUB, TEAM_A_CONDITION_ERROR as CONDITION_ERROR, TEAM_A_FAILING_CONDITION } from "../support/tenant-policies.ts";
import { teardown } from "../support/teardown.ts";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));

const POLICIES = `${NO_DOCKER_HUB}---\n${TEAM_A_FAILING_CONDITION}`;

let cluster: KubeCluster;
let dir: string;
let server: ImprimaturProcess | undefined;
const uids = new Map<string, string>();

/** Pods that exist before Imprimatur runs (no webhook yet), for the scan; namespace/name → uid. */
const EXISTING: Array<[namespace: string, name: string, image: string]> = [
  ["prod", "web", "quay.io/web:1"],
  ["prod", "hub", "docker.io/library/nginx:1"],
  ["kube-system", "dns", "quay.io/dns:1"],
  ["team-a", "app", "registry.example.com/app:1"],
];

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "imprimatur-e2e-namespaced-reach-"));
  cluster = await startKubeCluster({ enableAdmissionPlugins: ["ValidatingAdmissionWebhook"] });
  for (const args of [
    ["apply", "-k", join(ROOT, "deploy/crds/reports")],
    ["wait", "--for=condition=Established", "crd", "--all", "--timeout=60s"],
    ["create", "namespace", "team-a"],
    ["create", "namespace", "prod"],
  ]) {
    const res = await cluster.kubectl(args);
    assert.equal(res.code, 0, `${args.join(" ")}: ${res.stderr}`);
  }
  for (const [namespace, name, image] of EXISTING) {
    const created = await cluster.kubectl(["create", "-o", "json", "-f", "-"], { input: podYaml(name, namespace, [image]) });
    assert.equal(created.code, 0, created.stderr);
    uids.set(`${namespace}/${name}`, (JSON.parse(created.stdout) as { metadata: { uid: string } }).metadata.uid);
  }
  await writeFile(join(dir, "policies.yaml"), POLICIES);
  server = await startImprimatur(["--policies", join(dir, "policies.yaml"), "--kubeconfig", cluster.kubeconfig, "--background-scan", "--scan-rate", "100"]);
  // Every namespace, kube-system included, fail closed.
  const vwc = validatingWebhookConfiguration(server, { name: "imprimatur-reach", rules: [webhookRule("pods")], namespaceSelector: {} });
  assert.equal((await cluster.apply(vwc)).code, 0);
  await untilWebhookActive(cluster, podYaml("probe", "prod", ["docker.io/library/nginx:1"]), (p) => /denied the request/.test(p.stderr), {
    context: async () => (await server?.log()) ?? "",
  });
});

after(() => teardown([() => server?.stop(), () => cluster?.stop(), () => dir && rm(dir, { recursive: true, force: true })]));

async function until(what: string, check: () => Promise<boolean>, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting: ${what}\n${(await server?.log())?.slice(-3000) ?? ""}`);
    await sleep(300);
  }
}

let created = 0;
async function createPod(namespace: string, image: string, opts: { labels?: Record<string, string>; privileged?: boolean } = {}) {
  const pod = JSON.parse(podYaml(`pod-${++created}`, namespace, [image])) as {
    metadata: Record<string, unknown>;
    spec: { containers: Array<Record<string, unknown>> };
  };
  if (opts.labels) pod.metadata.labels = opts.labels;
  if (opts.privileged) pod.spec.containers[0]!.securityContext = { privileged: true };
  const res = await cluster.kubectl(["create", "-f", "-"], { input: JSON.stringify(pod) });
  if (res.code !== 0 && !/denied the request/.test(res.stderr)) throw new Error(`unexpected failure: ${res.stderr}`);
  return { created: res.code === 0, stderr: res.stderr };
}

test("the webhook admits pods of prod and kube-system whatever team-a's condition does; team-a's own fail closed", async () => {
  for (const namespace of ["prod", "kube-system"]) {
    const plain = await createPod(namespace, "quay.io/web:1", { privileged: true });
    assert.equal(plain.created, true, `${namespace}: ${plain.stderr}`);
    const hub = await createPod(namespace, "docker.io/library/nginx:1");
    assert.equal(hub.created, false);
    assert.match(hub.stderr, /denied by policy no-docker-hub rules\[0\]: Docker Hub is not allowed/);
    assert.doesNotMatch(hub.stderr, /team-a/, "the cluster policy alone denies it");
  }
  const unlabelled = await createPod("team-a", "registry.example.com/app:1");
  assert.equal(unlabelled.created, false);
  assert.match(unlabelled.stderr, CONDITION_ERROR);
  const labelled = await createPod("team-a", "quay.io/app:1", { labels: { team: "a" } });
  assert.equal(labelled.created, false, "a pod the condition selects is judged by team-a's rules");
  assert.match(labelled.stderr, /denied by NamespacedImagePolicy team-a\/team-images default: team-a runs images of registry\.example\.com only/);
  assert.equal((await createPod("team-a", "registry.example.com/app:1", { labels: { team: "a" } })).created, true);
});

interface Report {
  metadata: { name: string };
  results?: Array<{ policy: string; rule?: string; result: string; message: string }>;
}

async function reportsByPod(): Promise<Map<string, Report>> {
  const got = await cluster.kubectl(["get", "policyreports", "--all-namespaces", "-o", "json"]);
  assert.equal(got.code, 0, got.stderr);
  const byUid = new Map((JSON.parse(got.stdout) as { items: Report[] }).items.map((r) => [r.metadata.name, r]));
  return new Map([...uids].flatMap(([pod, uid]) => (byUid.has(uid) ? [[pod, byUid.get(uid)!] as const] : [])));
}

test("the background scan writes team-a's results into team-a's reports only", async () => {
  await until("the first full scan", async () => /"background scan: every pod judged"/.test((await server?.log()) ?? ""));
  const reports = await reportsByPod();
  assert.deepEqual([...reports.keys()].sort(), ["prod/hub", "team-a/app"], "prod/web and kube-system/dns break no policy of theirs");
  assert.deepEqual(
    reports.get("prod/hub")!.results?.map((r) => [r.policy, r.rule, r.result]),
    [["no-docker-hub", "rules[0]", "fail"]],
  );
  const teamA = reports.get("team-a/app")!.results ?? [];
  assert.deepEqual(
    teamA.map((r) => [r.policy, r.rule, r.result]),
    [
      ["team-a/team-images", "matchConditions[team-pods]", "fail"],
      ["team-a/team-unprivileged", "matchConditions[team-pods]", "fail"],
    ],
  );
});

test("imprimatur audit judges every namespace's pods by their own policies", async () => {
  const res = await imprimatur(["audit", "--kubeconfig", cluster.kubeconfig, "--policies", join(dir, "policies.yaml")]);
  assert.equal(res.code, 1, res.stderr);
  const lines = res.stdout.trimEnd().split("\n");
  const mentioningTeamA = lines.filter((l) => /team-a/.test(l)).map((l) => l.replace(/: .*/, ""));
  assert.ok(mentioningTeamA.length > 0, res.stdout);
  assert.ok(
    mentioningTeamA.every((pod) => pod.startsWith("team-a/")),
    `only team-a's pods hold team-a's results:\n${res.stdout}`,
  );
  assert.ok(lines.includes("prod/hub: fail: no-docker-hub rules[0]: Docker Hub is not allowed (docker.io/library/nginx:1)"), res.stdout);
});
