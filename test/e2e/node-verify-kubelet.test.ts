// Verification at pull time on a real node: kubelet v1.20.2 with --image-service-endpoint on
// `imprimatur node-proxy --policy-crds`, containerd 1.6 behind it, a docker-registry (TLS) holding images
// signed by the project's test signer (anonymous pulls), and a real kube-apiserver with the policy CRDs and no webhook at all: what
// admission never judged (static pods, pods created while no webhook answers) is judged at the node. The proxy reads
// the policy resources with the node's own identity (system:node:node1), granted by the shipped
// deploy/node-proxy/rbac.yaml and nothing more. One cluster, one node, one registry for the file.
import assert from "node:assert/strict";
import { mkdtemp, mkdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, describe, test } from "node:test";
import { startKubeCluster, type KubeCluster } from "../support/kube-cluster.ts";
import { startNodeProxy, type NodeProxyProcess } from "../support/node-proxy-process.ts";
import { installPolicyCrds } from "../support/policy-crds.ts";
import { podManifest, podPullFailed, podRunning, startNodeRuntime, waitForPod, type NodeRuntime, type PodObservation } from "../support/real-node.ts";
import { startRegistry, type TestRegistry } from "../support/registry.ts";
import { buildRunnableImage } from "../support/runnable-image.ts";
import { generateSigningKey, type SigningKey } from "../support/signer/keys.ts";
import { createMockSigstore, type MockSigstore } from "../support/signer/mock-sigstore.ts";
import { pushCosignSignatures } from "../support/signer/registry-signatures.ts";
import { nodeTrustRoot, signedOnlyPolicy, yamlDocuments } from "../support/node-signing-policies.ts";
import { teardown } from "../support/teardown.ts";

const NODE = "node1";
const NS = "verified";
const OTHER = "elsewhere";
const NODE_RBAC = fileURLToPath(new URL("../../deploy/node-proxy/rbac.yaml", import.meta.url));

let dir: string;
let cluster: KubeCluster;
let registry: TestRegistry;
let node: NodeRuntime;
let proxy: NodeProxyProcess;
let sigstore: MockSigstore;
let key: SigningKey;
let manifests: string;
const layouts: string[] = [];
let seeds = 0;

async function kubectl(args: string[], input?: string): Promise<string> {
  const r = await cluster.kubectl(args, input === undefined ? {} : { input });
  assert.equal(r.code, 0, `kubectl ${args.join(" ")}: ${r.stderr}`);
  return r.stdout;
}

async function push(repository: string, tag: string, signed: boolean): Promise<string> {
  const built = buildRunnableImage({ tag, seed: `node-verify-kubelet-${repository}-${tag}-${seeds++}` });
  layouts.push(built.layoutDir);
  await registry.push(built.layoutDir, tag, repository, tag);
  if (signed) await pushCosignSignatures({ registry, repository, digest: built.digest, signers: [{ key, rekor: sigstore, hash: "sha256" }] });
  return built.digest;
}

const context = () => `node-proxy log tail:\n${proxyTail}\nkubelet log tail:\n${node.kubeletLogs(25)}`;
let proxyTail = "";

async function observe(namespace: string, name: string, until: (o: PodObservation) => boolean): Promise<PodObservation> {
  try {
    return await waitForPod(cluster, namespace, name, until, 60_000, context);
  } catch (e) {
    proxyTail = (await proxy.log()).split("\n").slice(-25).join("\n");
    throw new Error(`${(e as Error).message}\n${context()}`, { cause: e });
  }
}

/** The pull refused by the node, with the reason in the pod's events. */
const refusedAtNode = (o: PodObservation) =>
  podPullFailed(o) && o.events.some((e) => e.reason === "Failed" && e.message.includes("imprimatur node-proxy refused the pull"));

function createPod(namespace: string, name: string, image: string, imagePullPolicy: "Always" | "IfNotPresent" = "IfNotPresent"): Promise<string> {
  return kubectl(["create", "-f", "-"], podManifest({ name, namespace, nodeName: NODE, image, imagePullPolicy }));
}

/** A static pod: a manifest in the kubelet's --pod-manifest-path, never seen by admission. */
async function staticPod(name: string, image: string): Promise<void> {
  const manifest = JSON.parse(podManifest({ name, namespace: NS, nodeName: NODE, image, imagePullPolicy: "IfNotPresent" })) as Record<string, any>;
  delete manifest.spec.nodeName;
  await writeFile(join(manifests, `${name}.json`), JSON.stringify(manifest));
}

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "imprimatur-e2e-node-verify-kubelet-"));
  manifests = join(dir, "manifests");
  await mkdir(manifests);
  sigstore = await createMockSigstore({ name: "node-verify-kubelet" });
  key = generateSigningKey("ecdsa-p256");
  [cluster, registry] = await Promise.all([startKubeCluster({ nodes: [NODE] }), startRegistry({ auth: "none" })]);
  await installPolicyCrds(cluster);
  await kubectl(["apply", "-f", NODE_RBAC]);
  for (const ns of [NS, OTHER]) await kubectl(["create", "namespace", ns]);
  const policies = [
    nodeTrustRoot(sigstore, "resource"),
    signedOnlyPolicy([`${registry.host}/*`], key),
    {
      apiVersion: "imprimatur.dev/v1alpha1",
      kind: "NamespacedImagePolicy",
      metadata: { name: "not-here", namespace: NS },
      spec: { rules: [{ action: "deny", images: [`${registry.host}/apps/others*`], message: "not in this namespace" }], default: "allow" },
    },
  ];
  await kubectl(["apply", "-f", "-"], yamlDocuments(policies));
  node = await startNodeRuntime({ registries: [{ host: registry.host, caFile: registry.caFile }] });
  const registries = join(dir, "registries.yaml");
  await writeFile(registries, registry.registryConfig());
  proxy = await startNodeProxy({
    dir,
    stateDir: join(dir, "state"),
    runtimeEndpoint: node.containerdEndpoint,
    args: ["--kubeconfig", cluster.nodeKubeconfig(NODE), "--node-name", NODE, "--policy-crds", "--registries", registries],
  });
  await node.startKubelet({ cluster, nodeName: NODE, imageServiceEndpoint: proxy.endpoint, extraArgs: [`--pod-manifest-path=${manifests}`] });
});

after(() =>
  teardown([
    () => node?.stop(),
    () => proxy?.stop(),
    () => cluster?.stop(),
    () => registry?.stop(),
    ...layouts.map((l) => () => rm(l, { recursive: true, force: true })),
    () => dir && rm(dir, { recursive: true, force: true }),
  ]),
);

describe("node-proxy --policy-crds with a real kubelet", () => {
  test("a static pod naming an unsigned image is refused at pull, with the reason in the mirror pod's events", async () => {
    await push("apps/unsigned-static", "v1", false);
    await staticPod("unsigned-static", `${registry.host}/apps/unsigned-static:v1`);
    const seen = await observe(NS, `unsigned-static-${NODE}`, refusedAtNode);
    assert.notEqual(seen.phase, "Running");
    const failure = seen.events.find((e) => e.message.includes("refused the pull"))!;
    assert.match(
      failure.message,
      /PermissionDenied desc = imprimatur node-proxy refused the pull: image ".*apps\/unsigned-static:v1@sha256:[0-9a-f]{64}" denied by policy signed-at-the-node/,
    );
  });

  test("a static pod naming a signed image runs", async () => {
    await push("apps/signed-static", "v1", true);
    await staticPod("signed-static", `${registry.host}/apps/signed-static:v1`);
    await observe(NS, `signed-static-${NODE}`, podRunning);
  });

  test("a pod created while no webhook answers: an unsigned image is refused at the node, a signed one runs", async () => {
    await push("apps/unsigned", "v1", false);
    await push("apps/signed", "v1", true);
    await createPod(NS, "unsigned", `${registry.host}/apps/unsigned:v1`);
    await createPod(NS, "signed", `${registry.host}/apps/signed:v1`);
    await observe(NS, "unsigned", refusedAtNode);
    await observe(NS, "signed", podRunning);
  });

  test("a namespaced policy refuses its own namespace's pulls only", async () => {
    await push("apps/others", "v1", true);
    await createPod(NS, "others-here", `${registry.host}/apps/others:v1`);
    await createPod(OTHER, "others-there", `${registry.host}/apps/others:v1`);
    const here = await observe(NS, "others-here", refusedAtNode);
    assert.ok(here.events.some((e) => /NamespacedImagePolicy verified\/not-here rules\[0\]: not in this namespace/.test(e.message)));
    await observe(OTHER, "others-there", podRunning);
  });

  test("a tag re-pushed to an unsigned build: the running pod keeps the verified digest, the next pull of the tag is refused", async () => {
    const first = await push("apps/moving", "v1", true);
    await createPod(NS, "moving-1", `${registry.host}/apps/moving:v1`);
    const running = await observe(NS, "moving-1", podRunning);
    assert.match(JSON.stringify(running.pod.status.containerStatuses[0].imageID), new RegExp(first.slice("sha256:".length)));
    await push("apps/moving", "v1", false);
    await createPod(NS, "moving-2", `${registry.host}/apps/moving:v1`, "Always");
    await observe(NS, "moving-2", refusedAtNode);
    assert.equal((await observe(NS, "moving-1", podRunning)).phase, "Running");
  });

  // Last: it stops the registry.
  test("a registry that cannot be reached refuses new pulls (the node fails closed) and stops no container that runs", async () => {
    await registry.stop();
    await createPod(NS, "after-outage", `${registry.host}/apps/signed:v1`, "Always");
    const refused = await observe(NS, "after-outage", refusedAtNode);
    assert.ok(refused.events.some((e) => /could not be resolved to a digest .*refused because the node fails closed/.test(e.message)));
    for (const name of ["signed", "moving-1", "others-there"]) {
      const namespace = name === "others-there" ? OTHER : NS;
      const running = await observe(namespace, name, podRunning);
      assert.equal(running.pod.status.containerStatuses[0].restartCount, 0, `${name} kept running`);
    }
  });
});
