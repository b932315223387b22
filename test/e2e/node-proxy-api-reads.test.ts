// The node proxy's reads of its node's pods (src/node/pod-pull-secrets.ts) against a real kube-apiserver and etcd,
// with the node's identity (Node authorizer), through a recording proxy on loopback: every answer comes from a
// consistent read (no resourceVersion: etcd, not the apiserver's watch cache) that started after the call, so a
// change the API made before the call is always seen — an image set on a container that pulls Always, a pod made
// again under its name, a pod bound to the node a moment before; and what each kind of call reads: a pull its own
// pod (one GET), an ImageStatus the node's pods (one list). No kubelet and no runtime: the reads are the subject.
import assert from "node:assert/strict";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, beforeEach, describe, test } from "node:test";
import pino from "pino";
import { parse } from "yaml";
import { parseImageReference, type ImageReference } from "../../src/core/image-reference.ts";
import { KubeClient } from "../../src/kube/kube-client.ts";
import { PodPullSecrets } from "../../src/node/pod-pull-secrets.ts";
import { startHoldingApiProxy, type HoldingApiProxy } from "../support/holding-api-proxy.ts";
import { startKubeCluster, type KubeCluster } from "../support/kube-cluster.ts";
import { teardown } from "../support/teardown.ts";

const NODE = "node1";
const NS = "reads";
const REGISTRY = "registry.example.com:5000";
const APP = `${REGISTRY}/app:v1`;
const OTHER = `${REGISTRY}/other:v1`;

let dir: string;
let cluster: KubeCluster;
let proxy: HoldingApiProxy;
let view: PodPullSecrets;
/** The URL (path and query) of every request the view sent, in order. */
let reads: string[] = [];

const ref = (image: string): ImageReference => {
  const parsed = parseImageReference(image);
  assert.ok(parsed.ok);
  return parsed.ref;
};

async function kubectl(args: string[], input?: string): Promise<string> {
  const r = await cluster.kubectl(args, input === undefined ? {} : { input });
  assert.equal(r.code, 0, r.stderr);
  return r.stdout;
}

/** Creates a pod bound to the node; its UID. */
async function createPod(name: string, containers: Array<{ name: string; image: string; imagePullPolicy: string }>): Promise<string> {
  const pod = { apiVersion: "v1", kind: "Pod", metadata: { name, namespace: NS }, spec: { nodeName: NODE, containers } };
  return (await kubectl(["create", "-f", "-", "-o", "jsonpath={.metadata.uid}"], JSON.stringify(pod))).trim();
}

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "imprimatur-e2e-node-api-reads-"));
  cluster = await startKubeCluster({ nodes: [NODE] });
  await kubectl(["create", "namespace", NS]);
  // The node's own credentials, sent to the recording proxy (plain HTTP on loopback); the proxy verifies the
  // apiserver with its CA.
  const nodeConfig = parse(await readFile(cluster.nodeKubeconfig(NODE), "utf8")) as {
    clusters: Array<{ name: string; cluster: Record<string, unknown> }>;
    users: Array<{ name: string; user: { token: string } }>;
  };
  const caPem = Buffer.from(String(nodeConfig.clusters[0]!.cluster["certificate-authority-data"]), "base64").toString("utf8");
  proxy = await startHoldingApiProxy({ upstream: cluster.url, caPem });
  // The proxy records paths without their query: the delay hook sees whole URLs, and delays none.
  proxy.delay((r) => {
    reads.push(r.url);
    return false;
  });
  const kube = new KubeClient({
    server: proxy.url,
    insecureSkipTlsVerify: false,
    namespace: "default",
    origin: "test",
    token: nodeConfig.users[0]!.user.token,
  });
  view = new PodPullSecrets({ kube, nodeName: NODE, key: Buffer.alloc(32, 7), logger: pino({ level: "silent" }) });
});

after(() => teardown([() => proxy?.stop(), () => cluster?.stop(), () => (dir ? rm(dir, { recursive: true, force: true }) : undefined)]));

beforeEach(async () => {
  await kubectl(["delete", "pods", "--all", "-n", NS, "--grace-period=0", "--force"]);
  reads = [];
});

const policy = (name: string, uid: string, image: string) => view.pullPolicy({ namespace: NS, name, uid }, ref(image), Date.now() + 5_000);
const candidates = async (image: string) =>
  (await view.credentialHashes(view.arrival(), image, ref(image), Date.now() + 5_000))?.map((p) => p.pod).sort() ?? [];

describe("what the API changed before a call is seen by the call", () => {
  test("an image set on a container that pulls Always, just before the pull: Always (the pull must reach the registry)", async () => {
    const uid = await createPod("p", [
      { name: "a", image: APP, imagePullPolicy: "IfNotPresent" },
      { name: "b", image: OTHER, imagePullPolicy: "Always" },
    ]);
    assert.equal(await policy("p", uid, APP), "IfNotPresent");
    // imagePullPolicy cannot change, but a container's image can: now the image is also pulled Always.
    await kubectl(["set", "image", "-n", NS, "pod/p", `b=${APP}`]);
    assert.equal(await policy("p", uid, APP), "Always");
    await kubectl(["set", "image", "-n", NS, "pod/p", `b=${OTHER}`]);
    assert.equal(await policy("p", uid, APP), "IfNotPresent");
  });

  test("a pod deleted and made again under its name is another pod: the first one's UID finds nothing", async () => {
    const first = await createPod("again", [{ name: "a", image: APP, imagePullPolicy: "Never" }]);
    assert.equal(await policy("again", first, APP), "Never");
    await kubectl(["delete", "pod", "again", "-n", NS, "--grace-period=0", "--force"]);
    assert.equal(await policy("again", first, APP), undefined, "deleted");
    const second = await createPod("again", [{ name: "a", image: APP, imagePullPolicy: "IfNotPresent" }]);
    assert.notEqual(second, first);
    assert.equal(await policy("again", first, APP), undefined, "the old UID");
    assert.equal(await policy("again", second, APP), "IfNotPresent");
  });

  test("a pod bound to the node a moment before an ImageStatus is among its candidates; one deleted is not", async () => {
    await createPod("one", [{ name: "a", image: APP, imagePullPolicy: "IfNotPresent" }]);
    assert.deepEqual(await candidates(APP), [`${NS}/one`]);
    await createPod("two", [{ name: "a", image: APP, imagePullPolicy: "IfNotPresent" }]);
    assert.deepEqual(await candidates(APP), [`${NS}/one`, `${NS}/two`]);
    await kubectl(["delete", "pod", "one", "-n", NS, "--grace-period=0", "--force"]);
    assert.deepEqual(await candidates(APP), [`${NS}/two`]);
  });
});

describe("what each call reads, with the node's identity", () => {
  test("a pull reads its own pod: one GET, consistent (no resourceVersion), no list of the node's pods", async () => {
    const uid = await createPod("pulling", [{ name: "a", image: APP, imagePullPolicy: "IfNotPresent" }]);
    reads = [];
    assert.equal(await policy("pulling", uid, APP), "IfNotPresent");
    assert.deepEqual(reads, [`/api/v1/namespaces/${NS}/pods/pulling`]);
  });

  test("an ImageStatus reads the node's pods: one list, consistent (no resourceVersion), by the node's name", async () => {
    await createPod("listed", [{ name: "a", image: APP, imagePullPolicy: "IfNotPresent" }]);
    reads = [];
    assert.deepEqual(await candidates(APP), [`${NS}/listed`]);
    assert.deepEqual(reads, [`/api/v1/pods?fieldSelector=spec.nodeName%3D${NODE}`]);
  });
});
