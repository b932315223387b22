// The small-cluster harness proved: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kube-proxy and a
// node (kubelet + containerd + CNI), all v1.20.2 and all inside one network namespace, behave as a cluster — a
// Deployment pulled from a private registry with its pull secret is scheduled and becomes ready, its Service gets
// endpoints, a pod reaches the apiserver through the `kubernetes` Service with its service-account token (and the
// CA the controller-manager mounted verifies the apiserver), the apiserver calls a validating webhook served by a
// pod behind a Service (`clientConfig.service` + caBundle) — and stop() leaves the machine as it found it.
// One registry and one cluster for the whole file.
import assert from "node:assert/strict";
import { existsSync, readFileSync, readdirSync, readlinkSync, rmSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { createCertificateAuthority, issueCertificate } from "../../src/server/tls-bootstrap.ts";
import { untilWebhookActive } from "../support/kube-cluster.ts";
import { buildNodeImage, NODE_IMAGE_USER } from "../support/node-image.ts";
import { netnsExists } from "../support/netns.ts";
import { CGROUP_PARENT, createPullSecret, sysctlValues } from "../support/real-node.ts";
import { startRegistry, type TestRegistry } from "../support/registry.ts";
import { buildRunnableImage } from "../support/runnable-image.ts";
import { startSmallCluster, type SmallCluster } from "../support/small-cluster.ts";

const APP_NS = "smoke-app";
const WEBHOOK_NS = "smoke-webhook";
const GUARDED_NS = "smoke-guarded";
const PULL_SECRET = "private-registry";

function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z";
  } catch {
    return false;
  }
}

const cgroupParents = (): string[] => readdirSync("/sys/fs/cgroup").filter((h) => existsSync(join("/sys/fs/cgroup", h, CGROUP_PARENT)));

describe("a small cluster in its own network namespace", () => {
  let registry: TestRegistry;
  let cluster: SmallCluster;
  let busyboxImage: string;
  let probeImage: string;
  // The machine as it was before the cluster started; the last test compares.
  let sysctlsBefore: Record<string, string | null>;
  let cgroupParentsBefore: string[];
  let runNetnsBefore: boolean;

  async function kubectl(...args: string[]): Promise<string> {
    const result = await cluster.kubectl(args);
    assert.equal(result.code, 0, `kubectl ${args.join(" ")} failed: ${result.stderr}`);
    return result.stdout;
  }
  const apply = async (...objects: object[]) => {
    const result = await cluster.apply(objects.map((o) => JSON.stringify(o)).join("\n"));
    assert.equal(result.code, 0, `kubectl apply failed: ${result.stderr}`);
  };
  const context = () =>
    `controller-manager:\n${cluster.componentLogs("controller-manager", 15)}\nscheduler:\n${cluster.componentLogs("scheduler", 10)}\n` +
    `kubelet:\n${cluster.componentLogs("kubelet", 25)}`;

  before(async () => {
    sysctlsBefore = sysctlValues();
    cgroupParentsBefore = cgroupParents();
    runNetnsBefore = existsSync("/run/netns");
    registry = await startRegistry({ auth: "htpasswd" });
    const busybox = buildRunnableImage({ tag: "v1", seed: "small-cluster-busybox" });
    const probe = buildNodeImage({
      tag: "v1",
      files: { "app/main.ts": readFileSync(new URL("../support/cluster-probe-app.ts", import.meta.url)) },
      entrypoint: ["/app/main.ts"],
    });
    try {
      await registry.push(busybox.layoutDir, "v1", "smoke/busybox", "v1");
      await registry.push(probe.layoutDir, "v1", "smoke/probe", "v1");
    } finally {
      rmSync(busybox.layoutDir, { recursive: true, force: true });
      rmSync(probe.layoutDir, { recursive: true, force: true });
    }
    busyboxImage = `${registry.host}/smoke/busybox:v1`;
    probeImage = `${registry.host}/smoke/probe:v1`;
    cluster = await startSmallCluster({ registries: [{ host: registry.host, caFile: registry.caFile }] });
    for (const ns of [APP_NS, WEBHOOK_NS]) {
      await cluster.createNamespace(ns);
      await createPullSecret(cluster, ns, PULL_SECRET, registry, registry.password);
    }
    await cluster.createNamespace(GUARDED_NS, { "smoke.imprimatur.dev/guarded": "true" });
  });

  after(async () => {
    await cluster?.stop();
    await registry?.stop();
  });

  test("the node is Ready at the bridge's address, and every component runs inside the namespace", async (t) => {
    t.diagnostic(`cluster started in ${cluster.startMs} ms`);
    const node = JSON.parse(await kubectl("get", "node", cluster.nodeName, "-o", "json"));
    assert.equal(node.status.conditions.find((c: { type: string }) => c.type === "Ready").status, "True");
    assert.deepEqual(
      node.status.addresses.find((a: { type: string }) => a.type === "InternalIP"),
      { type: "InternalIP", address: cluster.gateway },
    );
    const nsInode = (pid: number | "self") => readlinkSync(`/proc/${pid}/ns/net`);
    for (const [name, pid] of Object.entries(cluster.componentPids)) {
      assert.ok(alive(pid), `${name} (${pid}) is running`);
      assert.notEqual(nsInode(pid), nsInode("self"), `${name} runs in another network namespace than the test`);
      assert.equal(nsInode(pid), nsInode(cluster.componentPids.apiserver), `${name} runs in the cluster's namespace`);
    }
    const svc = JSON.parse(await kubectl("get", "service", "kubernetes", "-n", "default", "-o", "json"));
    assert.equal(svc.spec.clusterIP, "10.96.0.1", "the first address of the service CIDR");
  });

  test("a Deployment from the private registry, with its pull secret, is scheduled and ready; its Service gets endpoints", async () => {
    const labels = { app: "sleeper" };
    await apply(
      {
        apiVersion: "apps/v1",
        kind: "Deployment",
        metadata: { name: "sleeper", namespace: APP_NS },
        spec: {
          replicas: 2,
          selector: { matchLabels: labels },
          template: {
            metadata: { labels },
            spec: {
              imagePullSecrets: [{ name: PULL_SECRET }],
              terminationGracePeriodSeconds: 1,
              containers: [{ name: "main", image: busyboxImage, imagePullPolicy: "Always", ports: [{ containerPort: 8080 }] }],
            },
          },
        },
      },
      {
        apiVersion: "v1",
        kind: "Service",
        metadata: { name: "sleeper", namespace: APP_NS },
        spec: { selector: labels, ports: [{ port: 80, targetPort: 8080 }] },
      },
    );
    const rollout = await cluster.kubectl(["rollout", "status", "deployment/sleeper", "-n", APP_NS, "--timeout=120s"], { timeoutMs: 130_000 });
    assert.equal(rollout.code, 0, `rollout: ${rollout.stdout} ${rollout.stderr}\n${context()}`);
    const pods = JSON.parse(await kubectl("get", "pods", "-n", APP_NS, "-l", "app=sleeper", "-o", "json")).items as Array<{
      spec: { nodeName: string };
      status: { podIP: string; phase: string };
    }>;
    assert.equal(pods.length, 2);
    for (const pod of pods) {
      assert.equal(pod.spec.nodeName, cluster.nodeName, "placed by the scheduler");
      assert.equal(pod.status.phase, "Running");
      assert.match(pod.status.podIP, /^10\.88\.77\./, "an address from the bridge's subnet");
    }
    let addresses: string[] = [];
    for (let i = 0; i < 100 && addresses.length < 2; i++) {
      const endpoints = JSON.parse(await kubectl("get", "endpoints", "sleeper", "-n", APP_NS, "-o", "json"));
      addresses = (endpoints.subsets ?? []).flatMap((s: { addresses?: Array<{ ip: string }> }) => (s.addresses ?? []).map((a) => a.ip));
      if (addresses.length < 2) await new Promise((r) => setTimeout(r, 200));
    }
    assert.deepEqual(addresses.sort(), pods.map((p) => p.status.podIP).sort());
  });

  test("a pod reaches the apiserver through the kubernetes Service with its service-account token, verifying it with the mounted CA", async () => {
    await apply(
      {
        apiVersion: "rbac.authorization.k8s.io/v1",
        kind: "Role",
        metadata: { name: "read-pods", namespace: APP_NS },
        rules: [{ apiGroups: [""], resources: ["pods"], verbs: ["get"] }],
      },
      {
        apiVersion: "rbac.authorization.k8s.io/v1",
        kind: "RoleBinding",
        metadata: { name: "default-reads-pods", namespace: APP_NS },
        roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: "read-pods" },
        subjects: [{ kind: "ServiceAccount", name: "default", namespace: APP_NS }],
      },
      {
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name: "whoami", namespace: APP_NS },
        spec: {
          restartPolicy: "Never",
          imagePullSecrets: [{ name: PULL_SECRET }],
          containers: [{ name: "main", image: probeImage, args: ["whoami"] }],
        },
      },
    );
    let phase = "";
    for (let i = 0; i < 300 && phase !== "Succeeded" && phase !== "Failed"; i++) {
      phase = (await kubectl("get", "pod", "whoami", "-n", APP_NS, "-o", "jsonpath={.status.phase}")).trim();
      if (phase !== "Succeeded" && phase !== "Failed") await new Promise((r) => setTimeout(r, 200));
    }
    assert.equal(phase, "Succeeded", context());
    // kubectl logs: the apiserver reaches the kubelet at the node's InternalIP.
    const logs = await kubectl("logs", "whoami", "-n", APP_NS);
    const line = logs.split("\n").find((l) => l.startsWith("WHOAMI"));
    assert.ok(line?.startsWith("WHOAMI {"), `the pod's report: ${logs}`);
    assert.deepEqual(JSON.parse(line!.slice("WHOAMI ".length)), { status: 200, name: "whoami", server: "10.96.0.1:443" });
  });

  test("the apiserver calls a validating webhook served by a pod behind a Service (clientConfig.service + caBundle)", async () => {
    const service = "probe-webhook";
    const ca = await createCertificateAuthority("small-cluster-webhook-ca");
    const serving = await issueCertificate(ca, { commonName: service, dnsNames: [`${service}.${WEBHOOK_NS}.svc`] });
    const labels = { app: service };
    await apply(
      {
        apiVersion: "v1",
        kind: "Secret",
        metadata: { name: "probe-webhook-tls", namespace: WEBHOOK_NS },
        type: "kubernetes.io/tls",
        stringData: { "tls.crt": serving.certPem, "tls.key": serving.keyPem },
      },
      {
        apiVersion: "apps/v1",
        kind: "Deployment",
        metadata: { name: service, namespace: WEBHOOK_NS },
        spec: {
          replicas: 1,
          selector: { matchLabels: labels },
          template: {
            metadata: { labels },
            spec: {
              imagePullSecrets: [{ name: PULL_SECRET }],
              terminationGracePeriodSeconds: 1,
              automountServiceAccountToken: false,
              securityContext: { runAsNonRoot: true, runAsUser: Number(NODE_IMAGE_USER) },
              containers: [
                {
                  name: "main",
                  image: probeImage,
                  args: ["webhook"],
                  ports: [{ containerPort: 8443 }],
                  readinessProbe: { httpGet: { path: "/healthz", port: 8443, scheme: "HTTPS" }, periodSeconds: 1 },
                  securityContext: { readOnlyRootFilesystem: true, allowPrivilegeEscalation: false, capabilities: { drop: ["ALL"] } },
                  volumeMounts: [{ name: "tls", mountPath: "/tls", readOnly: true }],
                },
              ],
              volumes: [{ name: "tls", secret: { secretName: "probe-webhook-tls" } }],
            },
          },
        },
      },
      {
        apiVersion: "v1",
        kind: "Service",
        metadata: { name: service, namespace: WEBHOOK_NS },
        spec: { selector: labels, ports: [{ port: 443, targetPort: 8443 }] },
      },
      {
        apiVersion: "admissionregistration.k8s.io/v1",
        kind: "ValidatingWebhookConfiguration",
        metadata: { name: "smoke-probe" },
        webhooks: [
          {
            name: "probe.smoke.imprimatur.dev",
            clientConfig: {
              service: { namespace: WEBHOOK_NS, name: service, path: "/validate", port: 443 },
              caBundle: Buffer.from(ca.certPem).toString("base64"),
            },
            rules: [{ apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE"], resources: ["configmaps"] }],
            namespaceSelector: { matchLabels: { "smoke.imprimatur.dev/guarded": "true" } },
            failurePolicy: "Fail",
            sideEffects: "None",
            admissionReviewVersions: ["v1"],
            timeoutSeconds: 5,
          },
        ],
      },
    );
    const rollout = await cluster.kubectl(["rollout", "status", `deployment/${service}`, "-n", WEBHOOK_NS, "--timeout=120s"], { timeoutMs: 130_000 });
    assert.equal(rollout.code, 0, `rollout: ${rollout.stdout} ${rollout.stderr}\n${context()}`);

    const configMap = (name: string, verdict: string) =>
      JSON.stringify({ apiVersion: "v1", kind: "ConfigMap", metadata: { name, namespace: GUARDED_NS }, data: { verdict } });
    await untilWebhookActive(cluster, configMap("probe", "deny"), (p) => p.stderr.includes("refused by the probe webhook"), {
      context: async () => `${cluster.logs()}\n${context()}`,
    });
    const denied = await cluster.kubectl(["create", "-f", "-"], { input: configMap("denied", "deny") });
    assert.notEqual(denied.code, 0);
    assert.match(denied.stderr, /admission webhook "probe\.smoke\.imprimatur\.dev" denied the request: refused by the probe webhook/);
    const allowed = await cluster.kubectl(["create", "-f", "-"], { input: configMap("allowed", "allow") });
    assert.equal(allowed.code, 0, allowed.stderr);
    // Outside the namespaceSelector the webhook is never asked.
    const elsewhere = await cluster.kubectl(["create", "-f", "-"], { input: configMap("elsewhere", "deny").replace(GUARDED_NS, APP_NS) });
    assert.equal(elsewhere.code, 0, elsewhere.stderr);
    const podName = (await kubectl("get", "pods", "-n", WEBHOOK_NS, "-l", `app=${service}`, "-o", "jsonpath={.items[0].metadata.name}")).trim();
    const served = await kubectl("logs", podName, "-n", WEBHOOK_NS);
    assert.match(served, /: denied\n/);
    assert.match(served, /: allowed\n/);
  });

  test("stop() ends every process, removes the namespace and restores the machine", async (t) => {
    const pids = [...Object.values(cluster.componentPids), ...cluster.node.pidsSeen()];
    const netns = cluster.netns;
    const nodeDir = cluster.node.dir;
    const dir = cluster.dir;
    const stopping = Date.now();
    await cluster.stop();
    t.diagnostic(`cluster stopped in ${Date.now() - stopping} ms`);
    for (const pid of pids) assert.ok(!alive(pid), `process ${pid} is gone`);
    assert.equal(netnsExists(netns), false, "the network namespace is gone");
    assert.equal(existsSync("/run/netns"), runNetnsBefore, "/run/netns as before");
    assert.equal(existsSync(dir), false);
    assert.equal(existsSync(nodeDir), false);
    const mounts = readFileSync("/proc/self/mountinfo", "utf8");
    assert.ok(!mounts.includes(nodeDir) && !mounts.includes(dir), "no mounts left under the cluster's folders");
    const report = cluster.nodeStopReport();
    assert.ok(report, "the node reported its stop");
    if (report.lastRun) {
      assert.deepEqual(sysctlValues(), sysctlsBefore);
      assert.deepEqual(cgroupParents(), cgroupParentsBefore);
    }
  });
});
