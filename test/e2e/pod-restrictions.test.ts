// PodRestrictions through a real etcd + kube-apiserver v1.20 and kubectl: `imprimatur serve` reads
// namespace labels from the API (watch-backed cache), and the apiserver calls it through the
// ValidatingWebhookConfiguration that serve itself writes (pods, workloads, and a registered CRD).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { stringify } from "yaml";
import { startKubeCluster, untilWebhookActive, type KubeCluster } from "../support/kube-cluster.ts";
import { startImprimatur, type ImprimaturProcess } from "../support/imprimatur-process.ts";
import { teardown } from "../support/teardown.ts";

const POLICIES = fileURLToPath(new URL("../fixtures/e2e-pod-restrictions/", import.meta.url));
let dir: string;
let cluster: KubeCluster;
let server: ImprimaturProcess;

const compliantSpec = {
  securityContext: { runAsNonRoot: true, seccompProfile: { type: "RuntimeDefault" } },
  containers: [
    { name: "app", image: "registry.example.com/team/app:1.0", securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ["ALL"] } } },
  ],
};
const privilegedSpec = (image = "registry.example.com/team/app:1.0") => ({ containers: [{ name: "app", image, securityContext: { privileged: true } }] });

function pod(name: string, namespace: string, spec: object): string {
  return JSON.stringify({ apiVersion: "v1", kind: "Pod", metadata: { name, namespace }, spec });
}

async function create(manifest: string) {
  return cluster.kubectl(["create", "-f", "-"], { input: manifest });
}

async function namespace(name: string, labels: Record<string, string>) {
  const r = await cluster.apply(JSON.stringify({ apiVersion: "v1", kind: "Namespace", metadata: { name, labels } }));
  assert.equal(r.code, 0, r.stderr);
}

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "imprimatur-e2e-restrictions-"));
  cluster = await startKubeCluster({ enableAdmissionPlugins: ["ValidatingAdmissionWebhook"] });

  // A custom resource that embeds a pod template, registered with the server by path.
  const crd = {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: { name: "buildruns.ci.example.com" },
    spec: {
      group: "ci.example.com",
      scope: "Namespaced",
      names: { plural: "buildruns", singular: "buildrun", kind: "BuildRun" },
      versions: [
        {
          name: "v1",
          served: true,
          storage: true,
          schema: { openAPIV3Schema: { type: "object", properties: { spec: { type: "object", "x-kubernetes-preserve-unknown-fields": true } } } },
        },
      ],
    },
  };
  assert.equal((await cluster.apply(JSON.stringify(crd))).code, 0);
  await writeFile(
    join(dir, "config.yaml"),
    stringify({
      apiVersion: "imprimatur.dev/v1alpha1",
      kind: "ServerConfig",
      kubeconfig: cluster.kubeconfig,
      podTemplates: [{ apiVersion: "ci.example.com/v1", kind: "BuildRun", resource: "buildruns", templates: ["spec.steps[*].template"] }],
    }),
  );
  server = await startImprimatur(["--policies", POLICIES, "--config", join(dir, "config.yaml")]);

  // The configuration serve wrote for this very server: the rules a user would apply.
  const applied = await cluster.kubectl(["apply", "-f", join(server.stateDir, "validating-webhook.yaml")]);
  assert.equal(applied.code, 0, applied.stderr);

  await namespace("secure", { security: "restricted" });
  await namespace("ops", { security: "restricted" });
  await namespace("open", {});
  // Webhook configurations take effect asynchronously; wait until a privileged pod is really denied.
  await untilWebhookActive(cluster, pod("probe", "secure", privilegedSpec()), (probe) => probe.code !== 0, { context: () => server.log() });
});

after(() => teardown([() => cluster?.stop(), () => server?.stop(), () => dir && rm(dir, { recursive: true, force: true })]));

test("a privileged pod in a namespace bound to restricted is denied, naming the field and the check", async () => {
  const r = await create(pod("privileged", "secure", privilegedSpec()));
  assert.notEqual(r.code, 0);
  assert.match(
    r.stderr,
    /denied the request: .*spec\.containers\[0\]\.securityContext\.privileged denied by PodRestriction restricted-namespaces baseline\/privileged: is true; must be false/,
  );
  assert.match(
    r.stderr,
    /spec\.containers\[0\]\.securityContext\.allowPrivilegeEscalation denied by PodRestriction restricted-namespaces restricted\/allowPrivilegeEscalation/,
  );
});

test("a compliant pod is admitted and stored", async () => {
  const r = await create(pod("compliant", "secure", compliantSpec));
  assert.equal(r.code, 0, r.stderr);
  const got = await cluster.kubectl(["get", "pod", "compliant", "-n", "secure", "-o", "jsonpath={.metadata.name}"]);
  assert.equal(got.stdout, "compliant");
});

test("a pod in an unbound namespace is admitted, privileged or not", async () => {
  const r = await create(pod("anything-goes", "open", privilegedSpec()));
  assert.equal(r.code, 0, r.stderr);
});

test("a Deployment with a privileged template is denied at creation (fail-fast)", async () => {
  const deployment = {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name: "web", namespace: "secure" },
    spec: { selector: { matchLabels: { app: "web" } }, template: { metadata: { labels: { app: "web" } }, spec: privilegedSpec() } },
  };
  const r = await create(JSON.stringify(deployment));
  assert.notEqual(r.code, 0);
  assert.match(
    r.stderr,
    /spec\.template\.spec\.containers\[0\]\.securityContext\.privileged denied by PodRestriction restricted-namespaces baseline\/privileged/,
  );
  const listed = await cluster.kubectl(["get", "deployments", "-n", "secure", "-o", "name"]);
  assert.equal(listed.stdout.trim(), "");

  const ok = await create(
    JSON.stringify({
      ...deployment,
      metadata: { name: "web-ok", namespace: "secure" },
      spec: { ...deployment.spec, template: { metadata: { labels: { app: "web" } }, spec: compliantSpec } },
    }),
  );
  assert.equal(ok.code, 0, ok.stderr);
  // Scaling changes no restricted field: allowed even though nothing is re-judged.
  const scaled = await cluster.kubectl(["scale", "deployment/web-ok", "-n", "secure", "--replicas=3"]);
  assert.equal(scaled.code, 0, scaled.stderr);
});

test("an Accept policy opens a hole for one image in one namespace only", async () => {
  const agent = await create(pod("agent", "ops", privilegedSpec("registry.example.com/ops/node-agent:2.3")));
  assert.equal(agent.code, 0, agent.stderr);
  const other = await create(pod("other", "ops", privilegedSpec("registry.example.com/team/app:1.0")));
  assert.notEqual(other.code, 0);
  assert.match(other.stderr, /baseline\/privileged/);
  // The same agent pod outside "ops" gets no such exception.
  const elsewhere = await create(pod("agent", "secure", privilegedSpec("registry.example.com/ops/node-agent:2.3")));
  assert.notEqual(elsewhere.code, 0);
});

test("a custom resource embedding a privileged pod template is denied, with the path into the resource", async () => {
  const run = (name: string, spec: object) =>
    JSON.stringify({
      apiVersion: "ci.example.com/v1",
      kind: "BuildRun",
      metadata: { name, namespace: "secure" },
      spec: { steps: [{ template: { spec: compliantSpec } }, { template: { spec } }] },
    });
  const bad = await create(run("bad", privilegedSpec()));
  assert.notEqual(bad.code, 0);
  assert.match(
    bad.stderr,
    /spec\.steps\[1\]\.template\.spec\.containers\[0\]\.securityContext\.privileged denied by PodRestriction restricted-namespaces baseline\/privileged/,
  );
  const good = await create(run("good", compliantSpec));
  assert.equal(good.code, 0, good.stderr);
});

test("a custom resource's pod template whose only untrusted image is an image volume is denied, naming the volume", async () => {
  // The v1.20 apiserver drops volumes[].image from Pods (a field it does not know), but keeps it inside a custom
  // resource: the real path by which such a volume reaches the webhook here. Newer apiservers keep it on Pods too.
  const withVolume = (reference: string) =>
    JSON.stringify({
      apiVersion: "ci.example.com/v1",
      kind: "BuildRun",
      metadata: { name: reference.startsWith("registry.example.com") ? "model-ok" : "model-bad", namespace: "open" },
      spec: { steps: [{ template: { spec: { ...compliantSpec, volumes: [{ name: "model", image: { reference, pullPolicy: "IfNotPresent" } }] } } }] },
    });
  const bad = await create(withVolume("docker.io/evil/miner:1"));
  assert.notEqual(bad.code, 0, "the image volume must be reviewed");
  assert.match(
    bad.stderr,
    /image "docker\.io\/evil\/miner:1" \(spec\.steps\[0\]\.template\.spec\.volumes\[0\]\.image\.reference\) denied by policy trusted-registries default/,
  );
  const good = await create(withVolume("registry.example.com/models/llm:7b"));
  assert.equal(good.code, 0, good.stderr);
});

test("relabelling a namespace binds it: the server follows namespace labels through its watch", async () => {
  await namespace("later", {});
  const before = await create(pod("first", "later", privilegedSpec()));
  assert.equal(before.code, 0, before.stderr);
  const labelled = await cluster.kubectl(["label", "namespace", "later", "security=restricted"]);
  assert.equal(labelled.code, 0, labelled.stderr);
  let denied = false;
  for (let i = 0; i < 100 && !denied; i++) {
    const r = await cluster.kubectl(["create", "--dry-run=server", "-f", "-"], { input: pod("second", "later", privilegedSpec()) });
    denied = r.code !== 0 && /baseline\/privileged/.test(r.stderr);
    if (!denied) await new Promise((res) => setTimeout(res, 100));
  }
  assert.ok(denied, `the new label never took effect: ${await server.log()}`);
});

test("the server reports which PodRestrictions it serves", async () => {
  const log = await readFile(server.logPath, "utf8");
  assert.match(log, /"podRestrictions":\["restricted-namespaces","ops-node-agent"\]/);
});
