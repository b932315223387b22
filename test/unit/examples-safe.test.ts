// Every policy shipped under policies/ (the examples, the embedded default, the profiles) is safe to apply as
// it is: loaded on its own next to the embedded default policy, it admits ordinary pods, in `default` and in
// `kube-system`, and denies what it is meant to deny in the scope its comment names. Each file needs a case
// below: a new file without one fails the test, so nobody ships an example that breaks a cluster unnoticed.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdir } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import { DEFAULT_SERVER_CONFIG } from "../../src/config/server-config.ts";
import { subjectOfImageReview, type AdmissionSubject } from "../../src/core/admission-subject.ts";
import { renderViolation, type Decision } from "../../src/core/decision.ts";
import type { NamespaceLabelSource } from "../../src/core/namespace-labels.ts";
import { emptyPolicySet, KIND_NAMES, type PolicySet } from "../../src/core/policy-set/policy-kinds.ts";
import type { AdmissionCall } from "../../src/engine/admission-call.ts";
import { Engine } from "../../src/engine/engine.ts";
import { buildEngine } from "../../src/engine/engine-builder.ts";
import { loadPolicies } from "../../src/policy/load-policies.ts";
import { bindProfileClusterWide, shippedProfiles } from "../../src/policy/profiles.ts";
import { planOfObject, validateSubject } from "../support/engine-review.ts";

const POLICIES = fileURLToPath(new URL("../../policies/", import.meta.url));
const FOLDERS = ["examples", "default", "profiles"] as const;
const DEFAULT_POLICY = "default/pinned-versions.yaml";

type KubeObject = Record<string, unknown>;

const pod = (name: string, namespace: string, spec: KubeObject, labels: Record<string, string> = {}): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, namespace, labels },
  spec,
});

const task = (name: string, namespace: string, images: string[]): KubeObject => ({
  apiVersion: "tekton.dev/v1",
  kind: "Task",
  metadata: { name, namespace },
  spec: { steps: images.map((image, i) => ({ name: `step-${i}`, image })) },
});

// What runs in a cluster before anyone thinks about policies: plain pods, and kube-system's own, which need
// the host (kube-proxy runs privileged on the host network).
const ORDINARY: KubeObject[] = [
  pod("app", "default", { containers: [{ name: "app", image: "registry.example.com/team/app:1.0" }] }),
  pod("web", "default", { containers: [{ name: "web", image: "nginx:1.25" }] }),
  pod(
    "kube-proxy",
    "kube-system",
    {
      hostNetwork: true,
      containers: [{ name: "kube-proxy", image: "registry.k8s.io/kube-proxy:v1.30.0", securityContext: { privileged: true } }],
      volumes: [{ name: "modules", hostPath: { path: "/lib/modules" } }],
    },
    { "k8s-app": "kube-proxy" },
  ),
  pod("coredns", "kube-system", { containers: [{ name: "coredns", image: "registry.k8s.io/coredns/coredns:v1.11.1" }] }, { "k8s-app": "kube-dns" }),
];

interface Denial {
  object: KubeObject;
  /** The policy whose violation must be among the denials. */
  policy: string;
}

interface ExampleCase {
  /** Labels of the namespaces the case's objects live in; default and kube-system carry only their name. */
  namespaces?: Record<string, Record<string, string>>;
  /** Shipped profiles bound to every namespace next to the file: an Accept policy alone denies nothing. */
  profiles?: string[];
  /** Objects in or out of the scope that the file must admit. */
  admitted?: KubeObject[];
  denied: Denial[];
}

const plainPod = (namespace: string): KubeObject => pod("plain", namespace, { containers: [{ name: "app", image: "registry.example.com/team/app:1.0" }] });
const privilegedPod = (namespace: string): KubeObject =>
  pod("privileged", namespace, { containers: [{ name: "app", image: "registry.example.com/team/app:1.0", securityContext: { privileged: true } }] });

const CASES: Record<string, ExampleCase> = {
  [DEFAULT_POLICY]: {
    denied: [{ object: pod("latest", "default", { containers: [{ name: "web", image: "nginx:latest" }] }), policy: "pinned-versions" }],
  },
  "examples/tekton-tasks.yaml": {
    admitted: [
      task("build", "ci", ["registry.example.com/golang:1.23"]),
      // A TaskRun's pod: Tekton's own init image next to the Task's.
      pod(
        "build-run-pod",
        "ci",
        {
          initContainers: [{ name: "prepare", image: `ghcr.io/tektoncd/pipeline/entrypoint-bff0a22da108bc2f16c818c97641a296:v1.0.0@sha256:${"1".repeat(64)}` }],
          containers: [{ name: "step-compile", image: "registry.example.com/golang:1.23" }],
        },
        { "tekton.dev/taskRun": "build-run" },
      ),
      // Not a Tekton pod: the policy is not for it, in the same namespace (the default policy still applies).
      pod("web", "ci", { containers: [{ name: "web", image: "nginx:1.25" }] }),
    ],
    denied: [
      { object: task("from-hub", "ci", ["golangci/golangci-lint:v1.61"]), policy: "tekton-tasks" },
      {
        object: pod(
          "lint-run-pod",
          "default",
          { containers: [{ name: "step-lint", image: "golangci/golangci-lint:v1.61" }] },
          { "tekton.dev/taskRun": "lint" },
        ),
        policy: "tekton-tasks",
      },
    ],
  },
  "examples/psp-restricted.yaml": {
    namespaces: { legacy: { "pod-security.imprimatur.dev/enforce": "psp-restricted" } },
    denied: [{ object: plainPod("legacy"), policy: "psp-restricted" }],
  },
  "examples/restricted-by-label.yaml": {
    namespaces: { payments: { "pod-security.imprimatur.dev/enforce": "restricted" }, storefront: { "pod-security.imprimatur.dev/enforce": "baseline" } },
    admitted: [plainPod("storefront")],
    denied: [
      { object: plainPod("payments"), policy: "enforce-restricted" },
      { object: privilegedPod("storefront"), policy: "enforce-baseline" },
    ],
  },
  "examples/kube-system-addons.yaml": {
    // An Accept policy admits what it matches whatever the Drop policies say; it denies nothing itself. Next to
    // baseline everywhere, it admits kube-system's addons and leaves other privileged pods there denied.
    profiles: ["baseline"],
    admitted: [
      pod(
        "addon",
        "kube-system",
        { hostNetwork: true, containers: [{ name: "a", image: "registry.k8s.io/kube-proxy:v1.30.0", securityContext: { privileged: true } }] },
        {
          "k8s-app": "kube-proxy",
          "addonmanager.kubernetes.io/mode": "Reconcile",
        },
      ),
    ],
    denied: [{ object: privilegedPod("kube-system"), policy: "profile-baseline" }],
  },
  "profiles/baseline.yaml": {
    namespaces: { storefront: { "pod-security.imprimatur.dev/enforce": "baseline" } },
    admitted: [plainPod("storefront")],
    denied: [{ object: privilegedPod("storefront"), policy: "baseline" }],
  },
  "profiles/restricted.yaml": {
    namespaces: { payments: { "pod-security.imprimatur.dev/enforce": "restricted" } },
    denied: [{ object: plainPod("payments"), policy: "restricted" }],
  },
};

async function shippedFiles(): Promise<string[]> {
  const files: string[] = [];
  for (const folder of FOLDERS) {
    for (const f of await readdir(`${POLICIES}${folder}`)) if (/\.(ya?ml|json)$/.test(f)) files.push(`${folder}/${f}`);
  }
  return files.sort();
}

function merge(...sets: PolicySet[]): PolicySet {
  return Object.fromEntries(KIND_NAMES.map((k) => [k, sets.flatMap((s): readonly unknown[] => s[k])])) as unknown as PolicySet;
}

async function engineFor(file: string, c: ExampleCase, withProfiles: boolean): Promise<Engine> {
  const own = (await loadPolicies(`${POLICIES}${file}`)).policies;
  const defaults = file === DEFAULT_POLICY ? emptyPolicySet() : (await loadPolicies(`${POLICIES}default`)).policies;
  let policies = merge(own, defaults);
  if (withProfiles && c.profiles) {
    const shipped = await shippedProfiles();
    const bound = c.profiles.map((name) => bindProfileClusterWide(name, shipped));
    policies = { ...policies, PodRestriction: [...bound, ...policies.PodRestriction] };
  }
  const labels: Record<string, Record<string, string>> = {};
  for (const ns of ["default", "kube-system", ...Object.keys(c.namespaces ?? {})]) {
    labels[ns] = { "kubernetes.io/metadata.name": ns, ...c.namespaces?.[ns] };
  }
  const namespaces: NamespaceLabelSource = { labels: (ns) => labels[ns] };
  return buildEngine({ config: structuredClone(DEFAULT_SERVER_CONFIG), policies, namespaces, offline: true });
}

const call = (): AdmissionCall => ({ endpoint: "check", deadline: Date.now() + 60_000, dryRun: true });

async function judge(engine: Engine, obj: KubeObject): Promise<Decision> {
  const plan = await planOfObject(engine, obj);
  assert.ok(plan.review, plan.review ? "" : `${describe(obj)} is not reviewed: ${plan.why}`);
  return validateSubject(engine, plan.subject as AdmissionSubject, call());
}

function describe(obj: KubeObject): string {
  const meta = obj.metadata as { name: string; namespace: string };
  return `${String(obj.kind)}/${meta.name} in ${meta.namespace}`;
}

test("every policy file shipped under policies/ has a case here, and every case a file", async () => {
  const files = await shippedFiles();
  assert.deepEqual(files, Object.keys(CASES).sort(), "add a case for each new example: one object it admits in scope and one it denies");
});

for (const [file, c] of Object.entries(CASES)) {
  test(`${file} applied as it is admits ordinary pods in default and kube-system`, async () => {
    const engine = await engineFor(file, c, false);
    for (const obj of ORDINARY) {
      const d = await judge(engine, obj);
      assert.equal(d.allowed, true, `${describe(obj)}: ${d.violations.map((v) => renderViolation(v)).join("; ")}`);
      // The same pod asked about through ImageReview (namespace, annotations and images only).
      if (obj.kind !== "Pod") continue;
      const meta = obj.metadata as { namespace: string };
      const containers = ((obj.spec as { containers: Array<{ image: string }> }).containers ?? []).map((c) => ({ image: c.image }));
      const review = await validateSubject(engine, subjectOfImageReview({ containers, namespace: meta.namespace, annotations: {} }), call());
      assert.equal(review.allowed, true, `ImageReview of ${describe(obj)}: ${review.violations.map((v) => renderViolation(v)).join("; ")}`);
    }
  });

  test(`${file} denies what it is meant to deny, in the scope it names`, async () => {
    const engine = await engineFor(file, c, true);
    for (const obj of c.admitted ?? []) {
      const d = await judge(engine, obj);
      assert.equal(d.allowed, true, `${describe(obj)}: ${d.violations.map((v) => renderViolation(v)).join("; ")}`);
    }
    for (const { object, policy } of c.denied) {
      const d = await judge(engine, object);
      assert.equal(d.allowed, false, `${describe(object)} should be denied by ${policy}`);
      assert.ok(
        d.violations.some((v) => v.policy === policy),
        `${describe(object)} should be denied by ${policy}, got: ${d.violations.map((v) => renderViolation(v)).join("; ")}`,
      );
    }
  });
}
