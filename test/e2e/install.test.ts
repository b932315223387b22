// One real small cluster (small-cluster.ts) for the whole file, started once:
//
// First the harness itself: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kube-proxy and a node
// (kubelet + containerd + CNI), all v1.20.2 and all inside one network namespace, behave as a cluster — a
// Deployment pulled from a private registry with its pull secret is scheduled and becomes ready, its Service gets
// endpoints, a pod reaches the apiserver through the `kubernetes` Service with its service-account token (and the
// CA the controller-manager mounted verifies the apiserver), the apiserver calls a validating webhook served by a
// pod behind a Service (`clientConfig.service` + caBundle).
//
// Then Imprimatur installed as a user installs it: the image built by `npm run image` (scripts/build-image.ts) is
// pushed to the private registry, and the v1.20 install (deploy/overlays/kube-1.20) is applied with
// `kubectl apply -k` through an overlay of the kind a user writes — the image name and digest (kustomize
// `images:`), the registry's pull secret on the ServiceAccount, and a shortened certificate timeline
// (`--tls-timeline`, a JSON 6902 patch of the Deployment's args) so that CA rotations and renewals happen every
// minute or so, all through the tests below. The apiserver authenticates to the replicas as deploy/caller-auth
// says: its AdmissionConfiguration gives the webhook admission plugins a kubeconfig whose user, named for the
// Service's host, carries a token, and the overlay applies deploy/caller-auth's patch (serve --caller-tokens from
// the Secret imprimatur-callers, --cluster-name). The apiserver calls the Imprimatur pods through the installed webhook
// configurations (clientConfig.service): a denied pod is refused, an allowed one runs; a break-glass attempt by a
// user who may not is audited naming the authenticated caller and its cluster, and a caller without the token is
// refused 401; a replica's pod deleted or
// the certificate rotated or the Deployment restarted (rolling) during a stream of admissions fails none; the pods, running with the installed RBAC,
// log no "forbidden"; with Imprimatur scaled to 0, kube-system still gets its pods while other namespaces' pod
// creates fail closed.
//
// Then `imprimatur install` / `uninstall` as a newcomer runs them, from inside the cluster's network: uninstall
// takes the kubectl-applied install away webhooks first (CRDs and policies stay); install with credentials the
// registry refuses stops before touching the cluster; install builds, pushes with Imprimatur's own registry client,
// applies the webhooks at Ignore, waits for the rollout, /readyz and a dry-run admission Imprimatur denies (its
// overlay applies deploy/caller-auth's client-certificate patch: the apiserver's user also carries a certificate,
// so the dry run is answered only because the apiserver authenticates, and the decision names it), then
// enforces, signing what it pushed (its signature, SBOM and provenance verified by deploy/'s self-verification
// policy); install again with a new build upgrades with no failed admission in a stream beside it; uninstall
// --purge takes the CRDs too.
//
// Last, stop() leaves the machine as it found it.
import assert from "node:assert/strict";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, readlinkSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, describe, test } from "node:test";
import { parse, stringify } from "yaml";
import { tokenDigest } from "../../src/caller-auth/caller-tokens.ts";
import { createCertificateAuthority, issueCertificate } from "../../src/tls/tls-bootstrap.ts";
import { releaseKey } from "../../src/release/signing-key.ts";
import { imprimatur as imprimaturOnHost } from "../support/cli-process.ts";
import { generateSigningKey } from "../support/signer/keys.ts";
import { runCommand } from "../support/command.ts";
import { createClientCa, randomToken, type ClientCa } from "../support/caller-credentials.ts";
import { createPullSecret, untilWebhookActive } from "../support/kube-cluster.ts";
import { buildNodeImage, NODE_IMAGE_USER } from "../support/node-image.ts";
import { netnsExists, runInNetns } from "../support/netns.ts";
import { CGROUP_PARENT, isAlive, observePod, podRunning, sysctlValues, waitForPod } from "../support/real-node.ts";
import { startRegistry, type TestRegistry } from "../support/registry.ts";
import { buildRunnableImage } from "../support/runnable-image.ts";
import { smallClusterToolPaths, startSmallCluster, type SmallCluster } from "../support/small-cluster.ts";
import { issuerOf, readTlsSnapshot, servedCertificates, watchTls, type TlsTarget } from "../support/tls-rotation-watch.ts";
import { teardown } from "../support/teardown.ts";

const PROJECT_DIR = fileURLToPath(new URL("../..", import.meta.url));
const INSTALL = join(PROJECT_DIR, "deploy", "overlays", "kube-1.20");
const PULL_SECRET = "private-registry";
/** The strategic-merge patch of a user's overlay that gives Imprimatur's ServiceAccount the registry's pull secret. */
const SERVICE_ACCOUNT_PULL_SECRET = [
  "apiVersion: v1",
  "kind: ServiceAccount",
  "metadata:",
  "  name: imprimatur",
  "  namespace: imprimatur",
  "imagePullSecrets:",
  `  - name: ${PULL_SECRET}`,
  "",
].join("\n");
// The harness's namespaces.
const SMOKE_APP_NS = "smoke-app";
const SMOKE_WEBHOOK_NS = "smoke-webhook";
const SMOKE_GUARDED_NS = "smoke-guarded";
// Imprimatur's.
const APP_NS = "install-app";
const IMPRIMATUR_LABEL = "app.kubernetes.io/name=imprimatur";
// No "forbidden" in the policy's words: the pods' logs are searched for RBAC refusals.
const DENY_MESSAGE = "images from the blocked repository may not run here";
// A CA lives 90 s and a new one joins 40 s before that; a serving certificate lives 50 s and is renewed 30 s
// early (longer than the Lease's 15 s, so a replica taking over the lead has time); a CA is used 5 s after it is
// in every caBundle. Every replica re-reads the Secret each second.
const TLS_TIMELINE = "ca=90s/40s,cert=50s/30s,propagation=5s";
const TLS_SYNC_INTERVAL = "1s";
const TLS: TlsTarget = { secret: "imprimatur/imprimatur-tls", configuration: "imprimatur" };
const SERVICE_NAME = "imprimatur.imprimatur.svc";
/** What a user copies from (deploy/caller-auth/README.md): the Deployment patches and the control plane's files. */
const CALLER_AUTH = join(PROJECT_DIR, "deploy", "caller-auth");
const CALLERS_SECRET = "imprimatur-callers";
/** The shipped kubeconfig's path, as the shipped AdmissionConfiguration names it: here, a file of the test's own. */
const SHIPPED_WEBHOOK_KUBECONFIG = "/etc/kubernetes/imprimatur/webhook-kubeconfig.yaml";
/** The audit log of a replica: its --state-dir's audit.jsonl, read with the image's node (it has no shell). */
const READ_AUDIT_LOG = `const f = "/var/lib/imprimatur/audit.jsonl"; const fs = require("fs"); process.stdout.write(fs.existsSync(f) ? fs.readFileSync(f, "utf8") : "");`;
/**
 * Inside the cluster's network, as anything in the cluster could: each review endpoint of a replica's HTTPS port
 * called with no token and with a wrong one, the probes' paths, /metrics there and on the plain metrics port.
 * Prints one JSON array of { target, status, body }. The server's certificate is not what is checked here.
 */
const UNCREDENTIALED_CALLS = `
const https = require("https"), http = require("http");
const call = (mod, url, opts, body) => new Promise((resolve) => {
  const req = mod.request(url, { ...opts, rejectUnauthorized: false, timeout: 10000 }, (res) => {
    let text = ""; res.setEncoding("utf8"); res.on("data", (c) => (text += c));
    res.on("end", () => resolve({ status: res.statusCode, body: text }));
  });
  req.on("timeout", () => req.destroy(new Error("timed out")));
  req.on("error", (e) => resolve({ status: 0, body: e.message }));
  req.end(body);
});
const ip = process.argv[1];
const review = JSON.stringify({ apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview", request: { uid: "u" } });
const post = (headers) => ({ method: "POST", headers: { "content-type": "application/json", ...headers } });
(async () => {
  const out = [];
  for (const path of ["/validate", "/mutate", "/imagereview"]) {
    out.push({ target: "none " + path, ...(await call(https, "https://" + ip + ":8443" + path, post({}), review)) });
    out.push({ target: "wrong " + path, ...(await call(https, "https://" + ip + ":8443" + path, post({ authorization: "Bearer not-the-callers-token-0123456789" }), review)) });
  }
  for (const path of ["/healthz", "/readyz", "/metrics"]) out.push({ target: "https " + path, ...(await call(https, "https://" + ip + ":8443" + path, {})) });
  out.push({ target: "http :9090/metrics", ...(await call(http, "http://" + ip + ":9090/metrics", {})) });
  console.log(JSON.stringify(out));
})();
`;

const cgroupParents = (): string[] => readdirSync("/sys/fs/cgroup").filter((h) => existsSync(join("/sys/fs/cgroup", h, CGROUP_PARENT)));

describe("a small cluster in its own network namespace, and Imprimatur installed on it with kubectl apply -k and with imprimatur install", () => {
  let registry: TestRegistry;
  let cluster: SmallCluster;
  let workDir: string;
  let imprimaturDigest: string;
  let busyboxImage: string;
  let probeImage: string;
  let allowedImage: string;
  let blockedImage: string;
  /** deploy/caller-auth/caller-tokens.yaml with the digest of the token the apiserver presents, its caller and cluster. */
  let callerTokens: string;
  let caller: { name: string; cluster: string };
  /** The CA of the apiserver's client certificate, for the client-certificate patch (imprimatur install below). */
  let clientCa: ClientCa;
  // The machine as it was before the cluster started; the last test compares.
  let sysctlsBefore: Record<string, string | null>;
  let cgroupParentsBefore: string[];
  let runNetnsBefore: boolean;

  async function kubectl(...args: string[]): Promise<string> {
    const result = await cluster.kubectl(args, { timeoutMs: 60_000 });
    assert.equal(result.code, 0, `kubectl ${args.join(" ")} failed: ${result.stderr}`);
    return result.stdout;
  }
  const apply = async (...objects: object[]) => {
    const result = await cluster.apply(objects.map((o) => JSON.stringify(o)).join("\n"));
    assert.equal(result.code, 0, `kubectl apply failed: ${result.stderr}`);
  };
  /** A Role allowing `verbs` on pods in `namespace`, bound to `subject`: the objects, to apply. */
  const podsRole = (namespace: string, name: string, verbs: string[], subject: Record<string, string>) => [
    { apiVersion: "rbac.authorization.k8s.io/v1", kind: "Role", metadata: { name, namespace }, rules: [{ apiGroups: [""], resources: ["pods"], verbs }] },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "RoleBinding",
      metadata: { name: `${name}-binding`, namespace },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name },
      subjects: [subject],
    },
  ];
  const clusterContext = () =>
    `controller-manager:\n${cluster.componentLogs("controller-manager", 15)}\nscheduler:\n${cluster.componentLogs("scheduler", 10)}\n` +
    `kubelet:\n${cluster.componentLogs("kubelet", 25)}`;
  const imprimaturContext = async () => {
    const pods = await cluster.kubectl(["get", "pods", "-n", "imprimatur", "-o", "wide"]);
    const logs = await cluster.kubectl(["logs", "-n", "imprimatur", "-l", IMPRIMATUR_LABEL, "--tail=30"]);
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

  /**
   * Server-side dry-run pod creates, one after another until stopped, alternating an allowed image and a blocked
   * one: the first must be admitted and the second refused with the policy's message. Anything else — a
   * webhook that could not be called, a TLS error, a timeout — is a failure.
   */
  const streamAdmissions = (prefix: string) => {
    const failures: string[] = [];
    let admitted = 0;
    let refused = 0;
    let streaming = true;
    const loop = (async () => {
      for (let i = 0; streaming; i++) {
        const blocked = i % 2 === 1;
        const name = `${prefix}-${i}`;
        const r = await cluster.kubectl(["create", "--dry-run=server", "-f", "-"], {
          input: pod(name, APP_NS, blocked ? blockedImage : allowedImage),
          timeoutMs: 60_000,
        });
        if (blocked && r.code !== 0 && r.stderr.includes(DENY_MESSAGE)) refused++;
        else if (!blocked && r.code === 0) admitted++;
        else failures.push(`${new Date().toISOString()} ${name}: ${r.code === 0 ? "admitted" : r.stderr.trim()}`);
      }
    })();
    return {
      async stop() {
        streaming = false;
        await loop;
        return { admitted, refused, failures };
      },
    };
  };

  before(async () => {
    sysctlsBefore = sysctlValues();
    cgroupParentsBefore = cgroupParents();
    runNetnsBefore = existsSync("/run/netns");
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
    imprimaturDigest = (await registry.inspectRaw("imprimatur/imprimatur", "e2e")).digest;

    // The harness's images, by tag; Imprimatur's workload images by digest (the pinning webhook has nothing to resolve).
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
    for (const repository of ["allowed/busybox", "blocked/busybox"]) {
      const image = buildRunnableImage({ tag: "v1", seed: `install-${repository}` });
      try {
        await registry.push(image.layoutDir, "v1", repository, "v1");
      } finally {
        rmSync(image.layoutDir, { recursive: true, force: true });
      }
      const ref = `${registry.host}/${repository}@${image.digest}`;
      if (repository.startsWith("allowed")) allowedImage = ref;
      else blockedImage = ref;
    }

    // The apiserver's credentials for Imprimatur, as deploy/caller-auth ships them: a token whose digest goes into
    // the shipped CallerTokens file, and the shipped AdmissionConfiguration and kubeconfig, whose user is named for
    // the webhooks' Service. The user also carries a client certificate (CN the caller, O its cluster): a replica
    // with --client-ca asks for it (the client-certificate patch, imprimatur install below), one without does not.
    const token = randomToken();
    callerTokens = readFileSync(join(CALLER_AUTH, "caller-tokens.yaml"), "utf8").replace("REPLACE-WITH-THE-SHA256-OF-THE-TOKEN", tokenDigest(token));
    const [entry] = (parse(callerTokens) as { callers: Array<{ name: string; cluster: string }> }).callers;
    caller = { name: entry!.name, cluster: entry!.cluster };
    clientCa = await createClientCa();
    const certificate = await clientCa.issue(`/CN=${caller.name}/O=${caller.cluster}`);
    const kubeconfig = parse(readFileSync(join(CALLER_AUTH, "control-plane", "webhook-kubeconfig.yaml"), "utf8")) as {
      users: Array<{ name: string; user: Record<string, string> }>;
    };
    assert.deepEqual(
      kubeconfig.users.map((u) => [u.name, u.user]),
      [[SERVICE_NAME, { token: "REPLACE-WITH-THE-TOKEN" }]],
    );
    kubeconfig.users[0]!.user = {
      token,
      "client-certificate-data": Buffer.from(certificate.certPem).toString("base64"),
      "client-key-data": Buffer.from(certificate.keyPem).toString("base64"),
    };
    const kubeconfigFile = join(workDir, "webhook-kubeconfig.yaml");
    writeFileSync(kubeconfigFile, stringify(kubeconfig), { mode: 0o600 });
    const admissionConfiguration = readFileSync(join(CALLER_AUTH, "control-plane", "admission-configuration.yaml"), "utf8");
    assert.equal(admissionConfiguration.split(SHIPPED_WEBHOOK_KUBECONFIG).length, 3, "the two plugins name the shipped kubeconfig");

    cluster = await startSmallCluster({
      registries: [{ host: registry.host, caFile: registry.caFile }],
      admissionConfigYaml: admissionConfiguration.replaceAll(SHIPPED_WEBHOOK_KUBECONFIG, kubeconfigFile),
    });
  });

  after(() =>
    teardown([() => cluster?.stop(), () => registry?.stop(), () => clientCa?.remove(), () => workDir && rmSync(workDir, { recursive: true, force: true })]),
  );

  /** The Secret deploy/caller-auth's patches mount: the callers' file or CA, and the cluster they speak for. */
  const createCallersSecret = async (data: Record<string, string>) => {
    const created = await cluster.apply(
      JSON.stringify({ apiVersion: "v1", kind: "Secret", metadata: { name: CALLERS_SECRET, namespace: "imprimatur" }, stringData: data }),
    );
    assert.equal(created.code, 0, `the Secret ${CALLERS_SECRET}: ${created.stderr}`);
  };
  /** Every line the current Imprimatur pods have logged (a pod still starting has none). */
  const imprimaturLogLines = async () => {
    const pods = JSON.parse((await cluster.kubectl(["get", "pods", "-n", "imprimatur", "-l", IMPRIMATUR_LABEL, "-o", "json"])).stdout) as {
      items: Array<{ metadata: { name: string } }>;
    };
    const lines: string[] = [];
    for (const p of pods.items) {
      const r = await cluster.kubectl(["logs", "-n", "imprimatur", p.metadata.name, "--tail=-1"], { timeoutMs: 60_000 });
      if (r.code === 0) lines.push(...r.stdout.split("\n").filter((l) => l.trim() !== ""));
    }
    return lines;
  };

  describe("the harness", () => {
    before(async () => {
      for (const ns of [SMOKE_APP_NS, SMOKE_WEBHOOK_NS]) {
        await cluster.createNamespace(ns);
        await createPullSecret(cluster, ns, PULL_SECRET, registry, registry.password);
      }
      await cluster.createNamespace(SMOKE_GUARDED_NS, { "smoke.imprimatur.dev/guarded": "true" });
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
        assert.ok(isAlive(pid), `${name} (${pid}) is running`);
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
          metadata: { name: "sleeper", namespace: SMOKE_APP_NS },
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
          metadata: { name: "sleeper", namespace: SMOKE_APP_NS },
          spec: { selector: labels, ports: [{ port: 80, targetPort: 8080 }] },
        },
      );
      const rollout = await cluster.kubectl(["rollout", "status", "deployment/sleeper", "-n", SMOKE_APP_NS, "--timeout=120s"], { timeoutMs: 130_000 });
      assert.equal(rollout.code, 0, `rollout: ${rollout.stdout} ${rollout.stderr}\n${clusterContext()}`);
      const pods = JSON.parse(await kubectl("get", "pods", "-n", SMOKE_APP_NS, "-l", "app=sleeper", "-o", "json")).items as Array<{
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
        const endpoints = JSON.parse(await kubectl("get", "endpoints", "sleeper", "-n", SMOKE_APP_NS, "-o", "json"));
        addresses = (endpoints.subsets ?? []).flatMap((s: { addresses?: Array<{ ip: string }> }) => (s.addresses ?? []).map((a) => a.ip));
        if (addresses.length < 2) await new Promise((r) => setTimeout(r, 200));
      }
      assert.deepEqual(addresses.sort(), pods.map((p) => p.status.podIP).sort());
    });

    test("a pod reaches the apiserver through the kubernetes Service with its service-account token, verifying it with the mounted CA", async () => {
      await apply(...podsRole(SMOKE_APP_NS, "read-pods", ["get"], { kind: "ServiceAccount", name: "default", namespace: SMOKE_APP_NS }), {
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name: "whoami", namespace: SMOKE_APP_NS },
        spec: {
          restartPolicy: "Never",
          imagePullSecrets: [{ name: PULL_SECRET }],
          containers: [{ name: "main", image: probeImage, args: ["whoami"] }],
        },
      });
      let phase = "";
      for (let i = 0; i < 300 && phase !== "Succeeded" && phase !== "Failed"; i++) {
        phase = (await kubectl("get", "pod", "whoami", "-n", SMOKE_APP_NS, "-o", "jsonpath={.status.phase}")).trim();
        if (phase !== "Succeeded" && phase !== "Failed") await new Promise((r) => setTimeout(r, 200));
      }
      assert.equal(phase, "Succeeded", clusterContext());
      // kubectl logs: the apiserver reaches the kubelet at the node's InternalIP.
      const logs = await kubectl("logs", "whoami", "-n", SMOKE_APP_NS);
      const line = logs.split("\n").find((l) => l.startsWith("WHOAMI"));
      assert.ok(line?.startsWith("WHOAMI {"), `the pod's report: ${logs}`);
      assert.deepEqual(JSON.parse(line!.slice("WHOAMI ".length)), { status: 200, name: "whoami", server: "10.96.0.1:443" });
    });

    test("the apiserver calls a validating webhook served by a pod behind a Service (clientConfig.service + caBundle)", async () => {
      const service = "probe-webhook";
      const ca = await createCertificateAuthority("small-cluster-webhook-ca");
      const serving = await issueCertificate(ca, { commonName: service, dnsNames: [`${service}.${SMOKE_WEBHOOK_NS}.svc`] });
      const labels = { app: service };
      await apply(
        {
          apiVersion: "v1",
          kind: "Secret",
          metadata: { name: "probe-webhook-tls", namespace: SMOKE_WEBHOOK_NS },
          type: "kubernetes.io/tls",
          stringData: { "tls.crt": serving.certPem, "tls.key": serving.keyPem },
        },
        {
          apiVersion: "apps/v1",
          kind: "Deployment",
          metadata: { name: service, namespace: SMOKE_WEBHOOK_NS },
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
          metadata: { name: service, namespace: SMOKE_WEBHOOK_NS },
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
                service: { namespace: SMOKE_WEBHOOK_NS, name: service, path: "/validate", port: 443 },
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
      const rollout = await cluster.kubectl(["rollout", "status", `deployment/${service}`, "-n", SMOKE_WEBHOOK_NS, "--timeout=120s"], { timeoutMs: 130_000 });
      assert.equal(rollout.code, 0, `rollout: ${rollout.stdout} ${rollout.stderr}\n${clusterContext()}`);

      const configMap = (name: string, verdict: string) =>
        JSON.stringify({ apiVersion: "v1", kind: "ConfigMap", metadata: { name, namespace: SMOKE_GUARDED_NS }, data: { verdict } });
      await untilWebhookActive(cluster, configMap("probe", "deny"), (p) => p.stderr.includes("refused by the probe webhook"), {
        context: async () => `${cluster.logs()}\n${clusterContext()}`,
      });
      const denied = await cluster.kubectl(["create", "-f", "-"], { input: configMap("denied", "deny") });
      assert.notEqual(denied.code, 0);
      assert.match(denied.stderr, /admission webhook "probe\.smoke\.imprimatur\.dev" denied the request: refused by the probe webhook/);
      const allowed = await cluster.kubectl(["create", "-f", "-"], { input: configMap("allowed", "allow") });
      assert.equal(allowed.code, 0, allowed.stderr);
      // Outside the namespaceSelector the webhook is never asked.
      const elsewhere = await cluster.kubectl(["create", "-f", "-"], { input: configMap("elsewhere", "deny").replace(SMOKE_GUARDED_NS, SMOKE_APP_NS) });
      assert.equal(elsewhere.code, 0, elsewhere.stderr);
      const podName = (await kubectl("get", "pods", "-n", SMOKE_WEBHOOK_NS, "-l", `app=${service}`, "-o", "jsonpath={.items[0].metadata.name}")).trim();
      const served = await kubectl("logs", podName, "-n", SMOKE_WEBHOOK_NS);
      assert.match(served, /: denied\n/);
      assert.match(served, /: allowed\n/);
    });
  });

  describe("Imprimatur installed with kubectl apply -k", () => {
    const imprimaturPods = async () =>
      JSON.parse(await kubectl("get", "pods", "-n", "imprimatur", "-l", IMPRIMATUR_LABEL, "-o", "json")).items as Array<{
        metadata: { name: string; deletionTimestamp?: string };
        spec: { serviceAccountName: string };
        status: {
          podIP?: string;
          conditions?: Array<{ type: string; status: string }>;
          containerStatuses?: Array<{ restartCount: number }>;
        };
      }>;

    const blockedRepositoryPolicy = () => ({
      apiVersion: "imprimatur.dev/v1alpha1",
      kind: "ImagePolicy",
      metadata: { name: "no-blocked-repository" },
      // On-call people may set it aside (docs/break-glass.md); the user of the break-glass test below may not.
      spec: { rules: [{ action: "deny", images: [`${registry.host}/blocked/*`], message: DENY_MESSAGE }], default: "allow", breakGlass: { allowed: true } },
    });

    /**
     * Every line the Imprimatur pods have logged, gathered after each test (and before a pod is deleted): a pod's
     * log lasts only as long as the pod, and a kubelet of another test run on this machine may collect the pod log
     * folders it does not know (they share /var/log/pods), after which a log starts afresh.
     */
    const podLogLines = new Map<string, Set<string>>();
    const gatherPodLogs = async () => {
      for (const p of await imprimaturPods()) {
        const r = await cluster.kubectl(["logs", "-n", "imprimatur", p.metadata.name, "--tail=-1"], { timeoutMs: 60_000 });
        if (r.code !== 0) continue; // a pod still starting has no log yet
        const lines = podLogLines.get(p.metadata.name) ?? new Set<string>();
        for (const line of r.stdout.split("\n")) if (line.trim() !== "") lines.add(line);
        podLogLines.set(p.metadata.name, lines);
      }
    };

    before(async () => {
      // On v1.20 the namespaceSelector's exclusions need these labels (the overlay's instructions).
      await kubectl("label", "namespace", "kube-system", "kubernetes.io/metadata.name=kube-system", "--overwrite");
      await cluster.createNamespace("imprimatur", { "kubernetes.io/metadata.name": "imprimatur" });
      for (const ns of ["imprimatur", "kube-system"]) await createPullSecret(cluster, ns, PULL_SECRET, registry, registry.password);
      await cluster.createNamespace(APP_NS);
      await createPullSecret(cluster, APP_NS, PULL_SECRET, registry, registry.password);
      // The apiserver's token (its digest) and the cluster it speaks for, before the pods start (they mount it).
      await createCallersSecret({ "caller-tokens.yaml": callerTokens, "cluster-name": caller.cluster });

      // The user's overlay: where the image is, the pull secret for it, a certificate timeline of minutes, and
      // deploy/caller-auth's patch copied in as it is (kustomize reads patches only from the overlay's folder).
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
          "patchesJson6902:",
          ...["tls-timeline.yaml", "deployment-caller-tokens.yaml"].map(
            (path) => `  - {target: {group: apps, version: v1, kind: Deployment, name: imprimatur, namespace: imprimatur}, path: ${path}}`,
          ),
          "",
        ].join("\n"),
      );
      writeFileSync(join(overlay, "service-account-pull-secret.yaml"), SERVICE_ACCOUNT_PULL_SECRET);
      copyFileSync(join(CALLER_AUTH, "deployment-caller-tokens.yaml"), join(overlay, "deployment-caller-tokens.yaml"));
      // Appended to serve's arguments (JSON strings are YAML scalars).
      writeFileSync(
        join(overlay, "tls-timeline.yaml"),
        ["--tls-timeline", TLS_TIMELINE, "--tls-sync-interval", TLS_SYNC_INTERVAL]
          .map((arg) => `- op: add\n  path: /spec/template/spec/containers/0/args/-\n  value: ${JSON.stringify(arg)}\n`)
          .join(""),
      );
      const applied = await cluster.kubectl(["apply", "-k", overlay], { timeoutMs: 120_000 });
      assert.equal(applied.code, 0, `kubectl apply -k: ${applied.stderr}`);
      // The replicas run with --require-policies: not ready until a policy is in force, so the policy comes
      // before the rollout can finish (docs/install.md: the CRDs, then the policies).
      const established = await cluster.kubectl(["wait", "--for=condition=Established", "crd", "--all", "--timeout=60s"]);
      assert.equal(established.code, 0, established.stderr);
      const created = await cluster.apply(JSON.stringify(blockedRepositoryPolicy()));
      assert.equal(created.code, 0, created.stderr);
      const rollout = await cluster.kubectl(["rollout", "status", "deployment/imprimatur", "-n", "imprimatur", "--timeout=240s"], { timeoutMs: 250_000 });
      assert.equal(rollout.code, 0, `rollout: ${rollout.stdout} ${rollout.stderr}\n${await imprimaturContext()}`);

      await untilWebhookActive(cluster, pod("probe", APP_NS, blockedImage), (p) => p.stderr.includes(DENY_MESSAGE), { context: imprimaturContext });
    });

    test("the installed webhooks refuse a denied pod and admit an allowed one, which runs", async () => {
      const denied = await cluster.kubectl(["create", "-f", "-"], { input: pod("denied", APP_NS, blockedImage) });
      assert.notEqual(denied.code, 0, "the blocked image is refused");
      assert.match(denied.stderr, /admission webhook "images\.imprimatur\.dev" denied the request/);
      assert.ok(denied.stderr.includes(DENY_MESSAGE), denied.stderr);
      const allowed = await cluster.kubectl(["create", "-f", "-"], { input: pod("allowed", APP_NS, allowedImage) });
      assert.equal(allowed.code, 0, allowed.stderr);
      await waitForPod(cluster, APP_NS, "allowed", podRunning, 60_000, () => cluster.componentLogs("kubelet", 20));
      await gatherPodLogs();
    });

    test("a break-glass attempt by a user who may not is refused, and the replica's audit record names the authenticated caller and its cluster", async () => {
      // mallory may create pods in the namespace, but holds no break-glass grant (docs/break-glass.md).
      await apply(...podsRole(APP_NS, "create-pods", ["create"], { apiGroup: "rbac.authorization.k8s.io", kind: "User", name: "mallory" }));
      const ticket = "INC-3636";
      const glass = JSON.parse(pod("glass", APP_NS, blockedImage));
      glass.metadata.annotations = { "break-glass.image-policy.k8s.io/reason": "outage", "break-glass.image-policy.k8s.io/ticket": ticket };
      // Not a dry run: a dry run leaves no audit record (sideEffects: NoneOnDryRun).
      const refused = await cluster.kubectl(["--as=mallory", "create", "-f", "-"], { input: JSON.stringify(glass) });
      assert.notEqual(refused.code, 0, "the override is refused");
      assert.match(refused.stderr, /admission webhook "images\.imprimatur\.dev" denied the request/);
      assert.ok(refused.stderr.includes('break-glass was requested by "mallory", who may not use it on this policy'), refused.stderr);

      // The record is written before the answer, by the replica that was asked.
      const records: Array<Record<string, unknown>> = [];
      for (const p of await imprimaturPods()) {
        const read = await cluster.kubectl([
          "exec",
          "-n",
          "imprimatur",
          p.metadata.name,
          "-c",
          "imprimatur",
          "--",
          "/usr/local/bin/node",
          "-e",
          READ_AUDIT_LOG,
        ]);
        assert.equal(read.code, 0, `reading ${p.metadata.name}'s audit log: ${read.stderr}`);
        for (const line of read.stdout.split("\n")) if (line.trim() !== "") records.push({ pod: p.metadata.name, ...JSON.parse(line) });
      }
      const attempts = records.filter((r) => r.ticket === ticket);
      assert.equal(attempts.length, 1, `one record of the attempt: ${JSON.stringify(records)}`);
      const record = attempts[0]!;
      assert.equal(record.event, "break-glass-refused");
      assert.deepEqual([record.endpoint, record.namespace, record.kind, record.name, record.user], ["validate", APP_NS, "Pod", "glass", "mallory"]);
      assert.deepEqual(record.caller, { authenticated: true, authentication: "token", name: caller.name, cluster: caller.cluster });
      assert.deepEqual(record.images, [blockedImage]);
      const [refusal] = record.refusals as Array<{ policy: string; rule: string; message: string }>;
      assert.deepEqual([refusal?.policy, refusal?.rule], ["no-blocked-repository", "breakGlass"]);
      assert.ok(
        refusal!.message.includes('no RBAC rule grants the verb break-glass on imagepolicies.imprimatur.dev "no-blocked-repository"'),
        refusal!.message,
      );
      assert.equal((await observePod(cluster, APP_NS, "glass")).phase, "Absent");
      await gatherPodLogs();
    });

    test("a caller without the token is refused 401 on every review endpoint of a replica; the probes and the metrics port stay open", async () => {
      const pods = (await imprimaturPods()).filter((p) => p.status.podIP && !p.metadata.deletionTimestamp);
      assert.equal(pods.length, 2);
      for (const p of pods) {
        const out = await cluster.exec(process.execPath, ["-e", UNCREDENTIALED_CALLS, p.status.podIP!], { timeoutMs: 60_000 });
        assert.equal(out.code, 0, out.stderr);
        const calls = new Map((JSON.parse(out.stdout) as Array<{ target: string; status: number; body: string }>).map((c) => [c.target, c]));
        for (const path of ["/validate", "/mutate", "/imagereview"]) {
          const none = calls.get(`none ${path}`)!;
          assert.equal(none.status, 401, `${p.metadata.name} ${path} without a token: ${none.body}`);
          assert.equal(JSON.parse(none.body).message, "unauthorized: no credentials: present a bearer token");
          const wrong = calls.get(`wrong ${path}`)!;
          assert.equal(wrong.status, 401, `${p.metadata.name} ${path} with a wrong token: ${wrong.body}`);
          assert.equal(JSON.parse(wrong.body).message, "unauthorized: the bearer token is not one of the caller tokens");
        }
        // The kubelet's probes need no credentials; /metrics is served on the metrics port (--metrics-port), to
        // Prometheus without credentials, and not on the webhooks' port.
        assert.deepEqual(
          ["https /healthz", "https /readyz", "https /metrics", "http :9090/metrics"].map((t) => [t, calls.get(t)!.status]),
          [
            ["https /healthz", 200],
            ["https /readyz", 200],
            ["https /metrics", 404],
            ["http :9090/metrics", 200],
          ],
        );
        const refusedCount = /^imprimatur_callers_refused_total\{path="\/validate"\} (\d+)$/m.exec(calls.get("http :9090/metrics")!.body)?.[1];
        assert.ok(Number(refusedCount) >= 2, `the refusals are counted: ${refusedCount}`);
      }
      await gatherPodLogs();
      const refusals = [...podLogLines.values()].flatMap((lines) => [...lines]).filter((l) => l.includes('"msg":"caller refused"'));
      assert.ok(refusals.length >= 12, `each refusal is logged: ${refusals.length}`);
    });

    test("an invalid policy applied with kubectl shows its error in its status and an Event; the previous generation stays in force", async () => {
      const broken = {
        apiVersion: "imprimatur.dev/v1alpha1",
        kind: "ImagePolicy",
        metadata: { name: "no-blocked-repository" },
        spec: { rules: [{ action: "deny", images: ["[not-a-pattern"], message: DENY_MESSAGE }], default: "allow" },
      };
      const applied = await cluster.apply(JSON.stringify(broken));
      assert.equal(applied.code, 0, `the apiserver's schema accepts it (only the loader can tell): ${applied.stderr}`);
      type Condition = { type: string; status: string; reason?: string; message?: string; observedGeneration?: number };
      let ready: Condition | undefined;
      for (let i = 0; i < 150; i++) {
        const got = JSON.parse(await kubectl("get", "imagepolicy", "no-blocked-repository", "-o", "json"));
        ready = (got.status?.conditions as Condition[] | undefined)?.find((c) => c.type === "Ready");
        if (ready?.status === "False" && ready.observedGeneration === got.metadata.generation) break;
        await new Promise((r) => setTimeout(r, 200));
      }
      assert.equal(ready?.status, "False", `status: ${JSON.stringify(ready)}\n${await imprimaturContext()}`);
      assert.equal(ready?.reason, "InvalidPolicy");
      assert.match(ready?.message ?? "", /spec\.rules\[0\]\.images\[0\]/);
      assert.match(ready?.message ?? "", /generation 1 stays in force/);
      const events = JSON.parse(
        await kubectl("get", "events", "-n", "default", "--field-selector", "involvedObject.name=no-blocked-repository,type=Warning", "-o", "json"),
      ).items as Array<{ reason: string; message: string }>;
      assert.ok(
        events.some((e) => e.reason === "InvalidPolicy" && e.message.includes("spec.rules[0].images[0]")),
        `a Warning Event: ${JSON.stringify(events)}`,
      );
      const stillDenied = await cluster.kubectl(["create", "--dry-run=server", "-f", "-"], { input: pod("still-denied", APP_NS, blockedImage) });
      assert.notEqual(stillDenied.code, 0);
      assert.ok(stillDenied.stderr.includes(DENY_MESSAGE), stillDenied.stderr);

      // Fixed again, for the tests below: a replica started while the resource is broken would not know its last
      // good generation (docs/policy-resources.md), and would admit the blocked image.
      await apply(blockedRepositoryPolicy());
      for (let i = 0; ; i++) {
        const got = JSON.parse(await kubectl("get", "imagepolicy", "no-blocked-repository", "-o", "json"));
        ready = (got.status?.conditions as Condition[] | undefined)?.find((c) => c.type === "Ready");
        if (ready?.status === "True" && ready.observedGeneration === got.metadata.generation) break;
        assert.ok(i < 150, `the fixed policy is loaded: ${JSON.stringify(ready)}\n${await imprimaturContext()}`);
        await new Promise((r) => setTimeout(r, 200));
      }
    });

    test("deleting one replica's pod during a stream of admissions fails none of them; the new replica keeps the CA", async (t) => {
      const tlsBefore = await readTlsSnapshot(cluster, TLS);
      assert.equal(Object.keys(tlsBefore.bundles).length, 2, `a webhook in each configuration: ${Object.keys(tlsBefore.bundles).join(", ")}`);
      for (const [webhook, bundle] of Object.entries(tlsBefore.bundles)) assert.ok(bundle.length > 0, `${webhook} carries a caBundle`);
      const replicas = (await imprimaturPods()).map((p) => p.metadata.name);
      assert.equal(replicas.length, 2, `two replicas: ${replicas.join(", ")}`);
      await gatherPodLogs();
      // The CAs are watched throughout: one that left ca.crt or a caBundle before it expired would be a CA replaced.
      const watch = watchTls(cluster, TLS);
      const stream = streamAdmissions("restart");
      let streamed: Awaited<ReturnType<typeof stream.stop>>;
      try {
        await new Promise((r) => setTimeout(r, 2_000));
        await kubectl("delete", "-n", "imprimatur", `pod/${replicas[0]!}`, "--wait=false");
        // Until the replacement is ready and the deleted pod is gone.
        const rollout = await cluster.kubectl(["rollout", "status", "deployment/imprimatur", "-n", "imprimatur", "--timeout=180s"], { timeoutMs: 190_000 });
        assert.equal(rollout.code, 0, rollout.stderr);
        for (let i = 0; i < 300; i++) {
          if (!(await imprimaturPods()).some((p) => p.metadata.name === replicas[0])) break;
          await new Promise((r) => setTimeout(r, 200));
        }
        await new Promise((r) => setTimeout(r, 2_000));
      } finally {
        streamed = await stream.stop();
        await watch.stop();
      }
      t.diagnostic(`${streamed.admitted} admitted, ${streamed.refused} refused as the policy says, ${watch.changes.length} TLS states seen`);
      assert.deepEqual(
        streamed.failures,
        [],
        `${streamed.failures.length} of ${streamed.failures.length + streamed.admitted + streamed.refused} admissions failed`,
      );
      assert.ok(streamed.admitted > 0 && streamed.refused > 0);
      assert.deepEqual(watch.violations, []);
      const tlsAfter = await readTlsSnapshot(cluster, TLS);
      for (const ca of tlsBefore.cas.filter((c) => c.notAfter > tlsAfter.at)) {
        assert.ok(
          tlsAfter.cas.some((c) => c.fingerprint === ca.fingerprint),
          `CA ${ca.fingerprint} is still in ca.crt`,
        );
        for (const [webhook, bundle] of Object.entries(tlsAfter.bundles)) assert.ok(bundle.includes(ca.fingerprint), `and in ${webhook}'s caBundle`);
      }
      const replacement = (await imprimaturPods()).filter((p) => !replicas.includes(p.metadata.name));
      assert.equal(replacement.length, 1, `one new replica: ${replacement.map((p) => p.metadata.name).join(", ")}`);
      // It serves a certificate signed by a CA of the Secret, one every caBundle holds.
      const [served] = await servedCertificates(cluster, SERVICE_NAME, [`${replacement[0]!.status.podIP}:8443`]);
      assert.ok(served?.cert, `the new replica's certificate: ${served?.error}`);
      const issuer = issuerOf(served.cert, tlsAfter.cas);
      assert.ok(issuer, `signed by a CA of ca.crt: ${served.cert.issuer}`);
      for (const [webhook, bundle] of Object.entries(tlsAfter.bundles)) assert.ok(bundle.includes(issuer), `a CA in ${webhook}'s caBundle`);
      await gatherPodLogs();
      const logs = [...(podLogLines.get(replacement[0]!.metadata.name) ?? [])].join("\n");
      assert.doesNotMatch(logs, /self-managed TLS: created a CA/, "and it made no CA of its own");
    });

    test("a rolling restart of the installed Deployment during a stream of pod creates fails none of them", async (t) => {
      const before = (await imprimaturPods()).map((p) => p.metadata.name);
      const stream = streamAdmissions("rolling");
      let streamed: Awaited<ReturnType<typeof stream.stop>>;
      try {
        await new Promise((r) => setTimeout(r, 2_000));
        await kubectl("rollout", "restart", "deployment/imprimatur", "-n", "imprimatur");
        const rollout = await cluster.kubectl(["rollout", "status", "deployment/imprimatur", "-n", "imprimatur", "--timeout=240s"], { timeoutMs: 250_000 });
        assert.equal(rollout.code, 0, rollout.stderr);
        // Until every old replica is gone (a terminating pod still drains its requests).
        for (let i = 0; i < 300; i++) {
          if (!(await imprimaturPods()).some((p) => before.includes(p.metadata.name))) break;
          await new Promise((r) => setTimeout(r, 200));
        }
        await new Promise((r) => setTimeout(r, 2_000));
      } finally {
        streamed = await stream.stop();
      }
      t.diagnostic(`${streamed.admitted} admitted, ${streamed.refused} refused as the policy says, during the rolling restart`);
      assert.deepEqual(
        streamed.failures,
        [],
        `${streamed.failures.length} of ${streamed.failures.length + streamed.admitted + streamed.refused} admissions failed`,
      );
      assert.ok(streamed.admitted > 0 && streamed.refused > 0);
      const after = (await imprimaturPods()).map((p) => p.metadata.name);
      assert.equal(after.length, 2, `two replicas again: ${after.join(", ")}`);
      assert.ok(
        after.every((name) => !before.includes(name)),
        `every replica was replaced: ${before.join(", ")} → ${after.join(", ")}`,
      );
    });

    test(
      "the certificate is rotated during a stream of admissions, which fails none: a new CA joins ca.crt and every caBundle " +
        "beside the old one, every replica switches to a serving certificate it signed, which is renewed, and the old CA leaves once expired",
      async (t) => {
        const watch = watchTls(cluster, TLS);
        const stream = streamAdmissions("rotation");
        let streamed: Awaited<ReturnType<typeof stream.stop>>;
        try {
          const { snapshot: first } = await watch.waitFor("a first read", () => true);
          const known = new Set(first.cas.map((c) => c.fingerprint));
          const added = await watch.waitFor("a new CA in ca.crt beside the current one", (s) => s.cas.length >= 2 && !known.has(s.cas[0]!.fingerprint));
          const newCa = added.snapshot.cas[0]!;
          const previous = added.snapshot.cas[1]!;
          const oldCas = added.snapshot.cas.slice(1).map((c) => c.fingerprint);
          const bothTrusted = await watch.waitFor(
            "every caBundle holding the new CA and the previous one",
            (s) => Object.values(s.bundles).every((b) => b.includes(newCa.fingerprint) && b.includes(previous.fingerprint)),
            { after: added.index - 1 },
          );
          const switched = await watch.waitFor("the Secret's serving certificate signed by the new CA", (s) => s.leaf?.issuer === newCa.fingerprint, {
            after: bothTrusted.index - 1,
          });
          // What the replicas serve, read inside the cluster's network: each one loads the Secret's new certificate.
          let served: Awaited<ReturnType<typeof servedCertificates>> = [];
          for (let i = 0; ; i++) {
            const targets = (await imprimaturPods())
              .filter((p) => !p.metadata.deletionTimestamp && p.status.conditions?.some((c) => c.type === "Ready" && c.status === "True"))
              .map((p) => `${p.status.podIP}:8443`);
            served = await servedCertificates(cluster, SERVICE_NAME, targets);
            if (served.length === 2 && served.every((s) => s.cert && issuerOf(s.cert, added.snapshot.cas) === newCa.fingerprint)) break;
            assert.ok(
              i < 60,
              `every replica serves a certificate signed by the new CA: ${JSON.stringify(served.map((s) => [s.target, s.error ?? s.cert?.issuer]))}`,
            );
            await new Promise((r) => setTimeout(r, 1_000));
          }
          await watch.waitFor(
            "a renewal of the serving certificate by the new CA",
            (s) => s.leaf?.issuer === newCa.fingerprint && s.leaf.fingerprint !== switched.snapshot.leaf!.fingerprint,
            { after: switched.index },
          );
          const pruned = await watch.waitFor(
            "the old CA gone from ca.crt and from every caBundle",
            (s) => !s.cas.some((c) => oldCas.includes(c.fingerprint)) && Object.values(s.bundles).every((b) => !b.some((f) => oldCas.includes(f))),
            { after: switched.index },
          );
          assert.ok(
            pruned.snapshot.cas.some((c) => c.fingerprint === newCa.fingerprint),
            "the new CA stays",
          );
        } finally {
          streamed = await stream.stop();
          await watch.stop();
        }
        t.diagnostic(`${streamed.admitted} admitted, ${streamed.refused} refused as the policy says, ${watch.changes.length} TLS states seen`);
        assert.deepEqual(
          streamed.failures,
          [],
          `${streamed.failures.length} of ${streamed.failures.length + streamed.admitted + streamed.refused} admissions failed`,
        );
        assert.ok(streamed.admitted > 0 && streamed.refused > 0);
        // Never a CA gone before it expired, never a serving certificate in the Secret that a caBundle does not trust.
        assert.deepEqual(watch.violations, []);
        await gatherPodLogs();
      },
    );

    test("the pods run as the installed ServiceAccount, whose RBAC allowed every call they made: no 'forbidden' in their logs", async () => {
      const pods = await imprimaturPods();
      assert.equal(pods.length, 2);
      for (const p of pods) {
        assert.equal(p.spec.serviceAccountName, "imprimatur");
        if ((p.status.containerStatuses?.[0]?.restartCount ?? 0) > 0) {
          const previous = await kubectl("logs", "-n", "imprimatur", p.metadata.name, "--previous", "--tail=-1");
          for (const line of previous.split("\n")) podLogLines.get(p.metadata.name)?.add(line);
        }
      }
      await gatherPodLogs();
      // What the RBAC had to allow, done: the Lease held by a replica, the Secret and caBundle written (the rotation
      // above), the invalid policy's status and Event (above).
      const holder = (await kubectl("get", "lease", "imprimatur", "-n", "imprimatur", "-o", "jsonpath={.spec.holderIdentity}")).trim();
      assert.ok(
        pods.some((p) => p.metadata.name === holder),
        `the Lease is held by a replica: ${holder}`,
      );
      for (const [name, lines] of podLogLines) {
        assert.ok(lines.size > 0, `${name} logged`);
        const refusals = [...lines].filter((line) => /forbidden|HTTP 403/i.test(line));
        assert.deepEqual(refusals, [], `${name} was refused by RBAC`);
      }
      assert.ok(podLogLines.size >= 3, `the logs of the replicas before and after the restart: ${[...podLogLines.keys()].join(", ")}`);
    });

    test("scaled to 0, the default install still lets kube-system create pods; elsewhere pod creates fail closed", async () => {
      await kubectl("scale", "deployment/imprimatur", "-n", "imprimatur", "--replicas=0");
      // A terminating replica stays an endpoint until the kubelet reports it gone: wait for the pods to go.
      for (let i = 0; ; i++) {
        const left = await kubectl("get", "pods", "-n", "imprimatur", "-l", IMPRIMATUR_LABEL, "-o", "name");
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

  describe("imprimatur install and uninstall", () => {
    const BIN = join(PROJECT_DIR, "bin", "imprimatur.js");
    const IMAGE_REPOSITORY = "imprimatur/installed";
    let overlay: string;
    let registriesFile: string;
    /** The release key install signs with (--signing-key), its public half and fingerprint. */
    let signingKeyFile: string;
    let releasePem: string;
    let fingerprint: string;
    /** The CLI inside the cluster's network namespace, where both the apiserver and the registry are reached. */
    const imprimatur = async (args: string[], env: NodeJS.ProcessEnv = {}) => {
      const out = await runInNetns(
        cluster.netns,
        process.execPath,
        [BIN, ...args, "--kubectl", smallClusterToolPaths().kubectl, "--kubeconfig", cluster.kubeconfig],
        {
          env: { ...process.env, ...env },
          timeoutMs: 600_000,
          label: `[install] imprimatur ${args[0]}`,
        },
      );
      return { code: out.code, stdout: out.stdout.toString("utf8"), stderr: out.stderr };
    };
    const steps = (stdout: string) =>
      stdout
        .split("\n")
        .filter(Boolean)
        .map((line) => line.split(/\s+/)[0]);
    const exists = async (...args: string[]) => (await cluster.kubectl(["get", ...args, "-o", "name", "--ignore-not-found"])).stdout.trim() !== "";
    const webhookFailurePolicies = async () =>
      (
        await kubectl(
          "get",
          "validatingwebhookconfiguration,mutatingwebhookconfiguration",
          "imprimatur",
          "-o",
          "jsonpath={.items[*].webhooks[*].failurePolicy}",
        )
      )
        .trim()
        .split(/\s+/);
    const installArgs = () => [
      "install",
      "--registry",
      `${registry.host}/${IMAGE_REPOSITORY}`,
      "--authfile",
      registry.authFile,
      "--registries",
      registriesFile,
      "--kustomize",
      overlay,
      "--probe-namespace",
      APP_NS,
      "--timeout",
      "240",
      "--signing-key",
      signingKeyFile,
    ];
    /**
     * The namespace and pull secret a private registry needs, and the Secret of the client-certificate patch (the
     * CA of the apiserver's certificate, its CN, the cluster its O names), made before install as a user makes them.
     */
    const prepareNamespace = async () => {
      await cluster.createNamespace("imprimatur", { "kubernetes.io/metadata.name": "imprimatur" });
      await createPullSecret(cluster, "imprimatur", PULL_SECRET, registry, registry.password);
      await createCallersSecret({ "client-ca.crt": clientCa.certPem, "client-ca-allowed-names": caller.name, "cluster-name": caller.cluster });
    };

    before(() => {
      registriesFile = join(workDir, "registries.json");
      writeFileSync(registriesFile, registry.registryConfig());
      const key = generateSigningKey("ecdsa-p256");
      signingKeyFile = join(workDir, "release.key");
      writeFileSync(signingKeyFile, key.privateKey.export({ format: "pem", type: "pkcs8" }), { mode: 0o600 });
      releasePem = key.publicKeyPem;
      fingerprint = releaseKey(key.privateKey).fingerprint;
      // The user's overlay: the shipped v1.20 install, the pull secret for the private registry, and callers
      // authenticated by client certificate (deploy/caller-auth's other patch). No image: install sets the one it
      // pushed.
      overlay = join(workDir, "install-overlay");
      mkdirSync(overlay);
      writeFileSync(
        join(overlay, "kustomization.yaml"),
        [
          "apiVersion: kustomize.config.k8s.io/v1beta1",
          "kind: Kustomization",
          "bases:",
          `  - ${relative(overlay, INSTALL)}`,
          "patchesStrategicMerge:",
          "  - pull-secret.yaml",
          "patchesJson6902:",
          "  - target: { group: apps, version: v1, kind: Deployment, name: imprimatur, namespace: imprimatur }",
          "    path: deployment-client-ca.yaml",
          "",
        ].join("\n"),
      );
      writeFileSync(join(overlay, "pull-secret.yaml"), SERVICE_ACCOUNT_PULL_SECRET);
      copyFileSync(join(CALLER_AUTH, "deployment-client-ca.yaml"), join(overlay, "deployment-client-ca.yaml"));
    });

    test("uninstall removes the webhook configurations first, then the rest; the CRDs and policies stay; pods are admitted again", async () => {
      const result = await imprimatur(["uninstall"]);
      assert.equal(result.code, 0, `${result.stdout}${result.stderr}`);
      assert.deepEqual(steps(result.stdout), ["webhooks", "workload", "crds", "removed"], result.stdout);
      assert.equal(await exists("validatingwebhookconfiguration", "imprimatur"), false);
      assert.equal(await exists("mutatingwebhookconfiguration", "imprimatur"), false);
      assert.equal(await exists("namespace", "imprimatur"), false, "the namespace and everything in it are gone");
      assert.equal(await exists("clusterrole", "imprimatur"), false);
      assert.equal(await exists("crd", "imagepolicies.imprimatur.dev"), true, "the CRDs stay without --purge");
      assert.equal(await exists("imagepolicy", "no-blocked-repository"), true, "and the policies in them");
      const admitted = await cluster.kubectl(["create", "--dry-run=server", "-f", "-"], { input: pod("after-uninstall", APP_NS, blockedImage) });
      assert.equal(admitted.code, 0, `nothing reviews pods now: ${admitted.stderr}`);
    });

    test("a registry that refuses the push stops install at its first step, with the cluster untouched", async () => {
      const wrongAuth = join(workDir, "wrong-auth.json");
      writeFileSync(wrongAuth, JSON.stringify({ auths: { [registry.host]: { auth: Buffer.from(`${registry.username}:wrong`).toString("base64") } } }));
      const args = installArgs();
      args[args.indexOf("--authfile") + 1] = wrongAuth;
      const result = await imprimatur(args);
      assert.equal(result.code, 1, `${result.stdout}${result.stderr}`);
      assert.match(result.stderr, /imprimatur install: image failed: .*unauthorized/);
      assert.match(result.stderr, /cluster: nothing in the cluster was changed/);
      assert.deepEqual(steps(result.stdout), ["image"], "built, then nothing more");
      assert.equal(await exists("namespace", "imprimatur"), false);
      assert.equal(await exists("validatingwebhookconfiguration", "imprimatur"), false);
    });

    test("install pushes the image, waits for Imprimatur to answer through the apiserver and only then enforces; a denied pod is refused, an allowed one runs", async (t) => {
      await prepareNamespace();
      const result = await imprimatur(installArgs());
      t.diagnostic(result.stdout);
      assert.equal(result.code, 0, `${result.stdout}${result.stderr}`);
      assert.deepEqual(
        steps(result.stdout),
        ["image", "image", "sign", "render", "cluster", "crds", "policies", "apply", "rollout", "readyz", "probe", "enforce", "installed"],
        result.stdout,
      );
      assert.match(result.stdout, /apply .*webhooks at failurePolicy Ignore until Imprimatur answers/);
      // Denied, not admitted: the apiserver's call was answered, so it presented the certificate (without it, a 401,
      // and at Ignore a failed call admits).
      assert.match(result.stdout, /probe .*denied by (images|pins)\.imprimatur\.dev/);
      const pushed = /installed +\S+@(sha256:[0-9a-f]{64})/.exec(result.stdout)?.[1];
      assert.ok(pushed, result.stdout);
      assert.equal((await registry.inspectRaw(IMAGE_REPOSITORY, pushed)).digest, pushed, "the image is in the registry");

      // Signed with the key given, with its SBOM and provenance, as cosign v3 referrers: deploy/'s own policy verifies it.
      assert.match(
        result.stdout,
        new RegExp(
          `^sign +signature sha256:[0-9a-f]{64}, sbom sha256:[0-9a-f]{64}, provenance sha256:[0-9a-f]{64} attached, signed by key ${fingerprint}; listed in the referrers tag sha256-${pushed.slice(7)}$`,
          "m",
        ),
      );
      const index = JSON.parse((await registry.inspectRaw(IMAGE_REPOSITORY, `sha256-${pushed.slice(7)}`)).raw.toString()) as {
        manifests: Array<{ annotations: Record<string, string> }>;
      };
      assert.deepEqual(
        index.manifests.map((d) => d.annotations["dev.sigstore.bundle.predicateType"]),
        ["https://sigstore.dev/cosign/sign/v1", "https://spdx.dev/Document", "https://slsa.dev/provenance/v1"],
      );
      const indent = (pem: string) =>
        pem
          .trimEnd()
          .split("\n")
          .map((l) => `                  ${l}`)
          .join("\n");
      const shipped = readFileSync(join(PROJECT_DIR, "deploy/self-verification/imagepolicy.yaml"), "utf8");
      const placeholder = indent("-----BEGIN PUBLIC KEY-----\nREPLACE-WITH-THE-IMPRIMATUR-RELEASE-PUBLIC-KEY\n-----END PUBLIC KEY-----");
      assert.ok(shipped.includes(placeholder) && shipped.includes('["registry.example.com/platform/imprimatur"]'), "the shipped policy's placeholders");
      const selfVerification = join(workDir, "self-verification.yaml");
      writeFileSync(
        selfVerification,
        shipped.replace(placeholder, indent(releasePem)).replace('["registry.example.com/platform/imprimatur"]', `["${registry.host}/${IMAGE_REPOSITORY}"]`),
      );
      const verified = await imprimaturOnHost([
        "verify",
        "--policies",
        selfVerification,
        "--authfile",
        registry.authFile,
        "--registries",
        registriesFile,
        `${registry.host}/${IMAGE_REPOSITORY}@${pushed}`,
      ]);
      assert.equal(verified.code, 0, verified.stdout + verified.stderr);
      const image = (await kubectl("get", "deployment", "imprimatur", "-n", "imprimatur", "-o", "jsonpath={.spec.template.spec.containers[0].image}")).trim();
      assert.equal(image, `${registry.host}/${IMAGE_REPOSITORY}@${pushed}`);
      assert.deepEqual(await webhookFailurePolicies(), ["Fail", "Fail"]);
      assert.equal(await exists("imagepolicy", "pinned-versions"), true, "the default policy was created");

      const denied = await cluster.kubectl(["create", "-f", "-"], { input: pod("install-denied", APP_NS, blockedImage) });
      assert.notEqual(denied.code, 0);
      assert.ok(denied.stderr.includes(DENY_MESSAGE), denied.stderr);
      // The decision's log line names the caller its certificate names (denials are written out within a second).
      let decisions: Array<{ msg?: string; name?: string; caller?: unknown }> = [];
      for (let i = 0; decisions.length === 0; i++) {
        assert.ok(i < 30, "the denial is logged");
        if (i > 0) await new Promise((r) => setTimeout(r, 500));
        decisions = (await imprimaturLogLines())
          .filter((l) => l.startsWith("{"))
          .map((l) => JSON.parse(l) as { msg?: string; name?: string; caller?: unknown })
          .filter((d) => d.msg === "denied" && d.name === "install-denied");
      }
      for (const d of decisions)
        assert.deepEqual(d.caller, { authenticated: true, authentication: "client-certificate", name: caller.name, cluster: caller.cluster });
      const allowed = await cluster.kubectl(["create", "-f", "-"], { input: pod("install-allowed", APP_NS, allowedImage) });
      assert.equal(allowed.code, 0, allowed.stderr);
      await waitForPod(cluster, APP_NS, "install-allowed", podRunning, 60_000, () => cluster.componentLogs("kubelet", 20));
    });

    test("install again with a new build upgrades: the webhooks stay enforcing and no admission fails during the rollout", async (t) => {
      const before = (await kubectl("get", "deployment", "imprimatur", "-n", "imprimatur", "-o", "jsonpath={.spec.template.spec.containers[0].image}")).trim();
      const stream = streamAdmissions("upgrade");
      let result;
      let streamed;
      try {
        // Another revision label: another image digest, as a new checkout would build.
        result = await imprimatur(installArgs(), { IMPRIMATUR_COMMIT: "install-test-upgrade" });
      } finally {
        streamed = await stream.stop();
      }
      assert.equal(result.code, 0, `${result.stdout}${result.stderr}`);
      assert.match(result.stdout, /apply .*the webhooks stay enforcing/);
      const after = (await kubectl("get", "deployment", "imprimatur", "-n", "imprimatur", "-o", "jsonpath={.spec.template.spec.containers[0].image}")).trim();
      assert.notEqual(after, before, "a new image rolled out");
      t.diagnostic(`${streamed.admitted} admitted, ${streamed.refused} refused as the policy says, during the upgrade`);
      assert.deepEqual(streamed.failures, []);
      assert.ok(streamed.admitted > 0 && streamed.refused > 0);
      assert.deepEqual(await webhookFailurePolicies(), ["Fail", "Fail"]);
    });

    test("uninstall --purge also removes the CRDs, and with them the policies", async () => {
      const result = await imprimatur(["uninstall", "--purge", "--kustomize", overlay]);
      assert.equal(result.code, 0, `${result.stdout}${result.stderr}`);
      assert.deepEqual(steps(result.stdout), ["webhooks", "workload", "crds", "removed"], result.stdout);
      assert.equal(await exists("crd", "imagepolicies.imprimatur.dev"), false);
      assert.equal(await exists("namespace", "imprimatur"), false);
      const admitted = await cluster.kubectl(["create", "--dry-run=server", "-f", "-"], { input: pod("after-purge", APP_NS, blockedImage) });
      assert.equal(admitted.code, 0, admitted.stderr);
    });
  });

  test("stop() ends every process, removes the namespace and restores the machine", async (t) => {
    const pids = [...Object.values(cluster.componentPids), ...cluster.node.pidsSeen()];
    const netns = cluster.netns;
    const nodeDir = cluster.node.dir;
    const dir = cluster.dir;
    const stopping = Date.now();
    await cluster.stop();
    t.diagnostic(`cluster stopped in ${Date.now() - stopping} ms`);
    for (const pid of pids) assert.ok(!isAlive(pid), `process ${pid} is gone`);
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
