// The real-node harness proved: a kubelet v1.20.2 on containerd 1.6 + runc + CNI, registered with the test
// kube-apiserver, runs pods from a private (htpasswd) registry with their pull secrets; with the image on the
// node, a pod without credentials runs too (the unprotected baseline `imprimatur node-proxy` is to close); a
// wrong secret with imagePullPolicy Always is refused by the registry; and stop() leaves nothing behind.
// One cluster, one registry and one node for the whole file.
import assert from "node:assert/strict";
import { existsSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { createPullSecret, startKubeCluster } from "../support/kube-cluster.ts";
import type { KubeCluster } from "../support/kube-cluster.ts";
import { startRegistry } from "../support/registry.ts";
import type { TestRegistry } from "../support/registry.ts";
import { buildRunnableImage } from "../support/runnable-image.ts";
import {
  CGROUP_PARENT,
  isAlive,
  NODE_HOST_DIRS,
  linkExists,
  observePod,
  podManifest,
  podPullFailed,
  podRunning,
  startNodeRuntime,
  sysctlValues,
  waitForPod,
} from "../support/real-node.ts";
import type { NodeRuntime, PodManifestOptions, PodObservation } from "../support/real-node.ts";

const NODE = "node1";
const NS = "e2e-node";
const cgroupParents = (): string[] => readdirSync("/sys/fs/cgroup").filter((h) => existsSync(join("/sys/fs/cgroup", h, CGROUP_PARENT)));

describe("a real node: kubelet v1.20.2 + containerd + runc + CNI", () => {
  // What the machine looked like just before the node started; the last test compares.
  let sysctlsBefore: Record<string, string | null>;
  let hostDirsBefore: string[];
  let cgroupParentsBefore: string[];
  let cluster: KubeCluster;
  let registry: TestRegistry;
  let node: NodeRuntime;
  let image: string;
  let nonRootImage: string;

  const pod = (o: Omit<PodManifestOptions, "namespace" | "nodeName">) => podManifest({ namespace: NS, nodeName: NODE, ...o });
  const context = () => `kubelet log tail:\n${node.kubeletLogs(30)}\ncontainerd log tail:\n${node.containerdLogs(15)}`;

  async function kubectl(...args: string[]): Promise<string> {
    const result = await cluster.kubectl(args);
    assert.equal(result.code, 0, `kubectl ${args.join(" ")} failed: ${result.stderr}`);
    return result.stdout;
  }

  async function create(manifest: string): Promise<void> {
    const result = await cluster.kubectl(["create", "-f", "-"], { input: manifest });
    assert.equal(result.code, 0, `kubectl create failed: ${result.stderr}`);
  }

  before(async () => {
    [cluster, registry] = await Promise.all([startKubeCluster({ nodes: [NODE] }), startRegistry({ auth: "htpasswd" })]);
    const built = buildRunnableImage({ tag: "v1", seed: "private-busybox-1" });
    buildRunnableImage({ tag: "nonroot", seed: "private-busybox-nonroot", user: "1000", dir: built.layoutDir });
    try {
      await registry.push(built.layoutDir, "v1", "private/busybox", "v1");
      await registry.push(built.layoutDir, "nonroot", "private/busybox", "nonroot");
    } finally {
      rmSync(built.layoutDir, { recursive: true, force: true });
    }
    image = `${registry.host}/private/busybox:v1`;
    nonRootImage = `${registry.host}/private/busybox:nonroot`;

    sysctlsBefore = sysctlValues();
    hostDirsBefore = NODE_HOST_DIRS.filter((path) => existsSync(path));
    cgroupParentsBefore = cgroupParents();
    node = await startNodeRuntime({ registries: [{ host: registry.host, caFile: registry.caFile }] });
    const started = await node.startKubelet({ cluster, nodeName: NODE });
    console.log(`[real-node] node ${started.nodeName} Ready ${started.readyMs} ms after the kubelet started`);

    await kubectl("create", "namespace", NS);
    const secret = (name: string, password: string) => createPullSecret(cluster, NS, name, registry, password);
    await secret("good-pull", registry.password);
    await secret("wrong-pull", `${registry.password}-wrong`);
  });

  after(async () => {
    // Each in turn, so one failure does not leave the others running. The node goes first (it needs the API).
    await node?.stop().catch((err: Error) => console.error(err.message));
    await cluster?.stop();
    await registry?.stop();
  });

  test("a pod with the pull secret pulls the private image and runs", async () => {
    await create(pod({ name: "with-secret", image, imagePullPolicy: "IfNotPresent", imagePullSecrets: ["good-pull"] }));
    const o = await waitForPod(cluster, NS, "with-secret", podRunning, 30_000, context);
    assert.ok(
      o.events.some((e) => e.reason === "Pulled" && e.message.includes(image)),
      `a Pulled event: ${JSON.stringify(o.events)}`,
    );
    assert.ok(linkExists(node.bridge), `the pod's network is on the run's bridge ${node.bridge}`);
    assert.ok(node.mounts().length > 0, "the run has mounts under its dir while pods run");
    const images = await node.ctr(["images", "list", "--quiet"]);
    assert.ok(images.stdout.split("\n").includes(image), `containerd holds ${image}: ${images.stdout}`);
  });

  test("unprotected baseline: with the image on the node, a pod WITHOUT any secret runs it too (IfNotPresent)", async () => {
    await create(pod({ name: "without-secret", image, imagePullPolicy: "IfNotPresent" }));
    const o = await waitForPod(cluster, NS, "without-secret", podRunning, 30_000, context);
    // The kubelet never asked the registry: this is the hole the node proxy is to close.
    assert.ok(
      o.events.some((e) => e.reason === "Pulled" && e.message.includes("already present on machine")),
      `"already present on machine": ${JSON.stringify(o.events)}`,
    );
  });

  test("a pod with a wrong secret and imagePullPolicy Always cannot pull: the registry refuses it", async () => {
    await create(pod({ name: "wrong-secret", image, imagePullPolicy: "Always", imagePullSecrets: ["wrong-pull"] }));
    // The kubelet reports the registry's answer in a "Failed to pull image" event next to ErrImagePull.
    const pullFailure = (o: PodObservation) => o.events.find((e) => e.reason === "Failed" && e.message.includes(`Failed to pull image "${image}"`));
    const o = await waitForPod(cluster, NS, "wrong-secret", (o) => podPullFailed(o) && pullFailure(o) !== undefined, 30_000, context);
    assert.notEqual(o.phase, "Running");
    assert.match(pullFailure(o)!.message, /401 Unauthorized/, "refused by the registry's authentication");
  });

  test("a runAsNonRoot pod runs an image whose config names User 1000", async () => {
    await create(
      pod({ name: "non-root", image: nonRootImage, imagePullPolicy: "IfNotPresent", imagePullSecrets: ["good-pull"], securityContext: { runAsNonRoot: true } }),
    );
    await waitForPod(cluster, NS, "non-root", podRunning, 30_000, context);
  });

  test("the kubelet restarts with an explicit image-service endpoint; running pods survive, new ones run", async () => {
    await node.stopKubelet();
    const restarted = await node.startKubelet({ cluster, nodeName: NODE, imageServiceEndpoint: node.containerdEndpoint });
    console.log(`[real-node] restarted kubelet Ready after ${restarted.readyMs} ms`);
    assert.ok(podRunning(await observePod(cluster, NS, "with-secret")), "the first pod still runs");
    await create(pod({ name: "after-restart", image, imagePullPolicy: "IfNotPresent", imagePullSecrets: ["good-pull"] }));
    await waitForPod(cluster, NS, "after-restart", podRunning, 30_000, context);
  });

  test("stop() leaves nothing behind: processes, mounts, bridge, cgroups, sysctls, directories", async () => {
    const pids = node.pidsSeen();
    assert.ok(pids.length >= 4, `containerd, kubelets, shims and containers were seen: ${pids.join(", ")}`);
    assert.ok(node.cgroups().length > 0, "the running containers have cgroups");
    const report = await node.stop();
    assert.deepEqual(report.problems, []);
    assert.deepEqual(
      pids.filter((pid) => isAlive(pid)),
      [],
      "no process of the run is alive",
    );
    assert.deepEqual(node.liveProcesses(), [], "nothing names the run's dir or sits in its containers' cgroups");
    const mountinfo = readFileSync("/proc/self/mountinfo", "utf8");
    assert.ok(!mountinfo.includes(node.dir), `no mount under ${node.dir}`);
    assert.equal(linkExists(node.bridge), false, `bridge ${node.bridge} deleted`);
    assert.deepEqual(node.cgroups(), [], "the containers' cgroups are gone");
    assert.equal(existsSync(node.dir), false, "the temp dir is removed");

    // Machine-wide state is shared with other runs of the harness that may be active (other test files): the
    // last run to stop restores what the first one found.
    if (!report.lastRun) {
      assert.ok(report.otherRuns > 0, "another run still holds the machine-wide state");
      return;
    }
    const originals = report.originals!;
    assert.deepEqual(sysctlValues(), originals.sysctls, "sysctls restored");
    assert.deepEqual(
      originals.createdHostDirs.filter((path) => existsSync(path)),
      [],
      "host directories the runs created are removed",
    );
    assert.deepEqual(
      cgroupParents().filter((h) => originals.createdCgroupParents.includes(join("/sys/fs/cgroup", h))),
      [],
      "the k8s.io cgroups the runs created are removed",
    );
    if (node.otherRunsAtStart === 0) {
      // Alone from start to end: the machine is exactly as this test found it.
      assert.deepEqual(sysctlValues(), sysctlsBefore, "sysctls as before the test");
      assert.deepEqual(
        NODE_HOST_DIRS.filter((path) => existsSync(path)),
        hostDirsBefore,
        "host directories as before the test",
      );
      assert.deepEqual(cgroupParents(), cgroupParentsBefore, "cgroup parents as before the test");
    }
  });
});
