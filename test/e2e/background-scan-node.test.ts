// The background scan on a real node: a kubelet v1.20.2 on containerd (test/support/real-node.ts), registered with a
// real etcd + kube-apiserver v1.20, pulling from a real docker-registry (TLS), and `imprimatur serve` as the
// cluster's mutating webhook (verifying signatures without pinning: the tag stays in the spec, and /mutate records
// the digest it verified on the pod) and background scanner in one process.
// What the kubelet reports in pod status is the kubelet's own here (test/e2e/background-scan.test.ts writes it by
// hand):
// - a static pod, run from the kubelet's manifest folder, reaches the API only as its mirror pod, and the scan
//   reports it;
// - a tag that moves under a running pod to an unsigned build: the restarted container pulls the new digest, the
//   kubelet reports it, and the scan reports both that what runs now is unsigned and that it is not the digest
//   admission verified (imprimatur.dev/verified-images).
// Signatures come from the tests' offline signer (cosign `.sig` manifests pushed to the registry, logged in an
// in-process mock Rekor): no public Sigstore is reachable here. One cluster, registry, node and serve for the file.
import assert from "node:assert/strict";
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { stringify } from "yaml";
import { startKubeCluster, untilWebhookActive, type KubeCluster } from "../support/kube-cluster.ts";
import { startImprimatur, type ImprimaturProcess } from "../support/imprimatur-process.ts";
import { getText } from "../support/https-client.ts";
import {
  linkExists,
  NODE_HOST_DIRS,
  podManifest,
  podRunning,
  startNodeRuntime,
  sysctlValues,
  waitForPod,
  type NodeRuntime,
  type PodObservation,
} from "../support/real-node.ts";
import { startRegistry, type TestRegistry } from "../support/registry.ts";
import { buildRunnableImage } from "../support/runnable-image.ts";
import { generateSigningKey } from "../support/signer/keys.ts";
import { createMockSigstore } from "../support/signer/mock-sigstore.ts";
import { pushCosignSignatures } from "../support/signer/registry-signatures.ts";
import { teardown } from "../support/teardown.ts";

const NODE = "node1";
const NS = "scan-node";
const MIRROR_ANNOTATION = "kubernetes.io/config.mirror";

interface Report {
  metadata: { name: string };
  results?: Array<{ policy: string; rule?: string; result: string; message: string; properties?: Record<string, string> }>;
}

describe("the background scan on a real node", () => {
  let cluster: KubeCluster;
  let registry: TestRegistry;
  let node: NodeRuntime;
  let server: ImprimaturProcess;
  let layoutDir: string;
  let manifestDir: string;
  const digests: Record<string, string> = {};
  // The machine-wide state just before the node started; the last test compares.
  let sysctlsBefore: Record<string, string | null>;
  let hostDirsBefore: string[];

  const context = () => `kubelet log tail:\n${node.kubeletLogs(30)}\ncontainerd log tail:\n${node.containerdLogs(10)}`;

  async function kubectlJson(args: string[]): Promise<any> {
    const r = await cluster.kubectl([...args, "-o", "json"]);
    assert.equal(r.code, 0, `kubectl ${args.join(" ")}: ${r.stderr}`);
    return JSON.parse(r.stdout);
  }

  async function reports(): Promise<Map<string, Report>> {
    const list = (await kubectlJson(["get", "policyreports", "-n", NS])) as { items: Report[] };
    return new Map(list.items.map((r) => [r.metadata.name, r]));
  }

  const metrics = async (): Promise<string> => (await getText(`${server.baseUrl}/metrics`, server.ca)).text;

  async function until(what: string, check: () => Promise<boolean>, timeoutMs = 60_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!(await check())) {
      if (Date.now() > deadline) throw new Error(`timed out waiting: ${what}\nserve log tail:\n${(await server.log()).slice(-3000)}\n${context()}`);
      await sleep(300);
    }
  }

  /** The imageID the kubelet reports for the pod's only container, and how often it restarted. */
  const containerStatus = (o: PodObservation): { imageID: string; restartCount: number; containerID: string; running: boolean } => {
    const s = o.pod?.status?.containerStatuses?.[0] ?? {};
    return { imageID: s.imageID ?? "", restartCount: s.restartCount ?? 0, containerID: s.containerID ?? "", running: s.state?.running !== undefined };
  };

  before(async () => {
    [cluster, registry] = await Promise.all([
      startKubeCluster({ nodes: [NODE], enableAdmissionPlugins: ["MutatingAdmissionWebhook"] }),
      startRegistry({ auth: "none" }),
    ]);
    const built = buildRunnableImage({ tag: "a", seed: "scan-node-app-a" });
    layoutDir = built.layoutDir;
    digests.a = built.digest;
    digests.b = buildRunnableImage({ tag: "b", seed: "scan-node-app-b", dir: layoutDir }).digest;
    digests.tool = buildRunnableImage({ tag: "tool", seed: "scan-node-tool", dir: layoutDir }).digest;
    await registry.push(layoutDir, "a", "apps/app", "1");
    await registry.push(layoutDir, "tool", "tools/static", "1");
    // Build A is signed; build B, which the tag moves to later, is not.
    const [sigstore, key] = [await createMockSigstore(), generateSigningKey()];
    await pushCosignSignatures({ registry, repository: "apps/app", digest: digests.a, signers: [{ key, rekor: sigstore, hash: "sha256" }] });

    const dir = join(cluster.dir, "scan-node");
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, "e2e-root.json"), JSON.stringify(sigstore.trustedRoot));
    writeFileSync(
      join(dir, "policies.yaml"),
      [
        stringify({ apiVersion: "imprimatur.dev/v1alpha1", kind: "TrustRoot", metadata: { name: "e2e" }, spec: { path: "e2e-root.json" } }),
        stringify({
          apiVersion: "imprimatur.dev/v1alpha1",
          kind: "ImagePolicy",
          metadata: { name: "apps-only" },
          spec: {
            rules: [
              {
                action: "allow",
                images: [`${registry.host}/apps/*`],
                // Tags stay in the spec (no pinning, no digest required): /mutate verifies the digest the tag points to
                // and records it on the pod; the scan verifies the digest each container runs.
                digestMutate: false,
                digestVerify: false,
                attestors: [{ entries: [{ staticKey: { name: "release.pub", key: key.publicKeyPem, trustRoot: "e2e" } }] }],
              },
            ],
            default: "deny",
            defaultMessage: "only images from apps/",
          },
        }),
      ].join("---\n"),
    );
    writeFileSync(join(dir, "registries.yaml"), registry.registryConfig());
    server = await startImprimatur([
      "--policies",
      join(dir, "policies.yaml"),
      "--registries",
      join(dir, "registries.yaml"),
      "--kubeconfig",
      cluster.kubeconfig,
      "--background-scan",
      "--scan-reports",
      "wgpolicyk8s",
      "--scan-rate",
      "100",
      "--scan-lease",
      `${NS}/imprimatur-scan`,
    ]);

    sysctlsBefore = sysctlValues();
    hostDirsBefore = NODE_HOST_DIRS.filter((path) => existsSync(path));
    node = await startNodeRuntime({ registries: [{ host: registry.host, caFile: registry.caFile }] });
    // The kubelet's manifest folder lives in the run's dir, so stop() removes it with the rest.
    manifestDir = join(node.dir, "manifests");
    mkdirSync(manifestDir);
    const applied = await cluster.kubectl(["apply", "-k", new URL("../../deploy/crds/reports", import.meta.url).pathname]);
    assert.equal(applied.code, 0, applied.stderr);
    assert.equal((await cluster.kubectl(["create", "namespace", NS])).code, 0);
    assert.equal((await cluster.kubectl(["apply", "-f", join(server.stateDir, "mutating-webhook.yaml")])).code, 0);
    const [started] = await Promise.all([
      node.startKubelet({ cluster, nodeName: NODE, extraArgs: [`--pod-manifest-path=${manifestDir}`] }),
      cluster.kubectl(["wait", "--for=condition=Established", "crd", "--all", "--timeout=60s"]),
    ]);
    console.log(`[scan-node] node ${started.nodeName} Ready ${started.readyMs} ms after the kubelet started`);
    // Only the mutating webhook: the validating one would refuse the static pod's mirror, which would then never
    // reach the API (the kubelet runs the static pod all the same), and there would be nothing to scan.
    // /mutate is in force once a dry run of a signed image comes back with the digest it verified recorded.
    await untilWebhookActive(
      cluster,
      podManifest({ name: "probe", namespace: NS, nodeName: NODE, image: `${registry.host}/apps/app:1` }),
      (probe) => probe.stdout.includes("imprimatur.dev/verified-images"),
      { extraArgs: ["-o", "json"], context: () => server.log() },
    );
  });

  // The node goes first (it needs the API).
  after(() =>
    teardown([
      () => node?.stop(),
      () => server?.stop(),
      () => cluster?.stop(),
      () => registry?.stop(),
      () => layoutDir && rmSync(layoutDir, { recursive: true, force: true }),
    ]),
  );

  test("a static pod from the kubelet's manifest folder: its mirror pod is judged and reported", async () => {
    // The apiserver admits a mirror pod like any pod the kubelet's node identity creates (webhooks included), but
    // what runs is the kubelet's file: a webhook's refusal only keeps the mirror out of the API (the static pod runs
    // all the same) and a mutation changes the mirror, not the container. So the scan is what finds it.
    const image = `${registry.host}/tools/static:1`;
    writeFileSync(
      join(manifestDir, "static-tool.json"),
      JSON.stringify({
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name: "static-tool", namespace: NS },
        spec: { terminationGracePeriodSeconds: 1, dnsPolicy: "Default", containers: [{ name: "main", image }] },
      }),
    );
    // The kubelet names the mirror pod <name>-<node>.
    const mirrorName = `static-tool-${NODE}`;
    const o = await waitForPod(cluster, NS, mirrorName, podRunning, 60_000, context);
    assert.ok(o.pod.metadata.annotations?.[MIRROR_ANNOTATION], `a mirror pod: ${JSON.stringify(o.pod.metadata.annotations)}`);
    assert.equal(containerStatus(o).imageID, `${registry.host}/tools/static@${digests.tool}`);
    const uid = o.pod.metadata.uid as string;

    await until("a report for the mirror pod", async () => (await reports()).has(uid));
    assert.deepEqual(
      (await reports()).get(uid)!.results?.map((r) => [r.policy, r.rule, r.result, r.message, r.properties?.image, r.properties?.digest]),
      [["apps-only", "default", "fail", "only images from apps/", `${image}@${digests.tool}`, digests.tool]],
      "judged as it runs: at the digest its status reports",
    );

    // Out of the folder: the kubelet stops the static pod and deletes its mirror, and the report goes with it.
    rmSync(join(manifestDir, "static-tool.json"));
    await until("the mirror pod and its report gone", async () => {
      const got = await cluster.kubectl(["get", "pod", "-n", NS, mirrorName]);
      return got.code !== 0 && !(await reports()).has(uid);
    });
  });

  test("a tag moves to an unsigned build and the container restarts: the scan judges the digest that runs now, which is not the one admission verified", async () => {
    const image = `${registry.host}/apps/app:1`;
    const created = await cluster.kubectl(["create", "-o", "json", "-f", "-"], {
      input: podManifest({ name: "moving", namespace: NS, nodeName: NODE, image, imagePullPolicy: "Always" }),
    });
    assert.equal(created.code, 0, created.stderr);
    const first = await waitForPod(cluster, NS, "moving", (o) => podRunning(o) && containerStatus(o).imageID !== "", 60_000, context);
    assert.equal(first.pod.spec.containers[0].image, image, "no pinning: the tag stays in the spec");
    const verified = JSON.parse(first.pod.metadata.annotations?.["imprimatur.dev/verified-images"] ?? "{}") as Record<string, { digest: string }>;
    assert.equal(verified[image]?.digest, digests.a, "admission verified build A and recorded it on the pod");
    assert.equal(containerStatus(first).imageID, `${registry.host}/apps/app@${digests.a}`);
    const uid = first.pod.metadata.uid as string;
    // The scan verifies what runs too: build A is signed, so the pod that runs it passes and has no report.
    await until("the scan verified build A", async () => /imprimatur_signature_verifications_seconds_count\{outcome="verified"\} [1-9]/.test(await metrics()));
    assert.equal((await reports()).has(uid), false, "build A is signed: no report");

    // The tag moves; the container's process is killed through the runtime, and the kubelet restarts it, pulling
    // the tag again (imagePullPolicy Always).
    await registry.push(layoutDir, "b", "apps/app", "1");
    const id = containerStatus(first).containerID.replace(/^containerd:\/\//, "");
    const killed = await node.ctr(["tasks", "kill", "--signal", "SIGKILL", id]);
    assert.equal(killed.code, 0, killed.stderr);
    const restarted = await waitForPod(
      cluster,
      NS,
      "moving",
      (o) => containerStatus(o).restartCount > 0 && containerStatus(o).running && containerStatus(o).imageID.endsWith(digests.b!),
      60_000,
      context,
    );
    assert.equal(containerStatus(restarted).imageID, `${registry.host}/apps/app@${digests.b}`);

    await until("a report for the restarted pod", async () => (await reports()).has(uid));
    const results = (await reports()).get(uid)!.results ?? [];
    // What runs now is unsigned, and it is not the digest admission verified.
    assert.deepEqual(
      results.map((r) => [r.policy, r.rule, r.result, r.properties?.image, r.properties?.digest, r.properties?.expected]).sort(),
      [
        ["apps-only", "rules[0]", "fail", `${image}@${digests.b}`, digests.b, undefined],
        ["imprimatur", "runningDigest", "fail", image, digests.b, digests.a],
      ].sort(),
    );

    assert.equal((await cluster.kubectl(["delete", "pod", "-n", NS, "moving", "--wait=false"])).code, 0);
    await until("the deleted pod's report gone", async () => !(await reports()).has(uid));
  });

  test("stop() leaves nothing behind", async () => {
    const report = await node.stop();
    assert.deepEqual(report.problems, []);
    assert.deepEqual(node.liveProcesses(), [], "no process of the run is alive");
    assert.ok(!readFileSync("/proc/self/mountinfo", "utf8").includes(node.dir), `no mount under ${node.dir}`);
    assert.deepEqual(node.cgroups(), [], "the containers' cgroups are gone");
    assert.equal(existsSync(node.dir), false, "the run's dir, the manifest folder with it, is removed");
    assert.equal(linkExists(node.bridge), false, `bridge ${node.bridge} deleted`);
    // Alone from start to end (no other real-node run shared the machine-wide state): exactly as found.
    if (report.lastRun && node.otherRunsAtStart === 0) {
      assert.deepEqual(sysctlValues(), sysctlsBefore, "sysctls as before the test");
      assert.deepEqual(
        NODE_HOST_DIRS.filter((path) => existsSync(path)),
        hostDirsBefore,
        "host directories as before the test",
      );
    }
  });
});
