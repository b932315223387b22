// `imprimatur node-proxy` on a real node: kubelet v1.20.2 (CRI v1alpha2) with --image-service-endpoint on the
// proxy, containerd 1.6 behind it, a private docker-registry (htpasswd) and a public one (no auth), registered with
// a real kube-apiserver. The hole test/e2e/real-node.test.ts shows on an unprotected node (a pod without the
// secret runs a private image already present) is closed, and everything else keeps working; with the proxy
// stopped, no new pod runs and running ones are not affected. One cluster, one node, one pair of registries for the
// file.
// The proxy runs as it does on a node: from the bundle `npm run node-bundle` builds, by the shipped systemd unit's
// ExecStart with an environment file (systemd itself is not needed). Its first start comes before containerd is up
// (the runtime endpoint is a link that does not exist yet): it fails, and the next start still records the images
// then on the node as preloaded.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtemp, rm, symlink } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { createPullSecret, startKubeCluster, type KubeCluster } from "../support/kube-cluster.ts";
import { decodeImageStatusResponse, encodeImageStatusRequestFor } from "../../src/cri/cri-messages.ts";
import { RuntimeImageClient } from "../../src/cri/image-service-proxy.ts";
import { imprimatur, REPO_ROOT } from "../support/cli-process.ts";
import { startNodeProxyFromUnit, type NodeProxyProcess } from "../support/node-proxy-process.ts";
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
const NS = "protected";

describe("node-proxy in front of containerd, with a real kubelet", () => {
  let dir: string;
  let cluster: KubeCluster;
  let priv: TestRegistry;
  let pub: TestRegistry;
  let node: NodeRuntime;
  let proxy: NodeProxyProcess;
  let stateDir: string;
  let images: { private: string; nonRoot: string; public: string; moving: string };
  let layoutDir: string;
  let movedDigest: string;
  let bundle: string;
  /** Where the environment file says containerd is: a link to its socket once it is "up". */
  let runtimeLink: string;
  /** How the first start, before containerd was up, ended. */
  let firstStart: string;

  const pod = (o: Omit<PodManifestOptions, "namespace" | "nodeName">) => podManifest({ namespace: NS, nodeName: NODE, ...o });
  const context = () => `node-proxy log:\n${proxyLogTail}\nkubelet log tail:\n${node.kubeletLogs(25)}`;
  let proxyLogTail = "";
  const refreshLog = async () => {
    proxyLogTail = (await proxy.log()).split("\n").slice(-25).join("\n");
  };

  async function kubectl(...args: string[]): Promise<string> {
    const r = await cluster.kubectl(args);
    assert.equal(r.code, 0, `kubectl ${args.join(" ")}: ${r.stderr}`);
    return r.stdout;
  }

  async function run(name: string, o: Omit<PodManifestOptions, "namespace" | "nodeName" | "name">): Promise<PodObservation> {
    const r = await cluster.kubectl(["create", "-f", "-"], { input: pod({ name, ...o }) });
    assert.equal(r.code, 0, r.stderr);
    try {
      return await waitForPod(cluster, NS, name, podRunning, 45_000, context);
    } catch (e) {
      await refreshLog();
      throw new Error(`${(e as Error).message}\n${context()}`, { cause: e });
    }
  }

  /** The pod must not run: the kubelet tried to pull with its credentials and the registry said no. */
  async function refused(name: string, o: Omit<PodManifestOptions, "namespace" | "nodeName" | "name">): Promise<PodObservation> {
    const r = await cluster.kubectl(["create", "-f", "-"], { input: pod({ name, ...o }) });
    assert.equal(r.code, 0, r.stderr);
    return waitForPullRefused(cluster, NS, name, context);
  }

  async function startProxy(args: string[] = []): Promise<void> {
    proxy = await startNodeProxyFromUnit({ dir, stateDir, runtimeEndpoint: `unix://${runtimeLink}`, args, bundle });
  }

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "imprimatur-e2e-node-kubelet-"));
    stateDir = join(dir, "state");
    runtimeLink = join(dir, "containerd.sock");
    [cluster, priv, pub, bundle] = await Promise.all([
      startKubeCluster({ nodes: [NODE] }),
      startRegistry({ auth: "htpasswd" }),
      startRegistry({ auth: "none" }),
      buildBundle(join(dir, "bundle")),
    ]);
    const built = buildRunnableImage({ tag: "v1", seed: "kubelet-proxy-private-1" });
    buildRunnableImage({ tag: "nonroot", seed: "kubelet-proxy-nonroot", user: "1000", dir: built.layoutDir });
    buildRunnableImage({ tag: "tool", seed: "kubelet-proxy-public", dir: built.layoutDir });
    buildRunnableImage({ tag: "moving", seed: "kubelet-proxy-moving-1", dir: built.layoutDir });
    movedDigest = buildRunnableImage({ tag: "moved", seed: "kubelet-proxy-moving-2", dir: built.layoutDir }).digest;
    layoutDir = built.layoutDir; // kept until after(): the Always test pushes "moved" later
    await priv.push(layoutDir, "v1", "private/app", "v1");
    await priv.push(layoutDir, "nonroot", "private/app", "nonroot");
    await priv.push(layoutDir, "moving", "private/app", "moving");
    await pub.push(layoutDir, "tool", "public/tool", "v1");
    images = {
      private: `${priv.host}/private/app:v1`,
      nonRoot: `${priv.host}/private/app:nonroot`,
      public: `${pub.host}/public/tool:v1`,
      moving: `${priv.host}/private/app:moving`,
    };
    firstStart = await startProxy().then(
      () => "served",
      (e: Error) => e.message,
    );
    node = await startNodeRuntime({ registries: [priv, pub].map((r) => ({ host: r.host, caFile: r.caFile })) });
    await symlink(node.containerdSocket, runtimeLink); // containerd is up
    await startProxy();
    await node.startKubelet({ cluster, nodeName: NODE, imageServiceEndpoint: proxy.endpoint });
    await kubectl("create", "namespace", NS);
    const secret = (name: string, password: string) => createPullSecret(cluster, NS, name, priv, password);
    await secret("good-pull", priv.password);
    await secret("same-credentials", priv.password);
    await secret("wrong-pull", `${priv.password}-wrong`);
  });

  after(async () => {
    await node?.stop().catch((err: Error) => console.error(err.message));
    await proxy?.stop();
    await cluster?.stop();
    await Promise.all([priv?.stop(), pub?.stop()]);
    if (dir) await rm(dir, { recursive: true, force: true });
    if (layoutDir) await rm(layoutDir, { recursive: true, force: true });
  });

  test("a first start before containerd was up fails and records nothing; the next start takes the snapshot of preloaded images", async () => {
    assert.match(firstStart, /exited with 2/);
    assert.match(firstStart, /the container runtime at unix:\/\/\S+ is not answering/);
    assert.match(firstStart, /no start has completed yet: the next start records the images then on the node as preloaded/);
    const listed = JSON.parse((await imprimatur(["node-records", "--state-dir", stateDir, "-o", "json"])).stdout);
    assert.equal(listed.summary.snapshot, "taken");
    const client = new RuntimeImageClient(proxy.endpoint);
    try {
      // The sandbox image was imported into containerd before the proxy ever ran: baked into the node.
      const baked = decodeImageStatusResponse(await client.call("runtime.v1alpha2", "ImageStatus", encodeImageStatusRequestFor(node.pauseImage, {})));
      assert.ok(baked, `${node.pauseImage} is on the node`);
      assert.ok(
        listed.images.some((r: { imageRef: string; access: string }) => r.imageRef === baked.id && r.access === "preloaded"),
        JSON.stringify(listed),
      );
      const pod = { "kubernetes.io/config.source": "api", "kubernetes.io/config.seen": "2026-11-25T10:00:00Z" };
      const forPod = decodeImageStatusResponse(await client.call("runtime.v1alpha2", "ImageStatus", encodeImageStatusRequestFor(node.pauseImage, pod)));
      assert.equal(forPod?.id, baked.id, "a pod without credentials may use it: preloaded");
    } finally {
      client.close();
    }
  });

  test("a pod with the pull secret runs the private image (IfNotPresent)", async () => {
    await run("with-secret", { image: images.private, imagePullPolicy: "IfNotPresent", imagePullSecrets: ["good-pull"] });
  });

  test("with the image on the node, pods without a secret or with a wrong one do not run: the registry refuses them", async () => {
    await refused("no-secret", { image: images.private, imagePullPolicy: "IfNotPresent" });
    await refused("wrong-secret", { image: images.private, imagePullPolicy: "IfNotPresent", imagePullSecrets: ["wrong-pull"] });
    const log = await proxy.log();
    assert.match(log, /"name":"no-secret".*pod refused an image already on the node/, "one log line per denied reuse, naming the pod");
    assert.ok((await proxy.metric("imprimatur_node_reuse_denied_total")) >= 2);
  });

  test("another Secret holding the same credentials runs; without the API's view the pull still goes to the registry", async () => {
    // Without --kubeconfig the proxy cannot tell an imagePullPolicy: Always pull (a kubelet before 1.32 sends it
    // the same way), which must reach the registry: no pull is answered from the records.
    const before = await proxy.metric('imprimatur_node_pulls_total{result="forwarded-ok"}');
    await run("same-credentials", { image: images.private, imagePullPolicy: "IfNotPresent", imagePullSecrets: ["same-credentials"] });
    assert.equal(await proxy.metric('imprimatur_node_pulls_total{result="forwarded-ok"}'), before + 1);
    assert.equal(await proxy.metric('imprimatur_node_pulls_total{result="answered-from-records"}'), 0);
    const records = await imprimatur(["node-records", "--state-dir", stateDir]);
    assert.match(
      records.stdout,
      new RegExp(`${priv.host}/private/app: pods showing this credential: .*last presented by ${NS}/with-secret, ${NS}/same-credentials`),
    );
  });

  test("imagePullPolicy Always is never answered from the records: a tag moved in the registry is pulled", async () => {
    await run("moving-first", { image: images.moving, imagePullPolicy: "IfNotPresent", imagePullSecrets: ["good-pull"] });
    await priv.push(layoutDir, "moved", "private/app", "moving");
    const seen = await run("moving-always", { image: images.moving, imagePullPolicy: "Always", imagePullSecrets: ["same-credentials"] });
    const imageID = String(seen.pod.status.containerStatuses[0].imageID);
    assert.ok(imageID.endsWith(movedDigest), `the pod runs the tag's new digest ${movedDigest}, not ${imageID}`);
  });

  test("a public image pulled without credentials: a second pod without credentials runs it", async () => {
    await run("public-1", { image: images.public, imagePullPolicy: "IfNotPresent" });
    await run("public-2", { image: images.public, imagePullPolicy: "IfNotPresent" });
  });

  test("runAsNonRoot pods start: the kubelet's image-user lookup is answered truthfully", async () => {
    const nonRoot = { image: images.nonRoot, imagePullPolicy: "IfNotPresent" as const, securityContext: { runAsNonRoot: true } };
    await run("non-root-1", { ...nonRoot, imagePullSecrets: ["good-pull"] });
    await run("non-root-2", { ...nonRoot, imagePullSecrets: ["same-credentials"] });
  });

  test("kill -9 of the proxy and a restart: the records survive; without the secret still refused, with it runs", async () => {
    await proxy.kill9();
    await startProxy();
    await refused("after-crash-no-secret", { image: images.private, imagePullPolicy: "IfNotPresent" });
    await run("after-crash-secret", { image: images.private, imagePullPolicy: "IfNotPresent", imagePullSecrets: ["good-pull"] });
  });

  test("imagePullPolicy Never: refused without API access; with --kubeconfig (the node's identity) the pod's own Secrets let it run", async () => {
    const never = { image: images.private, imagePullPolicy: "Never" as const };
    const neverPull = (x: PodObservation) => x.waitingReasons.includes("ErrImageNeverPull");
    const create = async (name: string, secrets?: string[]) => {
      const r = await cluster.kubectl(["create", "-f", "-"], { input: pod({ name, ...never, ...(secrets ? { imagePullSecrets: secrets } : {}) }) });
      assert.equal(r.code, 0, r.stderr);
    };
    await create("never-no-api", ["good-pull"]);
    await waitForPod(cluster, NS, "never-no-api", neverPull, 45_000, context);

    await proxy.stop();
    await startProxy(["--kubeconfig", cluster.nodeKubeconfig(NODE), "--node-name", NODE]);
    // ImageStatus names no pod: every pod on the node naming the image may be the caller, and the secrets of every
    // one must hold a recorded credential. The pods refused above (no secret, a wrong one) still name it.
    await create("never-with-api", ["same-credentials"]);
    await waitForPod(cluster, NS, "never-with-api", neverPull, 45_000, context);
    for (const refusedPod of ["no-secret", "wrong-secret", "after-crash-no-secret"])
      await kubectl("delete", "pod", refusedPod, "-n", NS, "--grace-period=0", "--force");
    // The kubelet retries the pod (every ~10 s); with those pods gone, every pod naming the image holds the credential.
    await waitForPod(cluster, NS, "never-with-api", podRunning, 45_000, context);
    assert.ok((await proxy.metric('imprimatur_node_image_checks_total{result="pod-secrets"}')) >= 1);
    for (const name of ["never-good-1", "never-good-2"]) await create(name, ["good-pull"]);
    for (const name of ["never-good-1", "never-good-2"]) await waitForPod(cluster, NS, name, podRunning, 45_000, context);
    await create("never-wrong-secret", ["wrong-pull"]);
    await waitForPod(cluster, NS, "never-wrong-secret", neverPull, 45_000, context);
    await create("never-no-secret");
    await waitForPod(cluster, NS, "never-no-secret", neverPull, 45_000, context);
  });

  test("--verification-policy NeverVerify turns the check off, as the kubelet's setting does", async () => {
    await proxy.stop();
    await startProxy(["--verification-policy", "NeverVerify"]);
    await run("never-verify", { image: images.private, imagePullPolicy: "IfNotPresent" });
    await proxy.stop();
    await startProxy();
  });

  test("the proxy down: new pods do not run (the kubelet cannot even inspect their image: ImageInspectError), running ones keep running; back, the pod starts", async () => {
    const running = await run("running-before-down", { image: images.public, imagePullPolicy: "IfNotPresent" });
    const container = (o: PodObservation) => o.pod.status.containerStatuses[0];
    buildRunnableImage({ tag: "down", seed: "kubelet-proxy-down", dir: layoutDir });
    await pub.push(layoutDir, "down", "public/tool", "down");
    const fresh = `${pub.host}/public/tool:down`;
    await proxy.stop();
    // One pod may use its image (public, not on the node yet); the other may not (private, on the node, no secret).
    const downPods = { "while-down": fresh, "while-down-no-secret": images.private };
    for (const [name, image] of Object.entries(downPods)) {
      const r = await cluster.kubectl(["create", "-f", "-"], { input: pod({ name, image, imagePullPolicy: "IfNotPresent" }) });
      assert.equal(r.code, 0, r.stderr);
    }
    for (const name of Object.keys(downPods)) {
      const inspectFailed = (o: PodObservation) =>
        o.events.find((e) => e.reason === "InspectFailed" && /Failed to inspect image .*code = Unavailable/.test(e.message));
      const seen = await waitForPod(
        cluster,
        NS,
        name,
        (o) => o.waitingReasons.includes("ImageInspectError") && inspectFailed(o) !== undefined,
        45_000,
        context,
      );
      assert.notEqual(seen.phase, "Running", name);
    }
    const listed = await node.ctr(["images", "ls", "-q"]);
    assert.equal(listed.code, 0, listed.stderr);
    assert.ok(!listed.stdout.split("\n").includes(fresh), "nothing was pulled");
    const still = await observePod(cluster, NS, "running-before-down");
    assert.ok(podRunning(still), "the running pod keeps running");
    assert.deepEqual(
      [container(still).containerID, container(still).state.running.startedAt, container(still).restartCount],
      [container(running).containerID, container(running).state.running.startedAt, 0],
      "the same container, never restarted",
    );

    await startProxy();
    // The kubelet retries the pod (every ~10 s) and reconnects to the socket: the pull goes through the proxy.
    await waitForPod(cluster, NS, "while-down", podRunning, 45_000, context);
    assert.equal(await proxy.metric('imprimatur_node_pulls_total{result="forwarded-ok"}'), 1);
    assert.notEqual((await observePod(cluster, NS, "while-down-no-secret")).phase, "Running");
  });
});

/** `npm run node-bundle` into OUT (the folder only): the bundle's folder. */
function buildBundle(out: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["scripts/build-node-bundle.ts", "--out", out, "--no-archive"], {
      cwd: REPO_ROOT,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => (stdout += d));
    child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d));
    child.on("error", reject);
    child.on("close", (code) => (code === 0 ? resolve(stdout.trim().split("\n")[0]!) : reject(new Error(`node-bundle exited with ${code}: ${stderr}`))));
  });
}
