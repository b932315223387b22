// The PodRestrictions seed's two examples (the "Examples" section of the seed proposal), copied verbatim:
// the first loads unchanged and judges pods as the restricted PodSecurityPolicy it translates would; the
// second, as printed, is not valid YAML (no ":" after `addonmanager.kubernetes.io/mode`), which the loader
// reports with its line.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { decidePodRestrictions } from "../../../src/core/pod-restriction/pod-restriction-decision.ts";
import { podRestrictionFindings, type PodRestriction } from "../../../src/core/pod-restriction/pod-restriction.ts";
import { PodRestrictionIndex } from "../../../src/core/pod-restriction/restriction-index.ts";
import { podsInObject } from "../../../src/core/workload-templates.ts";
import { parsePolicyText } from "../../../src/policy/load-policies.ts";

/** The seed's first example, verbatim: a restricted PodSecurityPolicy translated into a PodRestriction. */
const SEED_RESTRICTED = `apiVersion: policy/v1alpha1
kind: PodRestriction
metadata:
  name: restricted
# No binding == cluster-wide
spec:
  metadata:
    annotations:
      requireKeys:
        - seccomp.security.alpha.kubernetes.io/pod
      valueRestrictions:
        apparmor.security.beta.kubernetes.io/pod:
          whitelist: ['runtime/default']
        seccomp.security.alpha.kubernetes.io/pod:
          whitelist: ['docker/default']
  spec:
    containers:
    - securityContext:
        privileged:
          allowNil: true
          require:  false
        allowPrivilegeEscalation:
          require:  false
        capabilities:
          add:
            requireEmpty: true
          drop:
            requiredValues: ['ALL']
        runAsUser:
          allowNil: false
          ranges:
            - min: 1
        runAsGroup:
          allowNil: false
          ranges:
            - min: 1
    securityContext:
      hostNetwork:
        require: false
      hostIPC:
        require: false
      hostPID:
        require: false
      supplementalGroups:
        ranges:
          - min: 1
      fsGroup:
        ranges:
          - min: 1
    volumes:
      volumeType:
        whitelist:
          - 'configMap'
          - 'emptyDir'
          - 'projected'
          - 'secret'
          - 'downwardAPI'
          - 'persistentVolumeClaim'
`;

/** The seed's second example, verbatim: allowing all (and only) addons in kube-system. */
const SEED_KUBE_SYSTEM = `apiVersion: policy/v1alpha1
kind: PodRestriction
metadata:
  name: kube-system
binding:
  mode: 'Allow'
  namespaces: ['kube-system']
spec:
  metadata:
    labels:
      requireKeys:
        - k8s-app
        - addonmanager.kubernetes.io/mode: Reconcile
      valueRestrictions:
        addonmanager.kubernetes.io/mode
          whitelist: ['Reconcile', 'EnsureExists']
  # No restrictions on PodSpec
`;

function pod(metadata: Record<string, unknown>, spec: Record<string, unknown>) {
  const [p] = podsInObject({ apiVersion: "v1", kind: "Pod", metadata, spec });
  assert.ok(p);
  return p;
}

const compliantRestricted = pod(
  { name: "web", annotations: { "seccomp.security.alpha.kubernetes.io/pod": "docker/default", "apparmor.security.beta.kubernetes.io/pod": "runtime/default" } },
  {
    securityContext: { supplementalGroups: [1000], fsGroup: 2000 },
    containers: [
      {
        name: "web",
        image: "registry.example.com/web:1.0",
        securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ["ALL"] }, runAsUser: 1000, runAsGroup: 1000 },
        volumeMounts: [{ name: "config", mountPath: "/etc/web" }],
      },
    ],
    volumes: [
      { name: "config", configMap: { name: "web" } },
      { name: "tmp", emptyDir: {} },
      { name: "token", projected: { sources: [] } },
      { name: "data", persistentVolumeClaim: { claimName: "web" } },
    ],
  },
);

const nonCompliantRestricted = pod(
  { name: "root", annotations: { "apparmor.security.beta.kubernetes.io/pod": "unconfined" } },
  {
    hostNetwork: true,
    hostPID: true,
    securityContext: { supplementalGroups: [0] },
    containers: [{ name: "root", image: "nginx", securityContext: { privileged: true, runAsUser: 0, capabilities: { add: ["NET_ADMIN"] } } }],
    volumes: [
      { name: "host", hostPath: { path: "/" } },
      { name: "config", configMap: { name: "x" } },
    ],
  },
);

describe("the seed's first example (restricted PSP, policy/v1alpha1)", () => {
  const parsed = parsePolicyText(SEED_RESTRICTED, "seed-restricted.yaml");

  it("loads unchanged as a cluster-wide Drop PodRestriction", () => {
    assert.deepEqual(parsed.errors, []);
    assert.deepEqual(parsed.policies.ImagePolicy, []);
    assert.equal(parsed.policies.PodRestriction.length, 1);
    const p = parsed.policies.PodRestriction[0]!;
    assert.equal(p.name, "restricted");
    assert.equal(p.mode, "Drop");
    assert.equal(p.namespaces, undefined);
    assert.equal(p.namespaceSelector, undefined);
    assert.deepEqual(p.source, { origin: "seed-restricted.yaml", document: 1 });
  });

  it("admits a compliant pod", () => {
    const p = parsed.policies.PodRestriction[0]!;
    assert.deepEqual(podRestrictionFindings(p, compliantRestricted), []);
    assert.equal(decidePodRestrictions(new PodRestrictionIndex([p]), compliantRestricted, "default", {}).allowed, true);
  });

  it("denies a non-compliant pod, naming every violated field", () => {
    const p: PodRestriction = parsed.policies.PodRestriction[0]!;
    const decision = decidePodRestrictions(new PodRestrictionIndex([p]), nonCompliantRestricted, "default", {});
    assert.equal(decision.allowed, false);
    const got = decision.violations.map((v) => ({ field: v.field, rule: v.rule, message: v.message }));
    const expected: Array<{ field: string; rule: string; message: string }> = [
      {
        field: "metadata.annotations[apparmor.security.beta.kubernetes.io/pod]",
        rule: "spec.metadata.annotations",
        message: 'is "unconfined"; allowed: "runtime/default"',
      },
      { field: "metadata.annotations", rule: "spec.metadata.annotations", message: 'must have the key "seccomp.security.alpha.kubernetes.io/pod"' },
      { field: "spec.hostNetwork", rule: "spec.spec.securityContext.hostNetwork", message: "is true; must be false" },
      { field: "spec.hostPID", rule: "spec.spec.securityContext.hostPID", message: "is true; must be false" },
      { field: "spec.securityContext.supplementalGroups[0]", rule: "spec.spec.securityContext.supplementalGroups", message: "is 0; must be at least 1" },
      { field: "spec.securityContext.fsGroup", rule: "spec.spec.securityContext.fsGroup", message: "is unset; must be set (at least 1)" },
      { field: "spec.volumes[0].hostPath", rule: "spec.spec.volumes.volumeType", message: 'volume type is "hostPath"; allowed: ' },
      { field: "spec.containers[0].securityContext.privileged", rule: "spec.spec.containers[0].securityContext.privileged", message: "is true; must be false" },
      {
        field: "spec.containers[0].securityContext.capabilities.add",
        rule: "spec.spec.containers[0].securityContext.capabilities.add",
        message: "has 1 values; must be empty",
      },
      {
        field: "spec.containers[0].securityContext.capabilities.drop",
        rule: "spec.spec.containers[0].securityContext.capabilities.drop",
        message: 'must include "ALL"',
      },
      { field: "spec.containers[0].securityContext.runAsUser", rule: "spec.spec.containers[0].securityContext.runAsUser", message: "is 0; must be at least 1" },
      {
        field: "spec.containers[0].securityContext.runAsGroup",
        rule: "spec.spec.containers[0].securityContext.runAsGroup",
        message: "is unset; must be set (at least 1)",
      },
      {
        field: "spec.containers[0].securityContext.allowPrivilegeEscalation",
        rule: "spec.spec.containers[0].securityContext.allowPrivilegeEscalation",
        message: "is unset; must be set (to false)",
      },
    ];
    assert.equal(got.length, expected.length, JSON.stringify(got, null, 1));
    for (const e of expected) {
      assert.ok(
        got.some((g) => g.field === e.field && g.rule === e.rule && g.message.includes(e.message)),
        `missing ${JSON.stringify(e)} in ${JSON.stringify(got, null, 1)}`,
      );
    }
    assert.ok(decision.violations.every((v) => v.policy === "restricted" && v.kind === "PodRestriction"));
  });

  const containerSc = (spec: Record<string, unknown>) => (spec.containers as Array<{ securityContext: Record<string, unknown> }>)[0]!.securityContext;
  const oneChange: Array<{ name: string; change: (spec: Record<string, unknown>, metadata: Record<string, unknown>) => void; field: string }> = [
    { name: "privileged: true", change: (s) => (containerSc(s).privileged = true), field: "spec.containers[0].securityContext.privileged" },
    {
      name: "allowPrivilegeEscalation: true",
      change: (s) => (containerSc(s).allowPrivilegeEscalation = true),
      field: "spec.containers[0].securityContext.allowPrivilegeEscalation",
    },
    {
      name: "a seccomp annotation other than docker/default",
      change: (_s, m) => ((m.annotations as Record<string, string>)["seccomp.security.alpha.kubernetes.io/pod"] = "unconfined"),
      field: "metadata.annotations[seccomp.security.alpha.kubernetes.io/pod]",
    },
    { name: "hostIPC", change: (s) => (s.hostIPC = true), field: "spec.hostIPC" },
    {
      name: "a hostPath volume",
      change: (s) => (s.volumes as unknown[]).push({ name: "h", hostPath: { path: "/var/log" } }),
      field: "spec.volumes[4].hostPath",
    },
    {
      name: "runAsGroup 0 at pod level, unset in the container",
      change: (s) => {
        delete containerSc(s).runAsGroup;
        (s.securityContext as Record<string, unknown>).runAsGroup = 0;
      },
      field: "spec.securityContext.runAsGroup",
    },
  ];
  for (const t of oneChange) {
    it(`denies the compliant pod changed by ${t.name}`, () => {
      const metadata = structuredClone(compliantRestricted.metadata.value) as Record<string, unknown>;
      const spec = structuredClone(compliantRestricted.spec.value) as Record<string, unknown>;
      t.change(spec, metadata);
      const findings = podRestrictionFindings(parsed.policies.PodRestriction[0]!, pod(metadata, spec));
      assert.deepEqual(
        findings.map((f) => f.field),
        [t.field],
        JSON.stringify(findings, null, 1),
      );
    });
  }
});

describe("the seed's second example (kube-system addons)", () => {
  it("as printed is not valid YAML: the loader reports a YAML error with its line", () => {
    const parsed = parsePolicyText(SEED_KUBE_SYSTEM, "seed-kube-system.yaml");
    assert.deepEqual(parsed.policies.PodRestriction, []);
    assert.equal(parsed.errors.length, 1, JSON.stringify(parsed.errors));
    const e = parsed.errors[0]!;
    assert.equal(e.origin, "seed-kube-system.yaml");
    assert.equal(e.document, 1);
    // Line 15 is "        addonmanager.kubernetes.io/mode", the key missing its ":".
    assert.equal(SEED_KUBE_SYSTEM.split("\n")[14]!.trim(), "addonmanager.kubernetes.io/mode");
    assert.equal(e.line, 15);
    assert.ok(e.message.startsWith("YAML: "), e.message);
  });

  it("with the one missing colon added, it loads and accepts only addons in kube-system", () => {
    const corrected = SEED_KUBE_SYSTEM.replace("addonmanager.kubernetes.io/mode\n", "addonmanager.kubernetes.io/mode:\n");
    assert.notEqual(corrected, SEED_KUBE_SYSTEM);
    const parsed = parsePolicyText(corrected, "kube-system.yaml");
    assert.deepEqual(parsed.errors, []);
    const accept = parsed.policies.PodRestriction[0]!;
    assert.equal(accept.name, "kube-system");
    assert.equal(accept.mode, "Accept");
    assert.deepEqual(accept.namespaces, ["kube-system"]);

    const restricted = parsePolicyText(SEED_RESTRICTED, "restricted.yaml").policies.PodRestriction[0]!;
    const index = new PodRestrictionIndex([restricted, accept]);
    const addon = (labels: Record<string, string>) =>
      pod({ name: "dns", labels }, { hostNetwork: true, containers: [{ name: "dns", image: "coredns/coredns:1.11" }] });
    const decide = (labels: Record<string, string>, namespace: string) => decidePodRestrictions(index, addon(labels), namespace, {});

    const accepted = decide({ "k8s-app": "kube-dns", "addonmanager.kubernetes.io/mode": "Reconcile" }, "kube-system");
    assert.equal(accepted.allowed, true);
    assert.deepEqual(accepted.auditAnnotations, { "pod-restriction-accepted-by": "kube-system" });
    // Not an addon (no k8s-app label): the restricted policy decides, and the warning says why kube-system did not accept.
    const notAddon = decide({ "addonmanager.kubernetes.io/mode": "Reconcile" }, "kube-system");
    assert.equal(notAddon.allowed, false);
    assert.ok(
      notAddon.warnings.some((w) => w.includes("not accepted by PodRestriction kube-system") && w.includes('must have the key "k8s-app"')),
      notAddon.warnings.join("\n"),
    );
    // requireKeys pins the mode label to Reconcile.
    assert.equal(decide({ "k8s-app": "kube-dns", "addonmanager.kubernetes.io/mode": "EnsureExists" }, "kube-system").allowed, false);
    // Outside kube-system the Accept policy is not bound.
    assert.equal(decide({ "k8s-app": "kube-dns", "addonmanager.kubernetes.io/mode": "Reconcile" }, "default").allowed, false);
  });
});
