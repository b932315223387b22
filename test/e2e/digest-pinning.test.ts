// Tag→digest pinning through a real etcd + kube-apiserver v1.20 and kubectl, against a real docker-registry
// with TLS and token auth (the tests' own ES256 token server): `imprimatur serve` reads pull secrets and
// service accounts from the API, the apiserver calls /mutate and /validate through the webhook
// configurations serve writes, and Pods, Deployments and custom resources (a Tekton-like Task, whose images
// ImagePolicy imagePaths locate) come back from the API pinned and annotated, or are refused.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { stringify } from "yaml";
import { createPullSecret, startKubeCluster, untilWebhookActive, type KubeCluster } from "../support/kube-cluster.ts";
import { startImprimatur, type ImprimaturProcess } from "../support/imprimatur-process.ts";
import { startRegistry, type TestRegistry } from "../support/registry.ts";
import { teardown } from "../support/teardown.ts";
import { TestLayouts } from "../support/test-layouts.ts";

const NS = "pinning";
/** A Tekton-like Task: images in spec.steps, no pod spec (CustomResourceDefinition below). */
const TASK_GROUP = "ci.imprimatur.test";
const PULLER = { username: "puller", password: "puller-secret-1" };
let dir: string;
let cluster: KubeCluster;
let registry: TestRegistry;
let server: ImprimaturProcess;
const digests: Record<string, string> = {};
const layouts = new TestLayouts();

async function push(repository: string, tag: string, seed: string, platforms?: Array<{ os: string; architecture: string }>): Promise<string> {
  return (await layouts.push(registry, repository, tag, { seed, ...(platforms ? { platforms } : {}) })).digest;
}

function pod(name: string, image: string, extra: Record<string, unknown> = {}): string {
  return JSON.stringify({ apiVersion: "v1", kind: "Pod", metadata: { name, namespace: NS }, spec: { containers: [{ name: "app", image }], ...extra } });
}

async function kubectlJson(args: string[]): Promise<Record<string, any>> {
  const r = await cluster.kubectl([...args, "-o", "json"]);
  assert.equal(r.code, 0, r.stderr);
  return JSON.parse(r.stdout);
}

async function eventsFor(name: string): Promise<Array<{ reason: string; message: string; type: string }>> {
  // Events are written after the answer, off the admission path: poll briefly.
  for (let i = 0; ; i++) {
    const list = await kubectlJson(["get", "events", "-n", NS, "--field-selector", `involvedObject.name=${name}`]);
    if (list.items.length > 0 || i > 50) return list.items;
    await new Promise((r) => setTimeout(r, 100));
  }
}

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "imprimatur-e2e-pinning-"));
  registry = await startRegistry({
    auth: "token",
    publicRepositories: ["public/app"],
    users: [
      { username: "pusher", password: "pusher-secret-1" },
      { ...PULLER, pull: ["private/**"], push: false },
    ],
  });
  digests.public = await push("public/app", "1.0", "public-1");
  digests.private = await push("private/app", "2.0", "private-2");
  digests.multi = await push("private/multi", "3.0", "multi-3", [
    { os: "linux", architecture: "amd64" },
    { os: "linux", architecture: "arm64" },
  ]);
  digests.verifyOnly = await push("public/app", "verify", "verify-1");

  cluster = await startKubeCluster({ enableAdmissionPlugins: ["MutatingAdmissionWebhook", "ValidatingAdmissionWebhook"] });
  const host = registry.host;
  await writeFile(
    join(dir, "policies.yaml"),
    stringify({
      apiVersion: "imprimatur.dev/v1alpha1",
      kind: "ImagePolicy",
      metadata: { name: "pin-internal" },
      spec: {
        rules: [
          { action: "allow", images: [`${host}/public/app:verify`], digestVerify: true },
          { action: "allow", images: [`${host}/*`], digestMutate: true, digestVerify: true },
        ],
        default: "allow",
      },
    }) +
      "---\n" +
      stringify({
        apiVersion: "imprimatur.dev/v1alpha1",
        kind: "ImagePolicy",
        metadata: { name: "tasks" },
        spec: {
          imagePaths: [{ kinds: [`${TASK_GROUP}/v1/Task`], path: "{{ spec.steps[*] }}" }],
          rules: [{ action: "allow", images: [`${host}/*`] }],
          default: "deny",
          defaultMessage: `Task images come from ${host}`,
        },
      }),
  );
  await writeFile(join(dir, "registries.yaml"), registry.registryConfig());
  await writeFile(
    join(dir, "config.yaml"),
    stringify({ apiVersion: "imprimatur.dev/v1alpha1", kind: "ServerConfig", kubeconfig: cluster.kubeconfig, registries: join(dir, "registries.yaml") }),
  );
  server = await startImprimatur(["--policies", join(dir, "policies.yaml"), "--config", join(dir, "config.yaml")]);
  const crd = await cluster.apply(JSON.stringify(taskDefinition()));
  assert.equal(crd.code, 0, crd.stderr);
  const established = await cluster.kubectl(["wait", "--for", "condition=established", "--timeout=60s", `crd/tasks.${TASK_GROUP}`]);
  assert.equal(established.code, 0, established.stderr);

  for (const file of ["mutating-webhook.yaml", "validating-webhook.yaml"]) {
    const applied = await cluster.kubectl(["apply", "-f", join(server.stateDir, file)]);
    assert.equal(applied.code, 0, applied.stderr);
  }
  assert.equal((await cluster.kubectl(["create", "namespace", NS])).code, 0);
  await createPullSecret(cluster, NS, "regcred", { host, username: PULLER.username }, PULLER.password);
  const sa = await cluster.apply(
    JSON.stringify({ apiVersion: "v1", kind: "ServiceAccount", metadata: { name: "builder", namespace: NS }, imagePullSecrets: [{ name: "regcred" }] }),
  );
  assert.equal(sa.code, 0, sa.stderr);

  // Webhook configurations take effect asynchronously: wait until a dry run comes back pinned.
  await untilWebhookActive(cluster, pod("probe", `${host}/public/app:1.0`), (probe) => probe.stdout.includes("@sha256:"), {
    extraArgs: ["-o", "jsonpath={.spec.containers[0].image}"],
    context: () => server.log(),
  });
});

function taskDefinition() {
  return {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: { name: `tasks.${TASK_GROUP}` },
    spec: {
      group: TASK_GROUP,
      scope: "Namespaced",
      names: { plural: "tasks", singular: "task", kind: "Task" },
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
}

function task(name: string, images: string[]): string {
  return JSON.stringify({
    apiVersion: `${TASK_GROUP}/v1`,
    kind: "Task",
    metadata: { name, namespace: NS },
    spec: { steps: images.map((image, i) => ({ name: `step-${i}`, image, script: "make" })) },
  });
}

after(() =>
  teardown([
    () => cluster?.stop(),
    () => server?.stop(),
    () => registry?.stop(),
    ...layouts.removals(),
    () => dir && rm(dir, { recursive: true, force: true }),
  ]),
);

test("a Pod created with a public tag comes back pinned to its digest, annotated, with an Event", async () => {
  const image = `${registry.host}/public/app:1.0`;
  const r = await cluster.kubectl(["create", "-f", "-"], { input: pod("public", image) });
  assert.equal(r.code, 0, r.stderr);
  const got = await kubectlJson(["get", "pod", "public", "-n", NS]);
  assert.equal(got.spec.containers[0].image, `${image}@${digests.public}`);
  assert.deepEqual(JSON.parse(got.metadata.annotations["imprimatur.dev/pinned-images"]), { [image]: `${image}@${digests.public}` });
  const events = await eventsFor("public");
  const pinned = events.find((e) => e.reason === "ImagesPinned");
  assert.ok(pinned, JSON.stringify(events));
  assert.match(pinned.message, new RegExp(`spec\\.containers\\[0\\]\\.image: .*public/app:1\\.0 → .*@${digests.public} \\(credentials: anonymous\\)`));
});

test("a private image resolves with the pod's own pull secret; the Event names the secret, never its value", async () => {
  const image = `${registry.host}/private/app:2.0`;
  const r = await cluster.kubectl(["create", "-f", "-"], { input: pod("private", image, { imagePullSecrets: [{ name: "regcred" }] }) });
  assert.equal(r.code, 0, r.stderr);
  const got = await kubectlJson(["get", "pod", "private", "-n", NS]);
  assert.equal(got.spec.containers[0].image, `${image}@${digests.private}`);
  const events = await eventsFor("private");
  const message = events.map((e) => e.message).join("\n");
  assert.match(message, new RegExp(`credentials: secret ${NS}/regcred`));
  assert.doesNotMatch(message + (await server.log()), new RegExp(PULLER.password));
});

test("without a pull secret the private tag cannot be resolved: the registry's refusal is a denial", async () => {
  const r = await cluster.kubectl(["create", "-f", "-"], { input: pod("no-secret", `${registry.host}/private/app:2.0`) });
  assert.notEqual(r.code, 0);
  assert.match(
    r.stderr,
    /pins\.imprimatur\.dev.* denied the request: .*private\/app:2\.0.*rules\[1\]\.digestMutate: the tag could not be resolved to a digest \(unauthorized: .*registry's answer.*Give the pod a pull secret/i,
  );
});

test("a Deployment's template is pinned with its service account's pull secret, so its pods will be too", async () => {
  const image = `${registry.host}/private/multi:3.0`;
  const deployment = {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name: "web", namespace: NS },
    spec: {
      replicas: 2,
      selector: { matchLabels: { app: "web" } },
      template: { metadata: { labels: { app: "web" } }, spec: { serviceAccountName: "builder", containers: [{ name: "web", image }] } },
    },
  };
  const r = await cluster.kubectl(["create", "-f", "-"], { input: JSON.stringify(deployment) });
  assert.equal(r.code, 0, r.stderr);
  const got = await kubectlJson(["get", "deployment", "web", "-n", NS]);
  assert.equal(got.spec.template.spec.containers[0].image, `${image}@${digests.multi}`, "a multi-platform tag pins to its index");
  assert.deepEqual(JSON.parse(got.spec.template.metadata.annotations["imprimatur.dev/pinned-images"]), { [image]: `${image}@${digests.multi}` });
  const events = await eventsFor("web");
  assert.match(events.map((e) => e.message).join("\n"), new RegExp(`credentials: secret ${NS}/regcred`));
});

test("after the tag moves, the pinned pod still names the approved digest, which the registry still serves", async () => {
  const image = `${registry.host}/public/app:1.0`;
  const moved = await push("public/app", "1.0", "public-1-moved");
  assert.notEqual(moved, digests.public);
  const got = await kubectlJson(["get", "pod", "public", "-n", NS]);
  assert.equal(got.spec.containers[0].image, `${image}@${digests.public}`);
  const old = await registry.inspectRaw("public/app", digests.public!);
  assert.equal(old.digest, digests.public, "the approved content is still there by digest");
  assert.equal((await registry.inspectRaw("public/app", "1.0")).digest, moved, "while the tag points elsewhere");
});

test("digestVerify: the validating webhook denies a tag that no rule pins, saying how to fix it", async () => {
  const image = `${registry.host}/public/app:verify`;
  const r = await cluster.kubectl(["create", "-f", "-"], { input: pod("verify-tag", image) });
  assert.notEqual(r.code, 0);
  assert.match(
    r.stderr,
    /images\.imprimatur\.dev.* denied the request: .*rules\[0\]\.digestVerify: this policy requires a digest.*pin it as .*public\/app:verify@sha256:<digest>/,
  );
  const pinned = await cluster.kubectl(["create", "-f", "-"], { input: pod("verify-digest", `${image}@${digests.verifyOnly}`) });
  assert.equal(pinned.code, 0, pinned.stderr);
});

test("updating an unrelated field of a pinned Deployment leaves it alone; changing the image pins the new one", async () => {
  const scaled = await cluster.kubectl(["scale", "deployment", "web", "-n", NS, "--replicas=3"]);
  assert.equal(scaled.code, 0, scaled.stderr);
  const relabelled = await cluster.kubectl(["label", "deployment", "web", "-n", NS, "tier=front"]);
  assert.equal(relabelled.code, 0, relabelled.stderr);
  const unchanged = await kubectlJson(["get", "deployment", "web", "-n", NS]);
  assert.equal(unchanged.spec.template.spec.containers[0].image, `${registry.host}/private/multi:3.0@${digests.multi}`);
  const image = `${registry.host}/private/app:2.0`;
  const set = await cluster.kubectl(["set", "image", "deployment/web", "-n", NS, `web=${image}`]);
  assert.equal(set.code, 0, set.stderr);
  const got = await kubectlJson(["get", "deployment", "web", "-n", NS]);
  assert.equal(got.spec.template.spec.containers[0].image, `${image}@${digests.private}`);
  const record = JSON.parse(got.spec.template.metadata.annotations["imprimatur.dev/pinned-images"]);
  assert.equal(record[image], `${image}@${digests.private}`);
});

test("imagePaths: a custom resource's images are pinned by /mutate inside the object, and recorded on it", async () => {
  const image = `${registry.host}/public/app:task`;
  const now = await push("public/app", "task", "task-1");
  const pinnedAlready = `${registry.host}/public/app:verify@${digests.verifyOnly}`;
  const r = await cluster.kubectl(["create", "-f", "-"], { input: task("build", [image, pinnedAlready]) });
  assert.equal(r.code, 0, r.stderr);
  const got = await kubectlJson(["get", `tasks.${TASK_GROUP}`, "build", "-n", NS]);
  assert.deepEqual(
    got.spec.steps.map((s: { image: string }) => s.image),
    [`${image}@${now}`, pinnedAlready],
  );
  assert.deepEqual(JSON.parse(got.metadata.annotations["imprimatur.dev/pinned-images"]), { [image]: `${image}@${now}` });
  const events = await eventsFor("build");
  assert.match(events.map((e) => e.message).join("\n"), /spec\.steps\[0\]\.image: .*public\/app:task → /);
});

test("imagePaths: a custom resource with an image no rule allows is refused at creation, naming the field", async () => {
  const r = await cluster.kubectl(["create", "-f", "-"], { input: task("outside", [`${registry.host}/public/app:1.0`, "quay.io/other/tool:1"]) });
  assert.notEqual(r.code, 0);
  assert.match(
    r.stderr,
    /images\.imprimatur\.dev.* denied the request: image "quay\.io\/other\/tool:1" \(spec\.steps\[1\]\.image\) denied by policy tasks default: Task images come from /,
  );
  const absent = await cluster.kubectl(["get", `tasks.${TASK_GROUP}`, "outside", "-n", NS]);
  assert.notEqual(absent.code, 0, "nothing was stored");
});
