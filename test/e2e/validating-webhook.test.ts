// ValidatingWebhookConfiguration → `imprimatur serve` (/validate) on a real etcd + kube-apiserver v1.20,
// with a third-party ImageReview backend reached through a kubeconfig, fail-closed and fail-open servers,
// break-glass and the decision cache. Audit annotations are read back from the apiserver's own audit log.
import { test, before, after } from "node:test";
import { stringify } from "yaml";
import assert from "node:assert/strict";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { startKubeCluster, untilWebhookActive, urlWebhook, webhookConfiguration, type KubeCluster } from "../support/kube-cluster.ts";
import { startImprimatur, type ImprimaturProcess } from "../support/imprimatur-process.ts";
import { startConfiguredTestBackend, type TestBackend } from "../support/test-imagereview-backend.ts";
import { podYaml } from "../support/manifests.ts";
import { teardown } from "../support/teardown.ts";
import { podAuditLog, type PodAuditLog } from "../support/pod-audit-log.ts";

const POLICIES = fileURLToPath(new URL("../fixtures/e2e-policies/", import.meta.url));
const TOKEN = "s3cret-backend-token";
let dir: string;
let backend: TestBackend;
let closed: ImprimaturProcess;
let open: ImprimaturProcess;
let cluster: KubeCluster;
let auditLog: PodAuditLog;

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "imprimatur-e2e-webhook-"));
  // The third-party backend: its own CA and serving certificate; imprimatur reaches it through a kubeconfig.
  // Who may break glass is asked of the cluster each second at most (the default keeps answers 10 s).
  const configured = await startConfiguredTestBackend(dir, { token: TOKEN, timeout: "2s", config: { breakGlass: { cacheTTL: "1s" } } });
  backend = configured.backend;
  const config = configured.configPath;

  auditLog = await podAuditLog(dir, "apiserver-audit.log");
  cluster = await startKubeCluster({
    enableAdmissionPlugins: ["ValidatingAdmissionWebhook", "MutatingAdmissionWebhook"],
    extraArgs: [...auditLog.apiserverArgs, "--feature-gates=EphemeralContainers=true"],
  });
  // The servers read the cluster (namespace labels, and SubjectAccessReviews for break-glass) as its admin.
  closed = await startImprimatur(["--policies", POLICIES, "--config", config, "--kubeconfig", cluster.kubeconfig]);
  open = await startImprimatur(["--policies", POLICIES, "--config", config, "--fail-open", "--kubeconfig", cluster.kubeconfig]);
  const webhook = (name: string, server: ImprimaturProcess, mode: string) =>
    urlWebhook(name, `${server.baseUrl}/validate`, {
      caPem: server.ca,
      sideEffects: "NoneOnDryRun",
      rules: [{ apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE", "UPDATE"], resources: ["pods", "pods/ephemeralcontainers"], scope: "Namespaced" }],
      namespaceSelector: { matchLabels: { "imprimatur-mode": mode } },
    });
  const vwc = webhookConfiguration("ValidatingWebhookConfiguration", "imprimatur", [
    webhook("closed.imprimatur.dev", closed, "closed"),
    webhook("open.imprimatur.dev", open, "open"),
  ]);
  const applied = await cluster.apply(vwc);
  assert.equal(applied.code, 0, applied.stderr);
  for (const [ns, mode] of [
    ["e2e-closed", "closed"],
    ["e2e-open", "open"],
    ["e2e-locked", "closed"],
    ["e2e-actions", "closed"],
  ]) {
    assert.equal(
      (await cluster.apply(JSON.stringify({ apiVersion: "v1", kind: "Namespace", metadata: { name: ns, labels: { "imprimatur-mode": mode } } }))).code,
      0,
    );
  }
  // Webhook configurations take effect asynchronously; wait until a denied pod is really denied.
  await untilWebhookActive(cluster, podYaml("probe", "e2e-closed", ["nginx:latest"]), (probe) => probe.code !== 0);
});

after(() =>
  teardown([() => cluster?.stop(), () => closed?.stop(), () => open?.stop(), () => backend?.stop(), () => dir && rm(dir, { recursive: true, force: true })]),
);

const auditEvents = (podName: string, namespace = "e2e-closed") => auditLog.podCreations(podName, namespace);

test("an allowed image creates the pod", async () => {
  const res = await cluster.apply(podYaml("good", "e2e-closed", ["registry.example.com/app:1.0"]));
  assert.equal(res.code, 0, res.stderr);
  const [event] = await auditEvents("good");
  assert.equal(event?.annotations?.["closed.imprimatur.dev/decision"], "allowed");
  assert.equal(event?.annotations?.["closed.imprimatur.dev/backend.scanner.scanned"], "clean");
});

test("a denied image is rejected with our message", async () => {
  const res = await cluster.apply(podYaml("bad", "e2e-closed", ["docker.io/library/nginx:1.25"]));
  assert.notEqual(res.code, 0);
  assert.match(
    res.stderr,
    /admission webhook "closed\.imprimatur\.dev" denied the request: image "docker\.io\/library\/nginx:1\.25" \(spec\.containers\[0\]\.image\) denied by policy trusted-registries default: only images from registry\.example\.com may run/,
  );
});

test("validationActions: Warn admits and kubectl prints the warning; Audit admits with the audit annotation; Deny+Audit refuses and annotates", async () => {
  const warned = await cluster.apply(podYaml("warned", "e2e-actions", ["registry.example.com/legacy/app:1.0"]));
  assert.equal(warned.code, 0, warned.stderr);
  assert.ok(
    warned.stderr.includes(
      'Warning: image "registry.example.com/legacy/app:1.0" (spec.containers[0].image) violates policy registry-migration rules[0]: legacy images move to registry.example.com/apps',
    ),
    warned.stderr,
  );
  const [warnedEvent] = await auditEvents("warned", "e2e-actions");
  assert.equal(warnedEvent?.annotations?.["closed.imprimatur.dev/decision"], "allowed");
  assert.equal(warnedEvent?.annotations?.["closed.imprimatur.dev/validation-failures"], undefined);

  const audited = await cluster.apply(podYaml("audited", "e2e-actions", ["registry.example.com/old/app:1.0"]));
  assert.equal(audited.code, 0, audited.stderr);
  assert.doesNotMatch(audited.stderr, /Warning/);
  const [auditedEvent] = await auditEvents("audited", "e2e-actions");
  assert.deepEqual(JSON.parse(auditedEvent?.annotations?.["closed.imprimatur.dev/validation-failures"] ?? "null"), [
    {
      message: "old images are being retired",
      policy: "registry-migration",
      rule: "rules[1]",
      image: "registry.example.com/old/app:1.0",
      field: "spec.containers[0].image",
      validationActions: ["Audit"],
    },
  ]);
  assert.equal((await cluster.kubectl(["get", "pod", "audited", "-n", "e2e-actions"])).code, 0, "the audited pod exists");

  const refused = await cluster.apply(podYaml("refused", "e2e-actions", ["registry.example.com/retired/app:1.0"]));
  assert.notEqual(refused.code, 0);
  assert.match(refused.stderr, /denied by policy registry-migration rules\[2\]: retired images may not run/);
  const [refusedEvent] = await auditEvents("refused", "e2e-actions");
  assert.equal(refusedEvent?.annotations?.["closed.imprimatur.dev/decision"], "denied");
  assert.equal(JSON.parse(refusedEvent?.annotations?.["closed.imprimatur.dev/validation-failures"] ?? "[]")[0]?.rule, "rules[2]");
});

test("the third-party backend's denial denies the pod, with its reason", async () => {
  const res = await cluster.apply(podYaml("cve", "e2e-closed", ["registry.example.com/blocked:2.0"]));
  assert.notEqual(res.code, 0);
  assert.match(res.stderr, /policy backend\/scanner imageReview: scanner found critical CVEs in registry\.example\.com\/blocked:2\.0/);
  const review = backend.reviews.find((r) => r.spec.containers.some((c) => c.image === "registry.example.com/blocked:2.0"));
  assert.equal(review?.spec.namespace, "e2e-closed");
});

test("cache: a second identical review does not reach the backend within the TTL", async () => {
  const image = "registry.example.com/cached:3.1";
  const seen = () => backend.reviews.filter((r) => r.spec.containers.some((c) => c.image === image)).length;
  assert.equal((await cluster.apply(podYaml("cache-1", "e2e-closed", [image]))).code, 0);
  assert.equal(seen(), 1);
  assert.equal((await cluster.apply(podYaml("cache-2", "e2e-closed", [image]))).code, 0);
  assert.equal(seen(), 1, "answered from the cache");
  assert.equal((await cluster.apply(podYaml("cache-3", "e2e-open", [image]))).code, 0);
  assert.equal(seen(), 2, "another namespace is another review spec (and here another server)");
});

test("break-glass admits with the right annotations only where allowed, and is audited", async () => {
  const annotations = { "break-glass.image-policy.k8s.io/reason": "outage", "break-glass.image-policy.k8s.io/ticket": "INC-2002" };
  const ok = await cluster.apply(podYaml("glass", "e2e-closed", ["docker.io/library/nginx:1.25"], annotations));
  assert.equal(ok.code, 0, ok.stderr);
  assert.match(ok.stderr, /Warning: break-glass override \(ticket INC-2002\)/);
  const records = (await readFile(join(closed.stateDir, "audit.jsonl"), "utf8"))
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l));
  const record = records.find((r) => r.ticket === "INC-2002");
  assert.equal(record?.event, "break-glass");
  assert.equal(record?.name, "glass");
  assert.equal(record?.user, "admin");
  const [event] = await auditEvents("glass");
  assert.equal(event?.annotations?.["closed.imprimatur.dev/break-glass"], "used");
  assert.equal(event?.annotations?.["closed.imprimatur.dev/break-glass-ticket"], "INC-2002");

  const refused = await cluster.apply(podYaml("glass", "e2e-locked", ["docker.io/library/nginx:1.25"], annotations));
  assert.notEqual(refused.code, 0);
  assert.match(refused.stderr, /does not allow overrides in namespace "e2e-locked"/);
});

test("break-glass is honoured only for a user RBAC lets use the verb break-glass on the denying policy, by name; refused attempts are audited", async () => {
  const annotations = { "break-glass.image-policy.k8s.io/reason": "outage", "break-glass.image-policy.k8s.io/ticket": "INC-3003" };
  const rbac = async (docs: object[]) => {
    const applied = await cluster.apply(docs.map((d) => stringify(d)).join("---\n"));
    assert.equal(applied.code, 0, applied.stderr);
    return applied;
  };
  const rbacGroup = "rbac.authorization.k8s.io";
  // alice may create pods in e2e-closed, and break glass on another policy only.
  assert.equal(
    (
      await rbac([
        {
          apiVersion: `${rbacGroup}/v1`,
          kind: "Role",
          metadata: { name: "pods", namespace: "e2e-closed" },
          rules: [{ apiGroups: [""], resources: ["pods"], verbs: ["create", "get"] }],
        },
        {
          apiVersion: `${rbacGroup}/v1`,
          kind: "RoleBinding",
          metadata: { name: "alice-pods", namespace: "e2e-closed" },
          roleRef: { apiGroup: rbacGroup, kind: "Role", name: "pods" },
          subjects: [{ apiGroup: rbacGroup, kind: "User", name: "alice" }],
        },
        {
          apiVersion: `${rbacGroup}/v1`,
          kind: "ClusterRole",
          metadata: { name: "break-glass-other" },
          rules: [{ apiGroups: ["imprimatur.dev"], resources: ["imagepolicies"], verbs: ["break-glass"], resourceNames: ["locked-down"] }],
        },
        {
          apiVersion: `${rbacGroup}/v1`,
          kind: "ClusterRoleBinding",
          metadata: { name: "alice-break-glass-other" },
          roleRef: { apiGroup: rbacGroup, kind: "ClusterRole", name: "break-glass-other" },
          subjects: [{ apiGroup: rbacGroup, kind: "User", name: "alice" }],
        },
      ])
    ).code,
    0,
  );
  const asAlice = (name: string, groups: string[] = []) =>
    cluster.kubectl(["--as", "alice", ...groups.flatMap((g) => ["--as-group", g]), "apply", "-f", "-"], {
      input: podYaml(name, "e2e-closed", ["docker.io/library/nginx:1.25"], annotations),
    });
  const refused = await asAlice("glass-alice");
  assert.notEqual(refused.code, 0);
  assert.match(
    refused.stderr,
    /policy trusted-registries breakGlass: break-glass was requested by "alice", who may not use it on this policy: no RBAC rule grants the verb break-glass on imagepolicies\.imprimatur\.dev "trusted-registries"/,
  );
  const records = async () =>
    (await readFile(join(closed.stateDir, "audit.jsonl"), "utf8"))
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
  const attempt = (await records()).find((r) => r.ticket === "INC-3003" && r.event === "break-glass-refused");
  assert.ok(attempt, "the refused attempt is in the audit log");
  assert.deepEqual([attempt.user, attempt.name, attempt.reason], ["alice", "glass-alice", "outage"]);
  assert.match(attempt.refusals[0].message, /who may not use it on this policy/);

  // The on-call group may break glass on trusted-registries, by name: alice, in that group, may now.
  assert.equal(
    (
      await rbac([
        {
          apiVersion: `${rbacGroup}/v1`,
          kind: "ClusterRole",
          metadata: { name: "break-glass-trusted" },
          rules: [{ apiGroups: ["imprimatur.dev"], resources: ["imagepolicies"], verbs: ["break-glass"], resourceNames: ["trusted-registries"] }],
        },
        {
          apiVersion: `${rbacGroup}/v1`,
          kind: "ClusterRoleBinding",
          metadata: { name: "oncall-break-glass-trusted" },
          roleRef: { apiGroup: rbacGroup, kind: "ClusterRole", name: "break-glass-trusted" },
          subjects: [{ apiGroup: rbacGroup, kind: "Group", name: "oncall" }],
        },
      ])
    ).code,
    0,
  );
  assert.notEqual((await asAlice("glass-alice-2")).code, 0, "not in the group: still refused");
  // RBAC takes effect at once in the apiserver; the server's answer for alice-in-oncall was never asked, so no cache stands in the way.
  const granted = await asAlice("glass-alice-3", ["oncall"]);
  assert.equal(granted.code, 0, granted.stderr);
  assert.match(granted.stderr, /Warning: break-glass override \(ticket INC-3003\)/);
  const used = (await records()).find((r) => r.ticket === "INC-3003" && r.event === "break-glass");
  assert.deepEqual([used?.user, used?.name], ["alice", "glass-alice-3"]);
});

test("backend stopped: fail-closed denies, fail-open admits with the audit annotation", async () => {
  await backend.stop();
  try {
    const image = "registry.example.com/fresh:9.9"; // never reviewed, so nothing cached
    const denied = await cluster.apply(podYaml("down", "e2e-closed", [image]));
    assert.notEqual(denied.code, 0);
    assert.match(
      denied.stderr,
      /policy backend\/scanner failurePolicy: image policy backend could not be reached \(ECONNREFUSED\); denying because the server fails closed/,
    );

    const admitted = await cluster.apply(podYaml("down", "e2e-open", [image]));
    assert.equal(admitted.code, 0, admitted.stderr);
    assert.match(admitted.stderr, /Warning: image policy backend scanner was unavailable/);
    const [event] = await auditEvents("down", "e2e-open");
    assert.equal(event?.annotations?.["open.imprimatur.dev/fail-open"], "true");
    const records = (await readFile(join(open.stateDir, "audit.jsonl"), "utf8"))
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    assert.ok(records.some((r) => r.event === "fail-open" && r.name === "down"));
  } finally {
    await backend.start();
  }
});

test("ephemeral containers are reviewed through the subresource", async () => {
  assert.equal((await cluster.apply(podYaml("debugme", "e2e-closed", ["registry.example.com/app:1.0"]))).code, 0);
  // kubectl v1.20 has no `debug` without the feature gate; write the subresource directly.
  const body = JSON.stringify({
    apiVersion: "v1",
    kind: "EphemeralContainers",
    metadata: { name: "debugme", namespace: "e2e-closed" },
    ephemeralContainers: [{ name: "dbg", image: "docker.io/library/busybox:1.36", terminationMessagePolicy: "File", imagePullPolicy: "IfNotPresent" }],
  });
  const res = await cluster.kubectl(["replace", "--raw", "/api/v1/namespaces/e2e-closed/pods/debugme/ephemeralcontainers", "-f", "-"], { input: body });
  assert.notEqual(res.code, 0);
  assert.match(res.stderr, /image "docker\.io\/library\/busybox:1\.36" \(ephemeralContainers\[0\]\.image\) denied by policy trusted-registries default/);
  const allowed = await cluster.kubectl(["replace", "--raw", "/api/v1/namespaces/e2e-closed/pods/debugme/ephemeralcontainers", "-f", "-"], {
    input: body.replace("docker.io/library/busybox:1.36", "registry.example.com/debug:1.0"),
  });
  assert.equal(allowed.code, 0, allowed.stderr);
  const got = await cluster.kubectl(["get", "pod", "debugme", "-n", "e2e-closed", "-o", "jsonpath={.spec.ephemeralContainers[0].image}"]);
  assert.equal(got.stdout, "registry.example.com/debug:1.0");
});
