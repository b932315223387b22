// How PodRestrictions combine (pod-restriction-decision.ts): a pod is admitted if ANY bound Accept policy is
// satisfied, otherwise it must satisfy ALL bound Drop policies. Which policies are bound (binding.ts,
// restriction-index.ts), named checks with when/unless, and profile inclusion (pod-restriction.ts).
import assert from "node:assert/strict";
import { before, describe, it } from "node:test";
import { matchesLabelSelector, type LabelSelector } from "../../../src/core/label-selector.ts";
import { ACCEPTED_BY_ANNOTATION, decidePodRestrictions } from "../../../src/core/pod-restriction/pod-restriction-decision.ts";
import { compilePodRestriction, podRestrictionFindings, type PodRestriction } from "../../../src/core/pod-restriction/pod-restriction.ts";
import type { PodUnderReview } from "../../../src/core/pod-under-review.ts";
import { PodRestrictionIndex } from "../../../src/core/pod-restriction/restriction-index.ts";
import { podsInObject } from "../../../src/core/workload-templates.ts";
import { profileSources, shippedProfiles } from "../../../src/policy/profiles.ts";

function compile(doc: { name: string; binding?: unknown; spec?: unknown }, profiles?: ReadonlyMap<string, unknown>) {
  const raw: Record<string, unknown> = { apiVersion: "imprimatur.dev/v1alpha1", kind: "PodRestriction", metadata: { name: doc.name }, spec: doc.spec ?? {} };
  if (doc.binding !== undefined) raw.binding = doc.binding;
  return compilePodRestriction(raw, profiles ? { profiles } : {});
}

function policy(doc: { name: string; binding?: unknown; spec?: unknown }, profiles?: ReadonlyMap<string, unknown>): PodRestriction {
  const r = compile(doc, profiles);
  assert.deepEqual(r.issues, []);
  assert.ok(r.policy);
  return r.policy;
}

function pod(spec: Record<string, unknown>, metadata: Record<string, unknown> = { name: "pod" }): PodUnderReview {
  const [p] = podsInObject({ apiVersion: "v1", kind: "Pod", metadata, spec });
  assert.ok(p);
  return p;
}

const noPrivileged = { spec: { containers: [{ securityContext: { privileged: { allowNil: true, require: false } } }] } };
const noHostNetwork = { spec: { securityContext: { hostNetwork: { require: false } } } };
const trustedRegistry = { spec: { containers: [{ image: { registry: { allowed: ["registry.example.com"] } } }] } };

const compliant = pod({ containers: [{ name: "app", image: "registry.example.com/app:1" }] });
const privilegedHostNet = pod({ hostNetwork: true, containers: [{ name: "app", image: "registry.example.com/app:1", securityContext: { privileged: true } }] });
const privilegedHubImage = pod({ containers: [{ name: "app", image: "nginx", securityContext: { privileged: true } }] });

describe("decidePodRestrictions: Accept and Drop", () => {
  it("no policies: allowed", () => {
    const d = decidePodRestrictions(new PodRestrictionIndex([]), privilegedHostNet, "default", {});
    assert.equal(d.allowed, true);
    assert.deepEqual(d.violations, []);
  });

  it("Drop policies that all pass: allowed", () => {
    const index = new PodRestrictionIndex([policy({ name: "no-privileged", spec: noPrivileged }), policy({ name: "no-host-network", spec: noHostNetwork })]);
    const d = decidePodRestrictions(index, compliant, "default", {});
    assert.equal(d.allowed, true);
    assert.deepEqual(d.violations, []);
  });

  it("every failing Drop policy contributes its violations", () => {
    const index = new PodRestrictionIndex([
      policy({ name: "no-privileged", spec: noPrivileged }),
      policy({ name: "trusted-registry", spec: trustedRegistry }),
      policy({ name: "no-host-network", spec: noHostNetwork }),
    ]);
    const d = decidePodRestrictions(index, privilegedHostNet, "default", {});
    assert.equal(d.allowed, false);
    assert.deepEqual(d.violations, [
      {
        policy: "no-privileged",
        kind: "PodRestriction",
        rule: "spec.spec.containers[0].securityContext.privileged",
        field: "spec.containers[0].securityContext.privileged",
        message: "is true; must be false",
      },
      {
        policy: "no-host-network",
        kind: "PodRestriction",
        rule: "spec.spec.securityContext.hostNetwork",
        field: "spec.hostNetwork",
        message: "is true; must be false",
      },
    ]);
  });

  it("a satisfied Accept policy admits the pod even though Drop policies fail, and says so in the audit annotations", () => {
    const index = new PodRestrictionIndex([
      policy({ name: "no-privileged", spec: noPrivileged }),
      policy({ name: "trusted-images-anything-goes", binding: { mode: "Accept" }, spec: trustedRegistry }),
    ]);
    const d = decidePodRestrictions(index, privilegedHostNet, "default", {});
    assert.equal(d.allowed, true);
    assert.deepEqual(d.violations, []);
    assert.deepEqual(d.auditAnnotations, { [ACCEPTED_BY_ANNOTATION]: "trusted-images-anything-goes" });
    assert.equal(ACCEPTED_BY_ANNOTATION, "pod-restriction-accepted-by");
  });

  it("the first satisfied Accept policy (in definition order) is named", () => {
    const index = new PodRestrictionIndex([
      policy({ name: "drop", spec: noPrivileged }),
      policy({ name: "accept-a", binding: { mode: "Accept" }, spec: noHostNetwork }),
      policy({ name: "accept-b", binding: { mode: "Accept" }, spec: trustedRegistry }),
      policy({ name: "accept-c", binding: { mode: "Accept" } }),
    ]);
    const d = decidePodRestrictions(index, privilegedHostNet, "default", {});
    assert.equal(d.allowed, true);
    assert.deepEqual(d.auditAnnotations, { [ACCEPTED_BY_ANNOTATION]: "accept-b" });
  });

  it("an unsatisfied Accept policy leaves the decision to the Drop policies, and is mentioned in the warnings", () => {
    const index = new PodRestrictionIndex([
      policy({ name: "no-privileged", spec: noPrivileged }),
      policy({ name: "trusted-images", binding: { mode: "Accept" }, spec: trustedRegistry }),
    ]);
    const d = decidePodRestrictions(index, privilegedHubImage, "default", {});
    assert.equal(d.allowed, false);
    assert.deepEqual(
      d.violations.map((v) => v.policy),
      ["no-privileged"],
    );
    assert.equal(d.warnings.length, 1);
    assert.ok(d.warnings[0]!.startsWith("not accepted by PodRestriction trusted-images: spec.containers[0].image (registry) "), d.warnings[0]);
    assert.ok(d.warnings[0]!.includes('is "docker.io"'), d.warnings[0]);
    assert.deepEqual(d.auditAnnotations, {});
  });

  it("an unsatisfied Accept policy with passing Drop policies: allowed", () => {
    const index = new PodRestrictionIndex([
      policy({ name: "no-host-network", spec: noHostNetwork }),
      policy({ name: "trusted-images", binding: { mode: "Accept" }, spec: trustedRegistry }),
    ]);
    const d = decidePodRestrictions(index, privilegedHubImage, "default", {});
    assert.equal(d.allowed, true);
    assert.deepEqual(d.violations, []);
  });

  it("only Accept policies bound: allowed whether or not they are satisfied", () => {
    const index = new PodRestrictionIndex([policy({ name: "trusted-images", binding: { mode: "Accept" }, spec: trustedRegistry })]);
    assert.equal(decidePodRestrictions(index, privilegedHubImage, "default", {}).allowed, true);
    assert.equal(decidePodRestrictions(index, compliant, "default", {}).allowed, true);
  });

  it("the seed's mode: Allow is Accept; Drop is the default; other modes are compile issues", () => {
    assert.equal(policy({ name: "a", binding: { mode: "Allow" } }).mode, "Accept");
    assert.equal(policy({ name: "b", binding: { mode: "Accept" } }).mode, "Accept");
    assert.equal(policy({ name: "c", binding: { mode: "Drop" } }).mode, "Drop");
    assert.equal(policy({ name: "d" }).mode, "Drop");
    assert.equal(policy({ name: "e", binding: { namespaces: ["x"] } }).mode, "Drop");
    const r = compile({ name: "f", binding: { mode: "Deny" } });
    assert.equal(r.policy, undefined);
    assert.deepEqual(
      r.issues.map((i) => i.path),
      [["binding", "mode"]],
    );
    assert.equal(r.issues[0]!.message, 'must be one of "Accept", "Allow", "Drop", got "Deny"');
  });

  it("a mode: Allow policy from the seed admits pods in its namespace only", () => {
    const index = new PodRestrictionIndex([
      policy({ name: "no-privileged", spec: noPrivileged }),
      policy({ name: "kube-system", binding: { mode: "Allow", namespaces: ["kube-system"] }, spec: { metadata: { labels: { requireKeys: ["k8s-app"] } } } }),
    ]);
    const addon = pod({ containers: [{ name: "a", image: "x", securityContext: { privileged: true } }] }, { name: "dns", labels: { "k8s-app": "dns" } });
    assert.equal(decidePodRestrictions(index, addon, "kube-system", {}).allowed, true);
    assert.equal(decidePodRestrictions(index, addon, "default", {}).allowed, false);
  });
});

describe("binding", () => {
  const bound = (binding: unknown, namespace: string, labels: Record<string, string> | undefined) => {
    const index = new PodRestrictionIndex([policy({ name: "p", binding, spec: noPrivileged })]);
    return index.bound(namespace, labels).bound.length === 1;
  };

  const cases: Array<{ name: string; binding: unknown; namespace: string; labels: Record<string, string>; bound: boolean }> = [
    { name: "no binding: cluster-wide", binding: undefined, namespace: "any", labels: {}, bound: true },
    { name: "empty binding: cluster-wide", binding: {}, namespace: "any", labels: {}, bound: true },
    { name: "namespaces: listed", binding: { namespaces: ["a", "b"] }, namespace: "b", labels: {}, bound: true },
    { name: "namespaces: not listed", binding: { namespaces: ["a", "b"] }, namespace: "c", labels: {}, bound: false },
    {
      name: "matchLabels: matching",
      binding: { namespaceSelector: { matchLabels: { env: "prod" } } },
      namespace: "x",
      labels: { env: "prod", team: "a" },
      bound: true,
    },
    {
      name: "matchLabels: other value",
      binding: { namespaceSelector: { matchLabels: { env: "prod" } } },
      namespace: "x",
      labels: { env: "dev" },
      bound: false,
    },
    {
      name: "matchLabels: all must match",
      binding: { namespaceSelector: { matchLabels: { env: "prod", team: "a" } } },
      namespace: "x",
      labels: { env: "prod", team: "b" },
      bound: false,
    },
    {
      name: "In: value listed",
      binding: { namespaceSelector: { matchExpressions: [{ key: "env", operator: "In", values: ["prod", "staging"] }] } },
      namespace: "x",
      labels: { env: "staging" },
      bound: true,
    },
    {
      name: "In: value not listed",
      binding: { namespaceSelector: { matchExpressions: [{ key: "env", operator: "In", values: ["prod", "staging"] }] } },
      namespace: "x",
      labels: { env: "dev" },
      bound: false,
    },
    {
      name: "In: key missing",
      binding: { namespaceSelector: { matchExpressions: [{ key: "env", operator: "In", values: ["prod"] }] } },
      namespace: "x",
      labels: {},
      bound: false,
    },
    {
      name: "NotIn: value listed",
      binding: { namespaceSelector: { matchExpressions: [{ key: "env", operator: "NotIn", values: ["dev"] }] } },
      namespace: "x",
      labels: { env: "dev" },
      bound: false,
    },
    {
      name: "NotIn: other value",
      binding: { namespaceSelector: { matchExpressions: [{ key: "env", operator: "NotIn", values: ["dev"] }] } },
      namespace: "x",
      labels: { env: "prod" },
      bound: true,
    },
    {
      name: "NotIn: key missing (as in Kubernetes)",
      binding: { namespaceSelector: { matchExpressions: [{ key: "env", operator: "NotIn", values: ["dev"] }] } },
      namespace: "x",
      labels: {},
      bound: true,
    },
    {
      name: "Exists: present",
      binding: { namespaceSelector: { matchExpressions: [{ key: "restricted", operator: "Exists" }] } },
      namespace: "x",
      labels: { restricted: "" },
      bound: true,
    },
    {
      name: "Exists: absent",
      binding: { namespaceSelector: { matchExpressions: [{ key: "restricted", operator: "Exists" }] } },
      namespace: "x",
      labels: { other: "" },
      bound: false,
    },
    {
      name: "DoesNotExist: absent",
      binding: { namespaceSelector: { matchExpressions: [{ key: "exempt", operator: "DoesNotExist" }] } },
      namespace: "x",
      labels: {},
      bound: true,
    },
    {
      name: "DoesNotExist: present",
      binding: { namespaceSelector: { matchExpressions: [{ key: "exempt", operator: "DoesNotExist" }] } },
      namespace: "x",
      labels: { exempt: "true" },
      bound: false,
    },
    { name: "empty selector: every namespace", binding: { namespaceSelector: {} }, namespace: "x", labels: {}, bound: true },
    {
      name: "both: listed and matching",
      binding: { namespaces: ["a"], namespaceSelector: { matchLabels: { env: "prod" } } },
      namespace: "a",
      labels: { env: "prod" },
      bound: true,
    },
    {
      name: "both: listed, not matching",
      binding: { namespaces: ["a"], namespaceSelector: { matchLabels: { env: "prod" } } },
      namespace: "a",
      labels: { env: "dev" },
      bound: false,
    },
    {
      name: "both: matching, not listed",
      binding: { namespaces: ["a"], namespaceSelector: { matchLabels: { env: "prod" } } },
      namespace: "b",
      labels: { env: "prod" },
      bound: false,
    },
  ];
  for (const t of cases) {
    it(`${t.name}: ${t.bound ? "bound" : "not bound"}`, () => {
      assert.equal(bound(t.binding, t.namespace, t.labels), t.bound);
    });
  }

  it("a policy not bound to the namespace does not judge the pod", () => {
    const index = new PodRestrictionIndex([
      policy({ name: "prod-only", binding: { namespaceSelector: { matchLabels: { env: "prod" } } }, spec: noPrivileged }),
    ]);
    assert.equal(decidePodRestrictions(index, privilegedHostNet, "dev-ns", { env: "dev" }).allowed, true);
    const d = decidePodRestrictions(index, privilegedHostNet, "prod-ns", { env: "prod" });
    assert.equal(d.allowed, false);
    assert.deepEqual(
      d.violations.map((v) => v.policy),
      ["prod-only"],
    );
  });

  it("unknown namespace labels with a selector-bound policy: denied with an explicit message", () => {
    const index = new PodRestrictionIndex([
      policy({ name: "cluster", spec: noHostNetwork }),
      policy({ name: "prod-only", binding: { namespaceSelector: { matchLabels: { env: "prod" } } }, spec: noPrivileged }),
    ]);
    const d = decidePodRestrictions(index, compliant, "team-a", undefined);
    assert.equal(d.allowed, false);
    assert.equal(d.violations.length, 1);
    const v = d.violations[0]!;
    assert.equal(v.policy, "prod-only");
    assert.equal(v.kind, "PodRestriction");
    assert.equal(v.rule, "binding.namespaceSelector");
    assert.ok(v.message.includes('the labels of namespace "team-a" are unknown'), v.message);
    assert.ok(v.message.includes("(selector env=prod)"), v.message);
  });

  it("unknown labels do not matter when no selector could bind the namespace", () => {
    const index = new PodRestrictionIndex([
      policy({ name: "listed", binding: { namespaces: ["a"] }, spec: noPrivileged }),
      policy({ name: "both", binding: { namespaces: ["b"], namespaceSelector: { matchLabels: { env: "prod" } } }, spec: noPrivileged }),
    ]);
    assert.deepEqual(index.bound("a", undefined), { bound: [index.all[0]], undecided: [] });
    assert.deepEqual(index.bound("c", undefined), { bound: [], undecided: [] });
    assert.deepEqual(index.bound("b", undefined), { bound: [], undecided: [index.all[1]] });
    assert.equal(decidePodRestrictions(index, compliant, "a", undefined).allowed, true);
    assert.equal(index.usesSelectors, true);
    assert.equal(new PodRestrictionIndex([index.all[0]!]).usesSelectors, false);
  });

  const invalidSelectors: Array<{ name: string; selector: unknown; path: Array<string | number>; message: string }> = [
    {
      name: "an unknown operator",
      selector: { matchExpressions: [{ key: "a", operator: "Equals", values: ["b"] }] },
      path: ["binding", "namespaceSelector", "matchExpressions", 0, "operator"],
      message: 'must be one of "In", "NotIn", "Exists", "DoesNotExist", got "Equals"',
    },
    {
      name: "In without values",
      selector: { matchExpressions: [{ key: "a", operator: "In" }] },
      path: ["binding", "namespaceSelector", "matchExpressions", 0, "values"],
      message: "operator In needs at least one value",
    },
    {
      name: "Exists with values",
      selector: { matchExpressions: [{ key: "a", operator: "Exists", values: ["b"] }] },
      path: ["binding", "namespaceSelector", "matchExpressions", 0, "values"],
      message: "operator Exists takes no values",
    },
    {
      name: "matchLabels with a non-string value",
      selector: { matchLabels: { a: 1 } },
      path: ["binding", "namespaceSelector", "matchLabels", "a"],
      message: "must be a string, got 1",
    },
    {
      name: "an unknown selector field",
      selector: { labels: { a: "b" } },
      path: ["binding", "namespaceSelector", "labels"],
      message: 'unknown field "labels"',
    },
  ];
  for (const t of invalidSelectors) {
    it(`${t.name} is a compile issue`, () => {
      const r = compile({ name: "p", binding: { namespaceSelector: t.selector } });
      assert.equal(r.policy, undefined);
      assert.deepEqual(
        r.issues.map((i) => i.path),
        [t.path],
      );
      assert.ok(r.issues[0]!.message.includes(t.message), r.issues[0]!.message);
    });
  }
});

describe("PodRestrictionIndex agrees with a naive scan", () => {
  /** mulberry32: a small deterministic PRNG, so failures reproduce. */
  function prng(seed: number): () => number {
    let a = seed >>> 0;
    return () => {
      a = (a + 0x6d2b79f5) >>> 0;
      let t = a;
      t = Math.imul(t ^ (t >>> 15), t | 1);
      t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
  }

  const NAMESPACES = ["default", "kube-system", "team-a", "team-b", "team-c", "prod-1", "prod-2", "dev"];
  const KEYS = ["env", "team", "tier", "restricted"];
  const VALUES = ["prod", "dev", "a", "b", ""];

  function naive(policies: readonly PodRestriction[], namespace: string, labels: Record<string, string>): PodRestriction[] {
    return policies.filter(
      (p) =>
        (p.namespaces === undefined || p.namespaces.includes(namespace)) &&
        (p.namespaceSelector === undefined || matchesLabelSelector(p.namespaceSelector, labels)),
    );
  }

  for (const seed of [1, 2, 3, 42, 2024]) {
    it(`seed ${seed}: 300 random policies, 200 random namespaces`, () => {
      const rand = prng(seed);
      const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
      const some = <T>(xs: readonly T[], max: number): T[] => {
        const n = 1 + Math.floor(rand() * max);
        return [...new Set(Array.from({ length: n }, () => pick(xs)))];
      };
      const randomSelector = (): LabelSelector => {
        const sel: Record<string, unknown> = {};
        if (rand() < 0.5) sel.matchLabels = Object.fromEntries(some(KEYS, 2).map((k) => [k, pick(VALUES)]));
        if (rand() < 0.6) {
          sel.matchExpressions = some(KEYS, 2).map((key) => {
            const operator = pick(["In", "NotIn", "Exists", "DoesNotExist"] as const);
            return operator === "In" || operator === "NotIn" ? { key, operator, values: some(VALUES, 3) } : { key, operator };
          });
        }
        return sel as LabelSelector;
      };

      const policies: PodRestriction[] = [];
      for (let i = 0; i < 300; i++) {
        const binding: Record<string, unknown> = { mode: rand() < 0.2 ? "Accept" : "Drop" };
        const r = rand();
        if (r < 0.3) binding.namespaces = some(NAMESPACES, 3);
        else if (r < 0.8) binding.namespaceSelector = randomSelector();
        else if (r < 0.9) {
          binding.namespaces = some(NAMESPACES, 3);
          binding.namespaceSelector = randomSelector();
        }
        policies.push(policy({ name: `p-${i}`, binding }));
      }
      const index = new PodRestrictionIndex(policies);

      for (let j = 0; j < 200; j++) {
        const namespace = pick(NAMESPACES);
        const labels = rand() < 0.1 ? {} : Object.fromEntries(some(KEYS, 4).map((k) => [k, pick(VALUES)]));
        const got = index.bound(namespace, labels);
        assert.deepEqual(got.undecided, []);
        assert.deepEqual(
          got.bound.map((p) => p.name),
          naive(policies, namespace, labels).map((p) => p.name),
          `namespace ${namespace} labels ${JSON.stringify(labels)}`,
        );
      }
      // With unknown labels, exactly the selector policies that could apply are undecided.
      for (const namespace of NAMESPACES) {
        const got = index.bound(namespace, undefined);
        const applicable = policies.filter((p) => p.namespaces === undefined || p.namespaces.includes(namespace));
        assert.deepEqual(
          got.bound.map((p) => p.name),
          applicable.filter((p) => !p.namespaceSelector).map((p) => p.name),
        );
        assert.deepEqual(
          got.undecided.map((p) => p.name),
          applicable.filter((p) => p.namespaceSelector).map((p) => p.name),
        );
      }
    });
  }
});

describe("named checks", () => {
  it("the rule of a finding is the check's name", () => {
    const p = policy({
      name: "p",
      spec: {
        checks: [
          { name: "no-privileged", description: "Privileged containers are not allowed.", ...noPrivileged },
          { name: "no-host-network", ...noHostNetwork },
        ],
      },
    });
    assert.deepEqual(
      podRestrictionFindings(p, privilegedHostNet).map((f) => [f.rule, f.field]),
      [
        ["no-privileged", "spec.containers[0].securityContext.privileged"],
        ["no-host-network", "spec.hostNetwork"],
      ],
    );
    assert.deepEqual(
      p.checks.map((c) => [c.name, c.description]),
      [
        ["no-privileged", "Privileged containers are not allowed."],
        ["no-host-network", undefined],
      ],
    );
  });

  it("checks and plain restrictions combine in one policy", () => {
    const p = policy({ name: "p", spec: { ...noHostNetwork, checks: [{ name: "no-privileged", ...noPrivileged }] } });
    assert.deepEqual(
      podRestrictionFindings(p, privilegedHostNet).map((f) => f.rule),
      ["spec.spec.securityContext.hostNetwork", "no-privileged"],
    );
  });

  describe("when / unless", () => {
    const windows = { spec: { os: { forbidNil: true, name: { allowed: ["windows"] } } } };
    const p = policy({
      name: "p",
      spec: {
        checks: [
          { name: "linux-no-privileged", unless: windows, ...noPrivileged },
          { name: "prod-trusted-images", when: { metadata: { labels: { requiredKeys: [{ env: "prod" }] } } }, ...trustedRegistry },
        ],
      },
    });
    const cases: Array<{ name: string; pod: PodUnderReview; rules: string[] }> = [
      { name: "a privileged Linux pod with a Hub image, no env label", pod: privilegedHubImage, rules: ["linux-no-privileged"] },
      {
        name: "the same pod labelled env=prod",
        pod: pod({ containers: [{ name: "app", image: "nginx", securityContext: { privileged: true } }] }, { name: "x", labels: { env: "prod" } }),
        rules: ["linux-no-privileged", "prod-trusted-images"],
      },
      {
        name: "the same pod labelled env=dev",
        pod: pod({ containers: [{ name: "app", image: "nginx", securityContext: { privileged: true } }] }, { name: "x", labels: { env: "dev" } }),
        rules: ["linux-no-privileged"],
      },
      {
        name: "a privileged Windows pod labelled env=prod",
        pod: pod(
          { os: { name: "windows" }, containers: [{ name: "app", image: "nginx", securityContext: { privileged: true } }] },
          { name: "x", labels: { env: "prod" } },
        ),
        rules: ["prod-trusted-images"],
      },
      {
        name: "a privileged pod with os linux",
        pod: pod({ os: { name: "linux" }, containers: [{ name: "app", image: "registry.example.com/a", securityContext: { privileged: true } }] }),
        rules: ["linux-no-privileged"],
      },
    ];
    for (const t of cases) {
      it(t.name, () => {
        assert.deepEqual([...new Set(podRestrictionFindings(p, t.pod).map((f) => f.rule))], t.rules);
      });
    }
  });

  const invalid: Array<{ name: string; checks: unknown; path: Array<string | number>; message: string }> = [
    { name: "a duplicate name", checks: [{ name: "a" }, { name: "a" }], path: ["spec", "checks", 1, "name"], message: 'duplicate check name "a"' },
    { name: "a missing name", checks: [{ spec: {} }], path: ["spec", "checks", 0], message: 'missing required field "name"' },
    { name: "a name with a space", checks: [{ name: "no priv" }], path: ["spec", "checks", 0, "name"], message: "must be a name of letters, digits" },
    {
      name: "overrides without an included profile",
      checks: [{ name: "a", overrides: ["b"] }],
      path: ["spec", "checks", 0, "overrides", 0],
      message: "the policy includes none (spec.profile)",
    },
    {
      name: "an unknown key in a condition",
      checks: [{ name: "a", when: { labels: {} } }],
      path: ["spec", "checks", 0, "when", "labels"],
      message: 'unknown field "labels"',
    },
    { name: "checks not a list", checks: { name: "a" }, path: ["spec", "checks"], message: "must be a list of mappings, got a mapping" },
  ];
  for (const t of invalid) {
    it(`${t.name} is a compile issue`, () => {
      const r = compile({ name: "p", spec: { checks: t.checks } });
      assert.equal(r.policy, undefined);
      assert.deepEqual(
        r.issues.map((i) => i.path),
        [t.path],
      );
      assert.ok(r.issues[0]!.message.includes(t.message), r.issues[0]!.message);
    });
  }
});

describe("profiles", () => {
  let profiles: Map<string, unknown>;
  before(async () => {
    profiles = profileSources(await shippedProfiles());
  });

  it("profile: baseline includes the baseline checks, labelled baseline/<check>", () => {
    const p = policy({ name: "with-baseline", spec: { profile: "baseline" } }, profiles);
    assert.deepEqual(p.profiles, ["baseline"]);
    const findings = podRestrictionFindings(p, privilegedHostNet);
    assert.deepEqual(
      findings.map((f) => [f.rule, f.field]),
      [
        ["baseline/hostNamespaces", "spec.hostNetwork"],
        ["baseline/privileged", "spec.containers[0].securityContext.privileged"],
      ],
    );
    assert.deepEqual(podRestrictionFindings(p, compliant), []);
  });

  it("a profile's checks combine with the policy's own restrictions", () => {
    const p = policy({ name: "baseline-and-registry", spec: { profile: "baseline", ...trustedRegistry } }, profiles);
    // The profile's checks come first, then the policy's own restrictions.
    assert.deepEqual(
      podRestrictionFindings(p, privilegedHubImage).map((f) => f.rule),
      ["baseline/privileged", "spec.spec.containers[0].image.registry"],
    );
  });

  it("a profile-bound policy is judged by decidePodRestrictions like any other", () => {
    const index = new PodRestrictionIndex([policy({ name: "baseline-everywhere", spec: { profile: "baseline" } }, profiles)]);
    const d = decidePodRestrictions(index, privilegedHostNet, "default", {});
    assert.equal(d.allowed, false);
    assert.deepEqual(
      d.violations.map((v) => [v.policy, v.rule]),
      [
        ["baseline-everywhere", "baseline/hostNamespaces"],
        ["baseline-everywhere", "baseline/privileged"],
      ],
    );
  });

  it("an unknown profile is a compile issue naming the shipped ones", () => {
    const r = compile({ name: "p", spec: { profile: "strict" } }, profiles);
    assert.equal(r.policy, undefined);
    assert.deepEqual(
      r.issues.map((i) => i.path),
      [["spec", "profile"]],
    );
    assert.ok(r.issues[0]!.message.includes('unknown profile "strict"; shipped profiles: '), r.issues[0]!.message);
    assert.ok(r.issues[0]!.message.includes("baseline") && r.issues[0]!.message.includes("restricted"), r.issues[0]!.message);
  });

  it("a profile is unknown when no profiles are given", () => {
    const r = compile({ name: "p", spec: { profile: "baseline" } });
    assert.deepEqual(
      r.issues.map((i) => i.path),
      [["spec", "profile"]],
    );
    assert.ok(r.issues[0]!.message.includes('unknown profile "baseline"'));
  });

  it("a profile including itself is a compile issue", () => {
    const loop = new Map<string, unknown>([
      ["loop", { apiVersion: "imprimatur.dev/v1alpha1", kind: "PodRestriction", metadata: { name: "loop" }, spec: { profile: "loop" } }],
    ]);
    const r = compile({ name: "p", spec: { profile: "loop" } }, loop);
    assert.equal(r.policy, undefined);
    assert.ok(
      r.issues.some((i) => i.message.includes("includes itself")),
      JSON.stringify(r.issues),
    );
  });
});
