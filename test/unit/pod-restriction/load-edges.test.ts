// More edges of loading a PodRestriction: where each load error points, which fields take the pointer rules
// (metadata, the pod's name, an image's parts), a probe's exec command, spec.matchConstraints, and the
// denial that names a namespaceSelector whose namespace labels are unknown.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { decidePodRestrictions } from "../../../src/core/pod-restriction/pod-restriction-decision.ts";
import { compilePodRestriction, podRestrictionFindings } from "../../../src/core/pod-restriction/pod-restriction.ts";
import { PodRestrictionIndex } from "../../../src/core/pod-restriction/restriction-index.ts";
import { profileSources, shippedProfiles } from "../../../src/policy/profiles.ts";
import { APP, compileRestriction, fieldsOf, findingsFor, podUnder, restrictionOf } from "./edge-support.ts";

const DOC = { apiVersion: "imprimatur.dev/v1alpha1", kind: "PodRestriction", metadata: { name: "p" } };

/** Each load error as "path: message", without the known-fields list that unknown-field errors add. */
function loadErrors(raw: unknown): string[] {
  const r = compilePodRestriction(raw);
  assert.equal(r.policy, undefined, "a load error stops the policy");
  return r.issues.map((i) => `${i.path.join(".")}: ${i.message.replace(/; known fields: .*$/, "")}`);
}
const specErrors = (spec: unknown) => loadErrors({ ...DOC, spec });

describe("where load errors point", () => {
  it("an unknown top-level field is named at the top, metadata.labels is known", () => {
    assert.deepEqual(loadErrors({ ...DOC, bogus: 1 }), ['bogus: unknown field "bogus"']);
    assert.ok(compilePodRestriction({ ...DOC, metadata: { name: "p", labels: { team: "a" } } }).policy);
  });

  it("a PodSpec field restricted under securityContext here says so, where it goes", () => {
    assert.deepEqual(specErrors({ spec: { hostNetwork: { require: false }, hostPID: { require: false } } }), [
      "spec.spec.hostNetwork: unknown field \"hostNetwork\" here: PodRestrictions restrict the PodSpec's hostNetwork under securityContext, with the pod's other security settings (spec.spec.securityContext.hostNetwork)",
      "spec.spec.hostPID: unknown field \"hostPID\" here: PodRestrictions restrict the PodSpec's hostPID under securityContext, with the pod's other security settings (spec.spec.securityContext.hostPID)",
    ]);
    for (const field of ["hostIPC", "shareProcessNamespace"]) {
      assert.deepEqual(specErrors({ spec: { [field]: { require: false } } }), [
        `spec.spec.${field}: unknown field "${field}" here: PodRestrictions restrict the PodSpec's ${field} under securityContext, with the pod's other security settings (spec.spec.securityContext.${field})`,
      ]);
    }
    assert.ok(compilePodRestriction({ ...DOC, spec: { spec: { securityContext: { hostNetwork: { require: false } } } } }).policy, "where it goes, it loads");
    assert.deepEqual(specErrors({ spec: { hostNetwerk: {} } }), ['spec.spec.hostNetwerk: unknown field "hostNetwerk"'], "other unknown fields as before");
  });

  it("spec.clusters that is not a list is named there", () => {
    assert.deepEqual(specErrors({ clusters: "prod" }), ['spec.clusters: must be a list of strings, got "prod"']);
  });

  it("an image restriction that is not a mapping, or whose part is not one, is a load error where it is written", () => {
    assert.deepEqual(specErrors({ spec: { containers: [{ image: ["nginx"] }] } }), ['spec.spec.containers.0.image.0: must be a mapping, got "nginx"']);
    assert.deepEqual(specErrors({ spec: { containers: [{ image: { tag: "latest" } }] } }), [
      'spec.spec.containers.0.image.tag: must be a mapping, got "latest"',
    ]);
  });

  it("matchExpressions values that are not a list are named at values", () => {
    assert.deepEqual(loadErrors({ ...DOC, binding: { namespaceSelector: { matchExpressions: [{ key: "team", operator: "In", values: "a" }] } }, spec: {} }), [
      'binding.namespaceSelector.matchExpressions.0.values: must be a list of strings, got "a"',
    ]);
  });

  it("a selector's unknown operator (the schema's) and bad label key (the compiler's) are named where written, in the binding and in matchConstraints", () => {
    const badOperator = { matchExpressions: [{ key: "team", operator: "in", values: ["a"] }] };
    const badKey = {
      matchExpressions: [
        { key: "team", operator: "In", values: ["a"] },
        { key: "-team", operator: "Exists" },
      ],
    };
    const expected = (at: string) => ({
      operator: [`${at}.matchExpressions.0.operator: must be one of "In", "NotIn", "Exists", "DoesNotExist", got "in"`],
      key: [
        `${at}.matchExpressions.1.key: "-team" is not a label key: its name must be at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit`,
      ],
    });
    const inBinding = (selector: unknown) => loadErrors({ ...DOC, binding: { namespaceSelector: selector }, spec: {} });
    const inConstraints = (selector: unknown) => specErrors({ matchConstraints: { objectSelector: selector } });
    for (const [errors, at] of [
      [inBinding, "binding.namespaceSelector"],
      [inConstraints, "spec.matchConstraints.objectSelector"],
    ] as const) {
      assert.deepEqual(errors(badOperator), expected(at).operator);
      assert.deepEqual(errors(badKey), expected(at).key);
    }
  });
});

describe("which fields take the pointer rules", () => {
  it("metadata is not a pointer, nor is the pod's name: nil rules on them are load errors", () => {
    assert.deepEqual(specErrors({ metadata: { forbidNil: true } }), ['spec.metadata.forbidNil: unknown field "forbidNil"']);
    assert.deepEqual(specErrors({ metadata: { name: { forbidNil: true } } }), [
      "spec.metadata.name.forbidNil: this field is not a pointer in the Pod API (unset reads as its zero value), so nil rules do not apply",
    ]);
  });

  it("an image's tag and digest may be unset, its registry and repository may not", () => {
    const digestOnly = restrictionOf({ spec: { containers: [{ image: { tag: { requireNil: true } } }] } });
    const pinned = `registry.example.com/app@sha256:${"a".repeat(64)}`;
    assert.deepEqual(findingsFor(digestOnly, { containers: [{ name: "app", image: pinned }] }), []);
    assert.deepEqual(fieldsOf(findingsFor(digestOnly, { containers: [APP] })), ['spec.containers[0].image (tag): is set to "1.0"; must be unset']);

    const withDigest = restrictionOf({ spec: { containers: [{ image: { digest: { forbidNil: true } } }] } });
    assert.deepEqual(fieldsOf(findingsFor(withDigest, { containers: [APP] })), ["spec.containers[0].image (digest): is unset; must be set"]);
    assert.deepEqual(findingsFor(withDigest, { containers: [{ name: "app", image: pinned }] }), []);

    for (const part of ["registry", "repository"]) {
      assert.deepEqual(specErrors({ spec: { containers: [{ image: { [part]: { forbidNil: true } } }] } }), [
        `spec.spec.containers.0.image.${part}.forbidNil: this field is not a pointer in the Pod API (unset reads as its zero value), so nil rules do not apply`,
      ]);
    }
  });
});

describe("struct fields", () => {
  it("a string or string-list field restriction that is not a mapping is a load error, not a crash", () => {
    assert.deepEqual(specErrors({ spec: { restartPolicy: "Always" } }), ['spec.spec.restartPolicy: must be a mapping, got "Always"']);
    assert.deepEqual(specErrors({ spec: { containers: [{ livenessProbe: { exec: { command: "sh" } } }] } }), [
      'spec.spec.containers.0.livenessProbe.exec.command: must be a mapping, got "sh"',
    ]);
  });

  it("an absent struct that forbidNil requires is reported as unset, with nothing more", () => {
    const p = restrictionOf({ spec: { os: { forbidNil: true } } });
    assert.deepEqual(fieldsOf(findingsFor(p, { containers: [APP] })), ["spec.os: is unset; must be set"]);
  });

  it("a null struct that allowNil admits has no field checked", () => {
    const p = restrictionOf({ spec: { containers: [{ securityContext: { allowNil: true, runAsUser: { ranges: [{ min: 1 }] } } }] } });
    assert.deepEqual(findingsFor(p, { containers: [{ ...APP, securityContext: null }] }), []);
    assert.deepEqual(fieldsOf(findingsFor(p, { containers: [{ ...APP, securityContext: {} }] })), [
      "spec.containers[0].securityContext.runAsUser: is unset; must be set (at least 1)",
    ]);
  });

  it("a port's absent hostPort reads as 0, as the API server sees it", () => {
    const p = restrictionOf({ spec: { containers: [{ ports: { hostPort: { ranges: [{ min: 1, max: 100 }] } } }] } });
    assert.deepEqual(fieldsOf(findingsFor(p, { containers: [{ ...APP, ports: [{ containerPort: 80 }] }] })), [
      "spec.containers[0].ports[0].hostPort: is 0; must be from 1 to 100",
    ]);
  });
});

describe("checks", () => {
  it("a check, a when or an unless that is not a mapping is a load error where it is written", () => {
    assert.deepEqual(specErrors({ checks: ["x"] }), ['spec.checks.0: must be a mapping, got "x"']);
    assert.deepEqual(specErrors({ checks: [{ name: "c", when: "x" }] }), ['spec.checks.0.when: must be a mapping, got "x"']);
    assert.deepEqual(specErrors({ checks: [{ name: "c", unless: { spec: { bogus: 1 } } }] }), ['spec.checks.0.unless.spec.bogus: unknown field "bogus"']);
    assert.deepEqual(specErrors({ checks: [{ name: "c", overrides: "x" }] }), ['spec.checks.0.overrides: must be a list of strings, got "x"']);
  });
});

describe("pods of which only the containers are known", () => {
  it("every check applies: its when and unless are not evaluated", () => {
    const p = restrictionOf({
      checks: [
        {
          name: "trusted-only",
          when: { spec: { containers: { image: { registry: { allowed: ["trusted.example"] } } } } },
          spec: { containers: { securityContext: { privileged: { allowNil: true, require: false } } } },
        },
      ],
    });
    const pod = { ...podUnder({ containers: [{ name: "app", image: "other.example/app:1", securityContext: { privileged: true } }] }), onlyContainers: true };
    assert.deepEqual(fieldsOf(podRestrictionFindings(p, pod)), ["spec.containers[0].securityContext.privileged: is true; must be false"]);
  });
});

describe("null values", () => {
  it("a container field set to null is unset: the pod's value is inherited", () => {
    const p = restrictionOf({ spec: { containers: [{ securityContext: { runAsUser: { ranges: [{ min: 1 }] } } }] } });
    const spec = { securityContext: { runAsUser: 0 }, containers: [{ ...APP, securityContext: { runAsUser: null } }] };
    assert.deepEqual(fieldsOf(findingsFor(p, spec)), [
      "spec.securityContext.runAsUser: is 0; must be at least 1 (set at pod level, effective for spec.containers[0])",
    ]);
  });
});

describe("unset values", () => {
  it("under forbidNil, an unset boolean or number with no other rule is only 'unset'", () => {
    const p = restrictionOf({ spec: { automountServiceAccountToken: { forbidNil: true }, activeDeadlineSeconds: { forbidNil: true } } });
    assert.deepEqual(fieldsOf(findingsFor(p, { containers: [APP] })), [
      "spec.activeDeadlineSeconds: is unset; must be set",
      "spec.automountServiceAccountToken: is unset; must be set",
    ]);
  });

  it("requireEmpty that is not a boolean is a load error naming it; numeric and boolean restrictions must be mappings", () => {
    assert.deepEqual(specErrors({ spec: { nodeSelector: { requireEmpty: "yes" } } }), [
      'spec.spec.nodeSelector.requireEmpty: must be true or false, got "yes"',
    ]);
    assert.deepEqual(specErrors({ spec: { activeDeadlineSeconds: 5 } }), ["spec.spec.activeDeadlineSeconds: must be a mapping, got 5"]);
  });

  it("the pod's os.name is not a pointer: nil rules on it are load errors", () => {
    assert.deepEqual(specErrors({ spec: { os: { name: { forbidNil: true } } } }), [
      "spec.spec.os.name.forbidNil: this field is not a pointer in the Pod API (unset reads as its zero value), so nil rules do not apply",
    ]);
  });
});

describe("volumes", () => {
  it("image volumes are not held to the containers' image alternatives when one of them leaves the image free", () => {
    const p = restrictionOf({ spec: { containers: [{ image: { registry: { allowed: ["registry.example.com"] } } }, { image: [] }] } });
    const spec = { containers: [APP], volumes: [{ name: "data", image: { reference: "evil.example.org/x:1" } }] };
    assert.deepEqual(findingsFor(p, spec), []);
  });

  it("an empty list of volume restrictions restricts nothing", () => {
    const p = restrictionOf({ spec: { volumes: [] } });
    assert.deepEqual(findingsFor(p, { containers: [APP], volumes: [{ name: "data", hostPath: { path: "/var/data" } }] }), []);
  });
});

describe("probes", () => {
  it("an exec probe's command is restricted element by element", () => {
    const p = restrictionOf({ spec: { containers: [{ livenessProbe: { exec: { command: { forbidden: ["sh"] } } } }] } });
    const probed = { ...APP, livenessProbe: { exec: { command: ["sh", "-c", "true"] } } };
    assert.deepEqual(fieldsOf(findingsFor(p, { containers: [probed] })), ['spec.containers[0].livenessProbe.exec.command[0]: is "sh", which is forbidden']);
  });
});

describe("spec.matchConstraints", () => {
  it("is read into the policy's request match, and its errors are load errors", () => {
    const r = compileRestriction({
      matchConstraints: { objectSelector: { matchLabels: { team: "a" } } },
      matchConditions: [{ name: "c", expression: "true" }],
    });
    assert.deepEqual(r.issues, []);
    assert.deepEqual(r.policy?.match?.objectSelector, { matchLabels: { team: "a" } });
    assert.ok(r.policy?.match?.matchConditions);
    assert.deepEqual(specErrors({ matchConstraints: "pods" }), ['spec.matchConstraints: must be a mapping, got "pods"']);
  });
});

describe("checks that override a profile's", () => {
  it("a check of the policy may only replace a check the included profile has", async () => {
    const profiles = profileSources(await shippedProfiles());
    const r = compilePodRestriction(
      {
        ...DOC,
        spec: { profile: "baseline", checks: [{ name: "mine", overrides: ["noSuchCheck"], spec: { securityContext: { hostNetwork: { require: false } } } }] },
      },
      { profiles },
    );
    assert.equal(r.policy, undefined);
    assert.deepEqual(
      r.issues.map((i) => `${i.path.join(".")}: ${i.message}`),
      ['spec.checks.0.overrides.0: names "noSuchCheck", which is not a check of profile "baseline"'],
    );
  });
});

describe("a namespaceSelector whose namespace labels are unknown", () => {
  it("denies, writing out the selector's expressions", () => {
    const r = compilePodRestriction({
      ...DOC,
      binding: {
        namespaceSelector: {
          matchExpressions: [
            { key: "team", operator: "In", values: ["a", "b"] },
            { key: "legacy", operator: "DoesNotExist" },
          ],
        },
      },
      spec: { spec: { securityContext: { hostNetwork: { require: false } } } },
    });
    assert.ok(r.policy, JSON.stringify(r.issues));
    const decision = decidePodRestrictions(new PodRestrictionIndex([r.policy]), podUnder({ containers: [APP] }), "apps", undefined);
    assert.equal(decision.allowed, false);
    assert.deepEqual(
      decision.violations.map((v) => v.message),
      [
        'the labels of namespace "apps" are unknown, so whether this PodRestriction applies (selector team in (a,b),!legacy) cannot be decided; ' +
          "give the labels: serve reads them through the Kubernetes API (--kubeconfig, or in a pod) or --namespaces FILE; check and test take --namespaces FILE or --namespace-labels NAMESPACE:KEY=VALUE, verify --namespace-labels",
      ],
    );
  });
});
