// Imprimatur installed as a user installs it, on a real small cluster (small-cluster.ts): the image built by
// `npm run image` (scripts/build-image.ts) is pushed to a private registry, and the v1.20 install
// (deploy/overlays/kube-1.20) is applied with `kubectl apply -k` through an overlay of the kind a user writes —
// the image name and digest (kustomize `images:`) and the registry's pull secret on the ServiceAccount. The
// apiserver then calls the Imprimatur pods through the installed webhook configurations (clientConfig.service):
// a denied pod is refused, an allowed one runs; with Imprimatur scaled to 0, kube-system still gets its pods
// while other namespaces' pod creates fail closed. One registry and one cluster for the whole file.
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, describe, test } from "node:test";
import { runCommand } from "../support/command.ts";
import { untilWebhookActive } from "../support/kube-cluster.ts";
import { createPullSecret, observePod, podRunning, waitForPod } from "../support/real-node.ts";
import { startRegistry, type TestRegistry } from "../support/registry.ts";
import { buildRunnableImage } from "../support/runnable-image.ts";
import { startSmallCluster, type SmallCluster } from "../support/small-cluster.ts";

const PROJECT_DIR = fileURLToPath(new URL("../..", import.meta.url));
const INSTALL = join(PROJECT_DIR, "deploy", "overlays", "kube-1.20");
const APP_NS = "install-app";
const PULL_SECRET = "private-registry";
const DENY_MESSAGE = "images from the forbidden repository may not run here";

describe("Imprimatur installed with kubectl apply -k on a small cluster", () => {
  let registry: TestRegistry;
  let cluster: SmallCluster;
  let workDir: string;
  let allowedImage: string;
  let forbiddenImage: string;

  async function kubectl(...args: string[]): Promise<string> {
    const result = await cluster.kubectl(args, { timeoutMs: 60_000 });
    assert.equal(result.code, 0, `kubectl ${args.join(" ")} failed: ${result.stderr}`);
    return result.stdout;
  }
  const context = async () => {
    const pods = await cluster.kubectl(["get", "pods", "-n", "imprimatur", "-o", "wide"]);
    const logs = await cluster.kubectl(["logs", "-n", "imprimatur", "-l", "app.kubernetes.io/name=imprimatur", "--tail=30"]);
    return `imprimatur pods:\n${pods.stdout}${pods.stderr}\nlogs:\n${logs.stdout}${logs.stderr}\nkubelet:\n${cluster.componentLogs("kubelet", 20)}`;
  };
  const pod = (name: string, namespace: string, image: string) =>
    JSON.stringify({
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name, namespace },
      spec: {
        terminationGracePeriodSeconds: 1,
        imagePullSecrets: [{ name: PULL_SECRET }],
        containers: [{ name: "main", image }],
      },
    });

  before(async () => {
    workDir = mkdtempSync(join(tmpdir(), "imprimatur-install-"));
    registry = await startRegistry({ auth: "htpasswd" });

    // The image, as `npm run image` builds it.
    const layout = join(workDir, "image");
    const built = await runCommand(process.execPath, [join(PROJECT_DIR, "scripts", "build-image.ts"), "--output", layout, "--tag", "e2e"], {
      env: process.env,
      timeoutMs: 300_000,
      label: "[install] npm run image",
    });
    assert.equal(built.code, 0, `build-image failed: ${built.stderr}`);
    await registry.push(layout, "e2e", "imprimatur/imprimatur", "e2e");
    const { digest: imprimaturDigest } = await registry.inspectRaw("imprimatur/imprimatur", "e2e");

    // Workload images, referred to by digest: the pinning webhook has nothing to resolve.
    for (const repository of ["allowed/busybox", "forbidden/busybox"]) {
      const image = buildRunnableImage({ tag: "v1", seed: `install-${repository}` });
      try {
        await registry.push(image.layoutDir, "v1", repository, "v1");
      } finally {
        rmSync(image.layoutDir, { recursive: true, force: true });
      }
      const ref = `${registry.host}/${repository}@${image.digest}`;
      if (repository.startsWith("allowed")) allowedImage = ref;
      else forbiddenImage = ref;
    }

    cluster = await startSmallCluster({ registries: [{ host: registry.host, caFile: registry.caFile }] });
    // On v1.20 the namespaceSelector's exclusions need these labels (the overlay's instructions).
    await kubectl("label", "namespace", "kube-system", "kubernetes.io/metadata.name=kube-system", "--overwrite");
    await cluster.createNamespace("imprimatur", { "kubernetes.io/metadata.name": "imprimatur" });
    for (const ns of ["imprimatur", "kube-system"]) await createPullSecret(cluster, ns, PULL_SECRET, registry, registry.password);
    await cluster.createNamespace(APP_NS);
    await createPullSecret(cluster, APP_NS, PULL_SECRET, registry, registry.password);

    // The user's overlay: where the image is, and the pull secret for it.
    const overlay = join(workDir, "overlay");
    mkdirSync(overlay);
    writeFileSync(
      join(overlay, "kustomization.yaml"),
      [
        "apiVersion: kustomize.config.k8s.io/v1beta1",
        "kind: Kustomization",
        "bases:",
        // kubectl v1.20's kustomize takes no absolute base.
        `  - ${relative(overlay, INSTALL)}`,
        "images:",
        "  - name: imprimatur",
        `    newName: ${registry.host}/imprimatur/imprimatur`,
        `    digest: ${imprimaturDigest}`,
        "patchesStrategicMerge:",
        "  - service-account-pull-secret.yaml",
        "",
      ].join("\n"),
    );
    writeFileSync(
      join(overlay, "service-account-pull-secret.yaml"),
      [
        "apiVersion: v1",
        "kind: ServiceAccount",
        "metadata:",
        "  name: imprimatur",
        "  namespace: imprimatur",
        "imagePullSecrets:",
        `  - name: ${PULL_SECRET}`,
        "",
      ].join("\n"),
    );
    const applied = await cluster.kubectl(["apply", "-k", overlay], { timeoutMs: 120_000 });
    assert.equal(applied.code, 0, `kubectl apply -k: ${applied.stderr}`);
    const rollout = await cluster.kubectl(["rollout", "status", "deployment/imprimatur", "-n", "imprimatur", "--timeout=240s"], { timeoutMs: 250_000 });
    assert.equal(rollout.code, 0, `rollout: ${rollout.stdout} ${rollout.stderr}\n${await context()}`);

    const policy = {
      apiVersion: "imprimatur.dev/v1alpha1",
      kind: "ImagePolicy",
      metadata: { name: "no-forbidden-repository" },
      spec: { rules: [{ action: "deny", images: [`${registry.host}/forbidden/*`], message: DENY_MESSAGE }], default: "allow" },
    };
    const created = await cluster.apply(JSON.stringify(policy));
    assert.equal(created.code, 0, created.stderr);
    await untilWebhookActive(cluster, pod("probe", APP_NS, forbiddenImage), (p) => p.stderr.includes(DENY_MESSAGE), { context });
  });

  after(async () => {
    await cluster?.stop();
    await registry?.stop();
    if (workDir) rmSync(workDir, { recursive: true, force: true });
  });

  test("the installed webhooks refuse a denied pod and admit an allowed one, which runs", async () => {
    const denied = await cluster.kubectl(["create", "-f", "-"], { input: pod("denied", APP_NS, forbiddenImage) });
    assert.notEqual(denied.code, 0, "the forbidden image is refused");
    assert.match(denied.stderr, /admission webhook "images\.imprimatur\.dev" denied the request/);
    assert.ok(denied.stderr.includes(DENY_MESSAGE), denied.stderr);
    const allowed = await cluster.kubectl(["create", "-f", "-"], { input: pod("allowed", APP_NS, allowedImage) });
    assert.equal(allowed.code, 0, allowed.stderr);
    await waitForPod(cluster, APP_NS, "allowed", podRunning, 60_000, () => cluster.componentLogs("kubelet", 20));
  });

  test("an invalid policy applied with kubectl shows its error in its status and an Event; the previous generation stays in force", async () => {
    const broken = {
      apiVersion: "imprimatur.dev/v1alpha1",
      kind: "ImagePolicy",
      metadata: { name: "no-forbidden-repository" },
      spec: { rules: [{ action: "deny", images: ["[not-a-pattern"], message: DENY_MESSAGE }], default: "allow" },
    };
    const applied = await cluster.apply(JSON.stringify(broken));
    assert.equal(applied.code, 0, `the apiserver's schema accepts it (only the loader can tell): ${applied.stderr}`);
    type Condition = { type: string; status: string; reason?: string; message?: string; observedGeneration?: number };
    let ready: Condition | undefined;
    for (let i = 0; i < 150; i++) {
      const got = JSON.parse(await kubectl("get", "imagepolicy", "no-forbidden-repository", "-o", "json"));
      ready = (got.status?.conditions as Condition[] | undefined)?.find((c) => c.type === "Ready");
      if (ready?.status === "False" && ready.observedGeneration === got.metadata.generation) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    assert.equal(ready?.status, "False", `status: ${JSON.stringify(ready)}\n${await context()}`);
    assert.equal(ready?.reason, "InvalidPolicy");
    assert.match(ready?.message ?? "", /spec\.rules\[0\]\.images\[0\]/);
    assert.match(ready?.message ?? "", /generation 1 stays in force/);
    const events = JSON.parse(
      await kubectl("get", "events", "-n", "default", "--field-selector", "involvedObject.name=no-forbidden-repository,type=Warning", "-o", "json"),
    ).items as Array<{ reason: string; message: string }>;
    assert.ok(
      events.some((e) => e.reason === "InvalidPolicy" && e.message.includes("spec.rules[0].images[0]")),
      `a Warning Event: ${JSON.stringify(events)}`,
    );
    const stillDenied = await cluster.kubectl(["create", "--dry-run=server", "-f", "-"], { input: pod("still-denied", APP_NS, forbiddenImage) });
    assert.notEqual(stillDenied.code, 0);
    assert.ok(stillDenied.stderr.includes(DENY_MESSAGE), stillDenied.stderr);
  });

  test("deleting one replica's pod during a stream of admissions fails none of them; the new replica keeps the CA", async () => {
    const caBundles = async () =>
      JSON.stringify(
        await Promise.all(
          ["validatingwebhookconfiguration", "mutatingwebhookconfiguration"].map(async (kind) =>
            (await kubectl("get", kind, "imprimatur", "-o", "jsonpath={.webhooks[*].clientConfig.caBundle}")).trim(),
          ),
        ),
      );
    const caBefore = await caBundles();
    assert.doesNotMatch(caBefore, /""/, `both configurations carry a caBundle: ${caBefore}`);
    const replicas = (await kubectl("get", "pods", "-n", "imprimatur", "-l", "app.kubernetes.io/name=imprimatur", "-o", "name")).trim().split("\n");
    assert.equal(replicas.length, 2, `two replicas: ${replicas.join(", ")}`);
    const failures: string[] = [];
    let admitted = 0;
    let streaming = true;
    const stream = (async () => {
      for (let i = 0; streaming; i++) {
        const r = await cluster.kubectl(["create", "--dry-run=server", "-f", "-"], { input: pod(`stream-${i}`, APP_NS, allowedImage) });
        if (r.code === 0) admitted++;
        else failures.push(r.stderr.trim());
      }
    })();
    try {
      await new Promise((r) => setTimeout(r, 2_000));
      await kubectl("delete", "-n", "imprimatur", replicas[0]!, "--wait=false");
      // Until the replacement is ready and the deleted pod is gone.
      const rollout = await cluster.kubectl(["rollout", "status", "deployment/imprimatur", "-n", "imprimatur", "--timeout=180s"], { timeoutMs: 190_000 });
      assert.equal(rollout.code, 0, rollout.stderr);
      for (let i = 0; i < 300; i++) {
        const left = await kubectl("get", "pods", "-n", "imprimatur", "-l", "app.kubernetes.io/name=imprimatur", "-o", "name");
        if (!left.includes(replicas[0]!)) break;
        await new Promise((r) => setTimeout(r, 200));
      }
      await new Promise((r) => setTimeout(r, 2_000));
    } finally {
      streaming = false;
      await stream;
    }
    assert.deepEqual(failures, [], `${failures.length} of ${failures.length + admitted} admissions failed`);
    assert.ok(admitted > 0);
    assert.equal(await caBundles(), caBefore, "the webhook configurations trust the same CA after the restart");
  });

  test("scaled to 0, the default install still lets kube-system create pods; elsewhere pod creates fail closed", async () => {
    await kubectl("scale", "deployment/imprimatur", "-n", "imprimatur", "--replicas=0");
    // A terminating replica stays an endpoint until the kubelet reports it gone: wait for the pods to go.
    for (let i = 0; ; i++) {
      const left = await kubectl("get", "pods", "-n", "imprimatur", "-l", "app.kubernetes.io/name=imprimatur", "-o", "name");
      if (left.trim() === "") break;
      assert.ok(i < 300, `the Imprimatur pods did not go: ${left}`);
      await new Promise((r) => setTimeout(r, 200));
    }
    const system = await cluster.kubectl(["create", "-f", "-"], { input: pod("system-pod", "kube-system", allowedImage) });
    assert.equal(system.code, 0, `kube-system is excluded from the webhooks: ${system.stderr}`);
    await waitForPod(cluster, "kube-system", "system-pod", podRunning, 60_000);
    const refused = await cluster.kubectl(["create", "-f", "-"], { input: pod("while-down", APP_NS, allowedImage) });
    assert.notEqual(refused.code, 0, "failurePolicy Fail: nothing is admitted unchecked");
    assert.match(refused.stderr, /failed calling webhook "(images|pins)\.imprimatur\.dev"/);
    assert.match(refused.stderr, /no endpoints available for service "imprimatur"/);
    assert.equal((await observePod(cluster, APP_NS, "while-down")).phase, "Absent");
  });
});
