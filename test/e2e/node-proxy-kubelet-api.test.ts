// `imprimatur node-proxy --kubeconfig` on a real node (kubelet v1.20.2, containerd 1.6, a private htpasswd
// registry and a public one, a real kube-apiserver): the decisions that use the API's view of the node's pods.
// ImageStatus names no pod: every pod on the node naming the image may be the caller, whatever its annotations.
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { after, before, describe, test } from "node:test";
import { decodePullImageResponse, encodePullImageRequest } from "../../src/cri/cri-messages.ts";
import { RuntimeImageClient } from "../../src/cri/image-service-proxy.ts";
import { createPullSecret, startKubeCluster, type KubeCluster } from "../support/kube-cluster.ts";
import { startNodeProxy, type NodeProxyProcess } from "../support/node-proxy-process.ts";
import {
  observePod,
  podManifest,
  podRunning,
  startNodeRuntime,
  waitForPod,
  waitForPullRefused,
  type NodeRuntime,
  type PodManifestOptions,
  type PodObservation,
} from "../support/real-node.ts";
import { startRegistry, type TestRegistry } from "../support/registry.ts";
import { buildRunnableImage } from "../support/runnable-image.ts";

const NODE = "node1";
const VICTIM_NS = "default";
const ATTACKER_NS = "attacker";
const TENANT_NS = "tenant";

describe("node-proxy with the API's view of the node's pods, with a real kubelet", () => {
  let dir: string;
  let cluster: KubeCluster;
  let priv: TestRegistry;
  let pub: TestRegistry;
  let node: NodeRuntime;
  let proxy: NodeProxyProcess;
  let images: { latest: string; untagged: string; preloaded: string; copy: string; owned: string };

  const context = () => `kubelet log tail:\n${node.kubeletLogs(25)}`;
  const withProxyLog = async (e: unknown): Promise<never> => {
    const log = (await proxy.log()).split("\n").slice(-30).join("\n");
    throw new Error(`${(e as Error).message}\nnode-proxy log:\n${log}`, { cause: e });
  };

  async function create(o: Omit<PodManifestOptions, "nodeName">): Promise<void> {
    const r = await cluster.kubectl(["create", "-f", "-"], { input: podManifest({ nodeName: NODE, ...o }) });
    assert.equal(r.code, 0, r.stderr);
  }

  async function forceDelete(namespace: string, name: string): Promise<void> {
    const r = await cluster.kubectl(["delete", "pod", name, "-n", namespace, "--grace-period=0", "--force"]);
    assert.equal(r.code, 0, r.stderr);
  }

  async function running(namespace: string, name: string): Promise<PodObservation> {
    return waitForPod(cluster, namespace, name, podRunning, 45_000, context).catch(withProxyLog);
  }

  /** The kubelet had to pull with the pod's own credentials (none here) and the registry said no. */
  async function refused(namespace: string, name: string): Promise<void> {
    await waitForPullRefused(cluster, namespace, name, context).catch(withProxyLog);
  }

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "imprimatur-e2e-node-kubelet-api-"));
    [cluster, priv, pub] = await Promise.all([startKubeCluster({ nodes: [NODE] }), startRegistry({ auth: "htpasswd" }), startRegistry({ auth: "none" })]);
    const latest = buildRunnableImage({ tag: "latest", seed: "kubelet-api-private-latest" });
    buildRunnableImage({ tag: "base", seed: "kubelet-api-preloaded-base", dir: latest.layoutDir });
    buildRunnableImage({ tag: "owned", seed: "kubelet-api-kubelet-owned-annotations", dir: latest.layoutDir });
    try {
      await priv.push(latest.layoutDir, "latest", "private/app", "latest");
      await pub.push(latest.layoutDir, "base", "public/base", "v1");
      // The same image, under a private name: its digest is the preloaded one's.
      await priv.push(latest.layoutDir, "base", "private/copy", "v1");
      await priv.push(latest.layoutDir, "owned", "private/owned", "latest");
      images = {
        latest: `${priv.host}/private/app:latest`,
        untagged: `${priv.host}/private/app`,
        preloaded: `${pub.host}/public/base:v1`,
        copy: `${priv.host}/private/copy:v1`,
        owned: `${priv.host}/private/owned:latest`,
      };
      node = await startNodeRuntime({ registries: [priv, pub].map((r) => ({ host: r.host, caFile: r.caFile })) });
      // Pulled straight through containerd before the proxy's first start: a preloaded image.
      const containerd = new RuntimeImageClient(node.containerdEndpoint);
      try {
        const pulled = await containerd.call("runtime.v1", "PullImage", encodePullImageRequest({ image: images.preloaded }), { deadline: Date.now() + 60_000 });
        assert.match(decodePullImageResponse(pulled).imageRef, /^sha256:/);
      } finally {
        containerd.close();
      }
      proxy = await startNodeProxy({
        dir,
        stateDir: join(dir, "state"),
        runtimeEndpoint: node.containerdEndpoint,
        args: ["--kubeconfig", cluster.nodeKubeconfig(NODE), "--node-name", NODE],
      });
      await node.startKubelet({ cluster, nodeName: NODE, imageServiceEndpoint: proxy.endpoint });
      for (const ns of [ATTACKER_NS, TENANT_NS]) assert.equal((await cluster.kubectl(["create", "namespace", ns])).code, 0);
      await createPullSecret(cluster, VICTIM_NS, "victim-pull", priv, priv.password);
      await createPullSecret(cluster, TENANT_NS, "tenant-pull", priv, priv.password);
    } finally {
      await rm(latest.layoutDir, { recursive: true, force: true });
    }
  });

  after(async () => {
    await node?.stop().catch((err: Error) => console.error(err.message));
    await proxy?.stop();
    await cluster?.stop();
    await Promise.all([priv?.stop(), pub?.stop()]);
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  test("an untagged name (the kubelet asks for :latest) does not borrow the secrets of a pod that names :latest", async () => {
    await create({ namespace: VICTIM_NS, name: "victim", image: images.latest, imagePullPolicy: "IfNotPresent", imagePullSecrets: ["victim-pull"] });
    await running(VICTIM_NS, "victim");
    // Another namespace, no secret, the same image without its tag; IfNotPresent is explicit (untagged defaults to Always).
    await create({ namespace: ATTACKER_NS, name: "attacker", image: images.untagged, imagePullPolicy: "IfNotPresent" });
    await refused(ATTACKER_NS, "attacker");
    // Pods naming the same image are not told apart: with the attacker's pod gone, a pod of that name with a secret
    // of its own runs, matched by its Secrets (Never: it cannot pull).
    assert.equal((await cluster.kubectl(["delete", "pod", "attacker", "-n", ATTACKER_NS, "--grace-period=0", "--force"])).code, 0);
    await create({ namespace: TENANT_NS, name: "tenant", image: images.untagged, imagePullPolicy: "Never", imagePullSecrets: ["tenant-pull"] });
    await running(TENANT_NS, "tenant");
  });

  test("a record for another name of a preloaded image leaves the preloaded name preloaded (kubernetes#138175)", async () => {
    await create({ namespace: TENANT_NS, name: "preloaded-before", image: images.preloaded, imagePullPolicy: "Never" });
    await running(TENANT_NS, "preloaded-before");
    // Another tenant pulls the same image under its private name, with credentials: a record for the digest.
    await create({ namespace: TENANT_NS, name: "copy", image: images.copy, imagePullPolicy: "IfNotPresent", imagePullSecrets: ["tenant-pull"] });
    await running(TENANT_NS, "copy");
    await create({ namespace: ATTACKER_NS, name: "preloaded-after", image: images.preloaded, imagePullPolicy: "Never" });
    await running(ATTACKER_NS, "preloaded-after");
    // ...and the private name is still not everybody's.
    await create({ namespace: ATTACKER_NS, name: "copy-no-secret", image: images.copy, imagePullPolicy: "IfNotPresent" });
    await refused(ATTACKER_NS, "copy-no-secret");
  });

  // ImageStatus names no pod, only its annotations as the kubelet sees them; the kubelet writes
  // kubernetes.io/config.seen and config.source itself and keeps its own values whatever the API says.
  test("a pod that sets kubernetes.io/config.seen itself does not borrow another namespace's secrets", async () => {
    await create({ namespace: VICTIM_NS, name: "owned-victim", image: images.owned, imagePullPolicy: "IfNotPresent", imagePullSecrets: ["victim-pull"] });
    await running(VICTIM_NS, "owned-victim");
    await create({
      namespace: ATTACKER_NS,
      name: "forged-seen",
      image: images.owned,
      imagePullPolicy: "IfNotPresent",
      annotations: { "kubernetes.io/config.seen": "x" },
    });
    await refused(ATTACKER_NS, "forged-seen");
    assert.ok(podRunning(await observePod(cluster, VICTIM_NS, "owned-victim")), "the victim is unaffected");
    await forceDelete(ATTACKER_NS, "forged-seen");
  });

  test("an annotation changed after the kubelet saw the pod (the kubelet keeps its own config.source) does not take the pod out", async () => {
    await create({ namespace: ATTACKER_NS, name: "changed-source", image: images.owned, imagePullPolicy: "IfNotPresent" });
    await refused(ATTACKER_NS, "changed-source");
    // The API now says config.source is "x"; the kubelet's view, and so every later call for the pod, still says "api".
    const r = await cluster.kubectl(["annotate", "pod", "changed-source", "-n", ATTACKER_NS, "kubernetes.io/config.source=x"]);
    assert.equal(r.code, 0, r.stderr);
    // The kubelet retries the pod every ~10 s and asks ImageStatus each time: two more asks, each answered "absent".
    const mustPull = () => proxy.metric('imprimatur_node_image_checks_total{result="must-pull"}');
    const before = await mustPull();
    for (const deadline = Date.now() + 60_000; ; await sleep(500)) {
      const seen = await observePod(cluster, ATTACKER_NS, "changed-source");
      const started = podRunning(seen) || seen.events.some((e) => e.message.includes("already present on machine"));
      assert.ok(!started, `the pod started without credentials: ${JSON.stringify(seen.events)}`);
      if ((await mustPull()) >= before + 2) break;
      assert.ok(Date.now() < deadline, `the kubelet did not ask again within 60 s\n${context()}`);
    }
    assert.ok(podRunning(await observePod(cluster, VICTIM_NS, "owned-victim")), "the victim is unaffected");
    await forceDelete(ATTACKER_NS, "changed-source");
  });

  test("beside a pod without credentials, a pod with the recorded one is answered from the records, once a GET of its pod (the kubelet's UID) shows it pulls IfNotPresent", async () => {
    // The victim pulled images.latest with victim-pull; tenant-pull holds the same credential.
    await create({ namespace: ATTACKER_NS, name: "no-secret", image: images.latest, imagePullPolicy: "IfNotPresent" });
    await refused(ATTACKER_NS, "no-secret");
    const fromRecords = () => proxy.metric('imprimatur_node_pulls_total{result="answered-from-records"}');
    const before = await fromRecords();
    // "no-secret" is a candidate of every ImageStatus for the image: absent, so the kubelet pulls with tenant-pull,
    // and that pull is answered from the records (the record holds the credential; the pod's policy is IfNotPresent).
    await create({ namespace: TENANT_NS, name: "reuser", image: images.latest, imagePullPolicy: "IfNotPresent", imagePullSecrets: ["tenant-pull"] });
    await running(TENANT_NS, "reuser");
    assert.equal(await fromRecords(), before + 1);
    await forceDelete(ATTACKER_NS, "no-secret");
    await forceDelete(TENANT_NS, "reuser");
  });
});
