// The install under deploy/ against a real etcd + kube-apiserver v1.20, with the kubectl of the same version (its
// embedded kustomize is v2.0): every kustomization builds, the objects pass the apiserver's validation, and the
// installed webhook configurations behave as docs/install.md says while no replica answers (the harness has no
// kubelet, so the Deployment never runs a pod): kube-system and imprimatur are excluded, every other namespace
// fails closed. Re-applying (an upgrade) keeps the caBundle the replicas wrote; deleting uninstalls.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { parseAllDocuments, stringify } from "yaml";
import { startKubeCluster, type KubeCluster } from "../support/kube-cluster.ts";
import { podYaml } from "../support/manifests.ts";
import { teardown } from "../support/teardown.ts";

const DEPLOY = fileURLToPath(new URL("../../deploy/", import.meta.url));
/** What a user applies on v1.20 (the base's PodDisruptionBudget is policy/v1, which v1.20 does not serve). */
const OVERLAY = `${DEPLOY}overlays/kube-1.20`;
let cluster: KubeCluster;

type Doc = Record<string, any>;

async function build(dir: string): Promise<Doc[]> {
  const res = await cluster.kubectl(["kustomize", dir]);
  assert.equal(res.code, 0, `kubectl kustomize ${dir}: ${res.stderr}`);
  return parseAllDocuments(res.stdout).map((d) => d.toJS() as Doc);
}
const kinds = (docs: Doc[]) => docs.map((d) => `${d.kind}/${d.metadata.name}`).sort();

before(async () => {
  cluster = await startKubeCluster();
});

after(() => teardown([() => cluster?.stop()]));

test("every kustomization under deploy/ builds with kubectl v1.20's kustomize", async () => {
  const base = await build(`${DEPLOY}base`);
  assert.deepEqual(kinds(base), [
    "ClusterRole/imprimatur",
    "ClusterRole/imprimatur-break-glass",
    "ClusterRole/imprimatur-namespaced-policies-edit",
    "ClusterRole/imprimatur-namespaced-policies-view",
    "ClusterRole/imprimatur-self-managed-tls",
    "ClusterRoleBinding/imprimatur",
    "ClusterRoleBinding/imprimatur-break-glass-controllers",
    "ClusterRoleBinding/imprimatur-self-managed-tls",
    "CustomResourceDefinition/clusterpolicyreports.wgpolicyk8s.io",
    "CustomResourceDefinition/clusterreports.openreports.io",
    "CustomResourceDefinition/imagepolicies.imprimatur.dev",
    "CustomResourceDefinition/namespacedimagepolicies.imprimatur.dev",
    "CustomResourceDefinition/namespacedpodrestrictions.imprimatur.dev",
    "CustomResourceDefinition/podrestrictions.imprimatur.dev",
    "CustomResourceDefinition/policyexceptions.imprimatur.dev",
    "CustomResourceDefinition/policyreports.wgpolicyk8s.io",
    "CustomResourceDefinition/reports.openreports.io",
    "CustomResourceDefinition/trustroots.imprimatur.dev",
    "Deployment/imprimatur",
    "MutatingWebhookConfiguration/imprimatur",
    "Namespace/imprimatur",
    "PodDisruptionBudget/imprimatur",
    "Role/imprimatur-scan",
    "Role/imprimatur-self-managed-tls",
    "RoleBinding/imprimatur-scan",
    "RoleBinding/imprimatur-self-managed-tls",
    "Service/imprimatur",
    "ServiceAccount/imprimatur",
    "ValidatingWebhookConfiguration/imprimatur",
  ]);
  const old = await build(OVERLAY);
  assert.deepEqual(kinds(old), kinds(base));
  assert.equal(old.find((d) => d.kind === "PodDisruptionBudget")!.apiVersion, "policy/v1beta1");

  const certManager = await build(`${DEPLOY}overlays/cert-manager`);
  assert.deepEqual(
    kinds(certManager),
    [
      ...kinds(base).filter((k) => !k.endsWith("/imprimatur-self-managed-tls")),
      "Certificate/imprimatur-ca",
      "Certificate/imprimatur-serving",
      "Issuer/imprimatur-ca",
      "Issuer/imprimatur-selfsigned",
    ].sort(),
  );
  const ipw = await build(`${DEPLOY}overlays/imagepolicywebhook`);
  assert.deepEqual(kinds(ipw), [...kinds(base), "Service/imprimatur-imagereview"].sort());
  for (const part of ["core", "self-managed-tls", "disruption-budget"]) await build(`${DEPLOY}base/${part}`);

  // For clusters where another tool installed the report CRDs: the base, object for object, without those four.
  const byName = (docs: Doc[]) => new Map(docs.map((d) => [`${d.kind}/${d.metadata.name}`, d]));
  const withoutReports = byName(await build(`${DEPLOY}overlays/without-report-crds`));
  const reportCrds = ["policyreports.wgpolicyk8s.io", "clusterpolicyreports.wgpolicyk8s.io", "reports.openreports.io", "clusterreports.openreports.io"];
  const expected = byName(base.filter((d) => !(d.kind === "CustomResourceDefinition" && reportCrds.includes(d.metadata.name))));
  assert.equal(expected.size, base.length - 4);
  assert.deepEqual(withoutReports, expected);
});

test("the server accepts every object of the base (dry run), the v1.20 overlay applies, and applying again changes nothing", async () => {
  // A dry run does not create the namespace or the CRDs the rest need: those go first, for real.
  const base = await build(`${DEPLOY}base`);
  const first = base.filter((d) => d.kind === "Namespace" || d.kind === "CustomResourceDefinition");
  assert.equal((await cluster.apply(first.map((d) => stringify(d)).join("---\n"))).code, 0);
  // policy/v1 PodDisruptionBudgets exist from v1.21; overlays/kube-1.20 swaps it, applied below.
  const rest = base.filter((d) => !first.includes(d) && d.kind !== "PodDisruptionBudget");
  const dryRun = await cluster.kubectl(["apply", "--dry-run=server", "-f", "-"], { input: rest.map((d) => stringify(d)).join("---\n") });
  assert.equal(dryRun.code, 0, dryRun.stderr);
  assert.equal(dryRun.stdout.trim().split("\n").length, rest.length, dryRun.stdout);

  const dryRunOverlay = await cluster.kubectl(["apply", "--dry-run=server", "-k", OVERLAY]);
  assert.equal(dryRunOverlay.code, 0, dryRunOverlay.stderr);
  const applied = await cluster.kubectl(["apply", "-k", OVERLAY]);
  assert.equal(applied.code, 0, applied.stderr);
  const again = await cluster.kubectl(["apply", "-k", OVERLAY]);
  assert.equal(again.code, 0, again.stderr);
  assert.doesNotMatch(again.stdout, /created|configured/, "a second apply finds everything as it is");
  const deployment = JSON.parse((await cluster.kubectl(["get", "deployment", "imprimatur", "-n", "imprimatur", "-o", "json"])).stdout);
  assert.equal(deployment.spec.template.spec.containers[0].securityContext.readOnlyRootFilesystem, true);
});

test("with no replica answering, kube-system and imprimatur pods are admitted and every other namespace fails closed", async () => {
  // v1.20 does not label namespaces with their name; docs/install.md tells v1.20 users to, as here.
  assert.equal((await cluster.kubectl(["label", "namespace", "kube-system", "kubernetes.io/metadata.name=kube-system", "--overwrite"])).code, 0);
  for (const namespace of ["kube-system", "imprimatur"]) {
    const res = await cluster.apply(podYaml(`admitted-${namespace}`, namespace, ["registry.example.com/app:1.0"]));
    assert.equal(res.code, 0, `${namespace}: ${res.stderr}`);
  }
  const refused = await cluster.apply(podYaml("refused", "default", ["registry.example.com/app:1.0"]));
  assert.notEqual(refused.code, 0);
  assert.match(refused.stderr, /failed calling webhook "(pins|images)\.imprimatur\.dev"/);
  assert.match(refused.stderr, /service "imprimatur"|no endpoints|imprimatur\.imprimatur\.svc/);
  const deployment = await cluster.apply(
    JSON.stringify({
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: "web", namespace: "default" },
      spec: {
        selector: { matchLabels: { app: "web" } },
        template: { metadata: { labels: { app: "web" } }, spec: { containers: [{ name: "web", image: "registry.example.com/web:1.0" }] } },
      },
    }),
  );
  assert.notEqual(deployment.code, 0, "workload templates are covered too");
});

test("an upgrade (apply again) keeps the caBundle the replicas wrote; kubectl delete -k uninstalls", async () => {
  const caBundle = Buffer.from("-----BEGIN CERTIFICATE-----\nnot checked here\n-----END CERTIFICATE-----\n").toString("base64");
  for (const kind of ["validatingwebhookconfiguration", "mutatingwebhookconfiguration"]) {
    // What self-managed TLS does: replace the object with the caBundle filled in.
    const patched = await cluster.kubectl([
      "patch",
      kind,
      "imprimatur",
      "--type=json",
      "-p",
      JSON.stringify([{ op: "add", path: "/webhooks/0/clientConfig/caBundle", value: caBundle }]),
    ]);
    assert.equal(patched.code, 0, patched.stderr);
  }
  const upgraded = await cluster.kubectl(["apply", "-k", OVERLAY]);
  assert.equal(upgraded.code, 0, upgraded.stderr);
  for (const kind of ["validatingwebhookconfiguration", "mutatingwebhookconfiguration"]) {
    const got = await cluster.kubectl(["get", kind, "imprimatur", "-o", "jsonpath={.webhooks[0].clientConfig.caBundle}"]);
    assert.equal(got.stdout, caBundle, `${kind} keeps its caBundle`);
  }

  // No namespace controller here to finish the namespace's deletion: do not wait for it.
  const removed = await cluster.kubectl(["delete", "-k", OVERLAY, "--wait=false"]);
  assert.equal(removed.code, 0, removed.stderr);
  for (const kind of ["validatingwebhookconfiguration", "mutatingwebhookconfiguration", "clusterrole", "clusterrolebinding", "crd"]) {
    const left = await cluster.kubectl(["get", kind, "-o", "name"]);
    assert.doesNotMatch(left.stdout, /imprimatur/, `${kind}: ${left.stdout}`);
  }
  const admitted = await cluster.apply(podYaml("after-uninstall", "default", ["registry.example.com/app:1.0"]));
  assert.equal(admitted.code, 0, admitted.stderr);
});
