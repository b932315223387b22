// Pod Security Admission as a drop-in, on a real etcd + kube-apiserver v1.20 (which has no Pod Security Admission
// of its own: PSA came in 1.22): `imprimatur serve --pod-security --pod-security-config FILE` as the validating
// webhook, namespaces labelled pod-security.kubernetes.io/enforce|warn|audit (with pinned versions), and what
// kubectl prints and the apiserver's audit log records, in PSA's words.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { stringify } from "yaml";
import { startKubeCluster, untilWebhookActive, type KubeCluster, validatingWebhookConfiguration, webhookRule } from "../support/kube-cluster.ts";
import { startImprimatur, type ImprimaturProcess } from "../support/imprimatur-process.ts";
import { teardown } from "../support/teardown.ts";
import { podAuditLog, type PodAuditLog } from "../support/pod-audit-log.ts";

let dir: string;
let cluster: KubeCluster;
let server: ImprimaturProcess;
let auditLog: PodAuditLog;

const NAMESPACES: Record<string, Record<string, string>> = {
  "psa-enforce": { "pod-security.kubernetes.io/enforce": "baseline", "pod-security.kubernetes.io/warn": "restricted" },
  "psa-warn": { "pod-security.kubernetes.io/warn": "baseline" },
  "psa-audit": { "pod-security.kubernetes.io/audit": "baseline" },
  "psa-pinned": { "pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "v1.21" },
  "psa-latest": { "pod-security.kubernetes.io/enforce": "restricted" },
  "psa-exempt": { "pod-security.kubernetes.io/enforce": "restricted" },
};

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "imprimatur-e2e-psa-"));
  auditLog = await podAuditLog(dir);
  cluster = await startKubeCluster({
    enableAdmissionPlugins: ["ValidatingAdmissionWebhook"],
    extraArgs: auditLog.apiserverArgs,
  });
  // PSA's own configuration format: the exemptions as kube-apiserver's AdmissionConfiguration would give them.
  await writeFile(
    join(dir, "pod-security.yaml"),
    stringify({
      apiVersion: "pod-security.admission.config.k8s.io/v1beta1",
      kind: "PodSecurityConfiguration",
      defaults: { enforce: "privileged", audit: "privileged", warn: "privileged" },
      exemptions: { usernames: [], runtimeClasses: [], namespaces: ["psa-exempt"] },
    }),
  );
  await writeFile(
    join(dir, "policies.yaml"),
    "apiVersion: imprimatur.dev/v1alpha1\nkind: ImagePolicy\nmetadata: {name: any}\nspec: {rules: [{action: allow, images: ['*']}]}\n",
  );
  server = await startImprimatur([
    "--policies",
    join(dir, "policies.yaml"),
    "--kubeconfig",
    cluster.kubeconfig,
    "--pod-security-config",
    join(dir, "pod-security.yaml"),
  ]);
  const vwc = validatingWebhookConfiguration(server, {
    name: "imprimatur",
    webhookName: "images.imprimatur.dev",
    sideEffects: "NoneOnDryRun",
    rules: [webhookRule("pods", ["CREATE", "UPDATE"]), webhookRule("apps/deployments", ["CREATE", "UPDATE"]), webhookRule("namespaces", ["CREATE", "UPDATE"])],
    namespaceSelector: { matchExpressions: [{ key: "psa-test", operator: "Exists" }] },
  });
  assert.equal((await cluster.apply(vwc)).code, 0);
  for (const [name, labels] of Object.entries(NAMESPACES)) {
    const applied = await cluster.apply(JSON.stringify({ apiVersion: "v1", kind: "Namespace", metadata: { name, labels: { ...labels, "psa-test": "" } } }));
    assert.equal(applied.code, 0, applied.stderr);
  }
  await untilWebhookActive(cluster, pod("probe", "psa-enforce", { privileged: true }), (probe) => probe.code !== 0);
});

after(() => teardown([() => cluster?.stop(), () => server?.stop(), () => dir && rm(dir, { recursive: true, force: true })]));

function pod(name: string, namespace: string, securityContext: Record<string, unknown>, podSecurityContext: Record<string, unknown> = {}): string {
  return JSON.stringify({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace },
    spec: { securityContext: podSecurityContext, containers: [{ name: "app", image: "registry.example.com/app:1", securityContext }] },
  });
}

const create = (manifest: string) => cluster.kubectl(["create", "-f", "-"], { input: manifest });

async function auditAnnotations(name: string, namespace: string): Promise<Record<string, string>> {
  const [event] = await auditLog.podCreations(name, namespace);
  return event?.annotations ?? {};
}

test("enforce: a privileged pod is refused with PSA's message", async () => {
  const res = await create(pod("priv", "psa-enforce", { privileged: true }));
  assert.notEqual(res.code, 0);
  assert.match(
    res.stderr,
    /admission webhook "images\.imprimatur\.dev" denied the request: violates PodSecurity "baseline:latest": privileged \(container "app" must not set securityContext\.privileged=true\)/,
  );
  // A pod the enforced level allows is created, with the warn level's warning.
  const ok = await create(pod("baseline-ok", "psa-enforce", {}));
  assert.equal(ok.code, 0, ok.stderr);
  assert.match(ok.stderr, /Warning: would violate PodSecurity "restricted:latest": allowPrivilegeEscalation != false/);
});

test("a Deployment is warned about at the warn level, not denied", async () => {
  const deployment = {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name: "web", namespace: "psa-enforce" },
    spec: {
      selector: { matchLabels: { app: "web" } },
      template: {
        metadata: { labels: { app: "web" } },
        spec: { containers: [{ name: "app", image: "registry.example.com/app:1", securityContext: { privileged: true } }] },
      },
    },
  };
  const res = await create(JSON.stringify(deployment));
  assert.equal(res.code, 0, res.stderr);
  assert.match(
    res.stderr,
    /Warning: would violate PodSecurity "restricted:latest": privileged \(container "app" must not set securityContext\.privileged=true\)/,
  );
});

test("warn admits with a warning; audit admits and records the violations in the audit log", async () => {
  const warned = await create(pod("w", "psa-warn", { privileged: true }));
  assert.equal(warned.code, 0, warned.stderr);
  assert.match(warned.stderr, /Warning: would violate PodSecurity "baseline:latest": privileged/);
  const audited = await create(pod("a", "psa-audit", { privileged: true }));
  assert.equal(audited.code, 0, audited.stderr);
  assert.doesNotMatch(audited.stderr, /Warning/);
  const annotations = await auditAnnotations("a", "psa-audit");
  assert.equal(
    annotations["images.imprimatur.dev/pod-security-audit-violations"],
    'would violate PodSecurity "baseline:latest": privileged (container "app" must not set securityContext.privileged=true)',
  );
});

test("a pinned version judges as that version: restricted@v1.21 has no capabilities check, latest has", async () => {
  // Restricted in everything but the capabilities, which restricted checks from v1.22 on.
  const almost = (name: string, namespace: string) =>
    pod(name, namespace, { allowPrivilegeEscalation: false, runAsNonRoot: true }, { seccompProfile: { type: "RuntimeDefault" } });
  const pinned = await create(almost("old-rules", "psa-pinned"));
  assert.equal(pinned.code, 0, pinned.stderr);
  const latest = await create(almost("new-rules", "psa-latest"));
  assert.notEqual(latest.code, 0);
  assert.match(
    latest.stderr,
    /violates PodSecurity "restricted:latest": unrestricted capabilities \(container "app" must set securityContext\.capabilities\.drop=\["ALL"\]\)/,
  );
});

test("an exempt namespace is not judged, and the exemption is in the audit log", async () => {
  const res = await create(pod("free", "psa-exempt", { privileged: true }));
  assert.equal(res.code, 0, res.stderr);
  assert.equal((await auditAnnotations("free", "psa-exempt"))["images.imprimatur.dev/pod-security-exempt"], "namespace");
});

test("tightening a namespace's enforce label names the existing pods that would violate it; an invalid label is refused", async () => {
  // psa-warn holds the privileged pod "w" (created above, when the namespace only warned).
  const tightened = await cluster.kubectl(["label", "namespace", "psa-warn", "pod-security.kubernetes.io/enforce=baseline"]);
  assert.equal(tightened.code, 0, tightened.stderr);
  assert.match(tightened.stderr, /Warning: existing pods in namespace "psa-warn" violate the new PodSecurity enforce level "baseline:latest"/);
  assert.match(tightened.stderr, /Warning: w: privileged/);
  const invalid = await cluster.kubectl(["label", "namespace", "psa-audit", "pod-security.kubernetes.io/enforce=strict"]);
  assert.notEqual(invalid.code, 0);
  assert.match(invalid.stderr, /Namespace "psa-audit" is invalid: metadata\.labels\[pod-security\.kubernetes\.io\/enforce\]: Invalid value: "strict"/);
});
