// What `imprimatur install` applies and in which form (src/install/install-plan.ts), on the shipped manifests read
// from deploy/ (the files kustomize renders from; the rendering itself is exercised by the install e2e tests).
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { InstallError } from "../../src/install/install-error.ts";
import { alreadyEnforcing, inNamespace, planInstall, webhooksOf, withFailurePolicy, type KubeObject } from "../../src/install/install-plan.ts";
import { readObjects } from "../../src/install/render.ts";

const DEPLOY = new URL("../../deploy/", import.meta.url).pathname;
const IMAGE = "registry.example.com/platform/imprimatur@sha256:" + "a".repeat(64);

function shipped(): KubeObject[] {
  const files = [
    ...readdirSync(join(DEPLOY, "crds"))
      .filter((f) => f.endsWith(".dev.yaml"))
      .map((f) => join(DEPLOY, "crds", f)),
    ...["namespace", "service-account", "rbac", "deployment", "service", "webhooks"].map((f) => join(DEPLOY, "base", "core", `${f}.yaml`)),
    join(DEPLOY, "base", "self-managed-tls", "rbac.yaml"),
  ];
  return files.flatMap((f) => readObjects(readFileSync(f, "utf8"), f));
}

test("the shipped manifests split into CRDs, the workload with the pushed image, and both webhook configurations", () => {
  const plan = planInstall(shipped(), IMAGE);
  assert.equal(plan.namespace, "imprimatur");
  assert.ok(plan.crds.length >= 5 && plan.crds.every((c) => c.kind === "CustomResourceDefinition"));
  assert.deepEqual(plan.webhookConfigurations.map((c) => c.kind).sort(), ["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"]);
  assert.ok(plan.workload.every((o) => o.kind !== "CustomResourceDefinition" && !o.kind.endsWith("WebhookConfiguration")));
  const deployment = plan.workload.find((o) => o.kind === "Deployment") as KubeObject & {
    spec: { template: { spec: { containers: Array<{ image: string }> } } };
  };
  assert.equal(deployment.spec.template.spec.containers[0]!.image, IMAGE);
  assert.deepEqual(plan.deployment, { namespace: "imprimatur", name: "imprimatur" });
  assert.deepEqual(plan.service, { namespace: "imprimatur", name: "imprimatur", port: 443 });
  assert.deepEqual(plan.webhookNames.sort(), ["images.imprimatur.dev", "pins.imprimatur.dev"]);
  const original = shipped().find((o) => o.kind === "Deployment") as typeof deployment;
  assert.equal(original.spec.template.spec.containers[0]!.image, "imprimatur", "the input is not changed");
});

test("manifests without Imprimatur's Deployment or without webhooks calling a Service are refused with code manifests", () => {
  const objects = shipped();
  const refused = (list: KubeObject[], pattern: RegExp) =>
    assert.throws(
      () => planInstall(list, IMAGE),
      (e: unknown) => e instanceof InstallError && e.code === "manifests" && pattern.test(e.message),
    );
  refused(
    objects.filter((o) => o.kind !== "Deployment"),
    /one Deployment with a container named imprimatur; they hold 0/,
  );
  refused(
    objects.filter((o) => !o.kind.endsWith("WebhookConfiguration")),
    /no webhook configuration calling a Service/,
  );
});

test("on a first install the webhooks go in at Ignore; an upgrade over webhooks already at their configured policy keeps them", () => {
  const plan = planInstall(shipped(), IMAGE);
  const ignoring = withFailurePolicy(plan.webhookConfigurations, "Ignore");
  assert.deepEqual(
    ignoring.flatMap((c) => webhooksOf(c).map((w) => w.failurePolicy)),
    ["Ignore", "Ignore"],
  );
  assert.deepEqual(
    plan.webhookConfigurations.flatMap((c) => webhooksOf(c).map((w) => w.failurePolicy)),
    ["Fail", "Fail"],
    "the plan's own stay as configured",
  );
  assert.equal(alreadyEnforcing(plan, []), false, "nothing installed yet");
  assert.equal(alreadyEnforcing(plan, ignoring), false, "a first install that stopped before enforce");
  assert.equal(alreadyEnforcing(plan, plan.webhookConfigurations), true);
  const onlyValidating = plan.webhookConfigurations.filter((c) => c.kind === "ValidatingWebhookConfiguration");
  assert.equal(alreadyEnforcing(plan, onlyValidating), false, "one configuration missing");
});

test("-n moves Imprimatur to another namespace everywhere it is named, and nothing else", () => {
  const moved = inNamespace(shipped(), "imprimatur", "security");
  const plan = planInstall(moved, IMAGE);
  assert.equal(plan.namespace, "security");
  assert.deepEqual(plan.service, { namespace: "security", name: "imprimatur", port: 443 });
  const namespace = moved.find((o) => o.kind === "Namespace")!;
  assert.equal(namespace.metadata.name, "security");
  assert.equal(namespace.metadata.labels?.["kubernetes.io/metadata.name"], "security");
  for (const o of moved) assert.notEqual(o.metadata.namespace, "imprimatur", `${o.kind}/${o.metadata.name}`);
  for (const binding of moved.filter((o) => o.kind.endsWith("RoleBinding"))) {
    for (const subject of binding.subjects as Array<{ kind: string; namespace?: string }>) {
      if (subject.kind === "ServiceAccount") assert.equal(subject.namespace, "security");
    }
  }
  for (const c of plan.webhookConfigurations) {
    for (const w of webhooksOf(c)) {
      assert.equal(w.clientConfig?.service?.namespace, "security");
      assert.deepEqual(w.namespaceSelector?.matchExpressions?.[0]?.values, ["kube-system", "security"]);
    }
  }
  const args = (plan.workload.find((o) => o.kind === "Deployment") as KubeObject & { spec: { template: { spec: { containers: Array<{ args: string[] }> } } } })
    .spec.template.spec.containers[0]!.args;
  assert.equal(args[args.indexOf("--tls-secret") + 1], "security/imprimatur-tls");
  assert.equal(args[args.indexOf("--tls-san") + 1], "imprimatur.security.svc");
  assert.deepEqual(
    args.filter((_, i) => args[i - 1] === "--scan-exclude-namespace"),
    ["kube-system", "security"],
  );
  assert.equal(args[args.indexOf("--webhook-configuration") + 1], "imprimatur", "a webhook configuration's name is not a namespace");
  // Cluster-scoped names stay.
  assert.deepEqual(
    moved.filter((o) => o.kind === "ClusterRole").map((o) => o.metadata.name),
    shipped()
      .filter((o) => o.kind === "ClusterRole")
      .map((o) => o.metadata.name),
  );
});
