// Where objects keep their pods (src/core/workload-templates.ts): the Pod itself, built-in workloads' templates,
// and custom resources' templates and pod specs at the paths the server config names.
import assert from "node:assert/strict";
import { test } from "node:test";
import { checkTemplatePath, podsInObject } from "../../src/core/workload-templates.ts";

test("template paths: field names separated by dots, [*] after a list field", () => {
  for (const ok of ["spec.template", "template", "spec.tasks[*].template", "spec.tasks[*].steps[*].pod_spec", "a1.B2"])
    assert.equal(checkTemplatePath(ok), undefined, ok);
  for (const bad of ["", "spec.", ".spec", "spec..template", "spec.tasks[0]", "spec.tasks[*]x", "spec/template", "spec.tasks[*].", "x spec", "spec.template "])
    assert.equal(
      checkTemplatePath(bad),
      `invalid path ${JSON.stringify(bad)}: use field names separated by ".", with [*] after a list field (e.g. spec.tasks[*].template)`,
      bad,
    );
});

test("a Pod is its own pod; a built-in workload's pods are its templates, matched by group and kind", () => {
  const spec = { containers: [{ name: "a", image: "nginx" }] };
  assert.deepEqual(podsInObject({ apiVersion: "v1", kind: "Pod", metadata: { name: "p" }, spec }), [
    { metadata: { value: { name: "p" }, field: "metadata" }, spec: { value: spec, field: "spec" }, isTemplate: false },
  ]);
  // A Pod of another group is not a Pod.
  assert.deepEqual(podsInObject({ apiVersion: "example.com/v1", kind: "Pod", spec }), []);
  const template = { metadata: { labels: { a: "b" } }, spec };
  assert.deepEqual(podsInObject({ apiVersion: "batch/v1", kind: "CronJob", spec: { jobTemplate: { spec: { template } } } }), [
    {
      metadata: { value: template.metadata, field: "spec.jobTemplate.spec.template.metadata" },
      spec: { value: spec, field: "spec.jobTemplate.spec.template.spec" },
      isTemplate: true,
    },
  ]);
  assert.deepEqual(
    podsInObject({ apiVersion: "v1", kind: "PodTemplate", template }).map((p) => p.spec.field),
    ["template.spec"],
  );
  // A kind in the wrong group, an apiVersion that is no string, and objects that run no pods: nothing.
  assert.deepEqual(podsInObject({ apiVersion: "v1", kind: "Deployment", spec: { template } }), []);
  assert.deepEqual(podsInObject({ apiVersion: 1, kind: "Deployment", spec: { template } }), []);
  assert.deepEqual(podsInObject({ apiVersion: "v1", kind: "ConfigMap" }), []);
  // A workload without its template yet: no pod.
  assert.deepEqual(podsInObject({ apiVersion: "apps/v1", kind: "Deployment", spec: {} }), []);
  assert.deepEqual(podsInObject({ apiVersion: "apps/v1", kind: "Deployment", spec: { template: null } }), []);
});

test("custom resources: templates and pod specs at every element of a [*] path", () => {
  const kinds = [{ group: "tekton.dev", kind: "Pipeline", templates: ["spec.tasks[*].template"], podSpecs: ["spec.tasks[*].podSpec", "spec.extra"] }];
  const obj = {
    apiVersion: "tekton.dev/v1",
    kind: "Pipeline",
    spec: {
      tasks: [
        { template: { spec: { containers: [] } }, podSpec: { containers: [{ image: "a" }] } },
        { name: "no template" },
        { template: { metadata: { name: "t" } } },
      ],
      extra: { containers: [] },
    },
  };
  assert.deepEqual(podsInObject(obj, kinds), [
    {
      metadata: { value: undefined, field: "spec.tasks[0].template.metadata" },
      spec: { value: { containers: [] }, field: "spec.tasks[0].template.spec" },
      isTemplate: true,
    },
    {
      metadata: { value: { name: "t" }, field: "spec.tasks[2].template.metadata" },
      spec: { value: undefined, field: "spec.tasks[2].template.spec" },
      isTemplate: true,
    },
    { metadata: { value: undefined, field: "metadata" }, spec: { value: { containers: [{ image: "a" }] }, field: "spec.tasks[0].podSpec" }, isTemplate: true },
    { metadata: { value: undefined, field: "metadata" }, spec: { value: { containers: [] }, field: "spec.extra" }, isTemplate: true },
  ]);
  // Without the kind registered, or in another group, the resource has no pods; a [*] path over a non-list finds none.
  assert.deepEqual(podsInObject(obj), []);
  assert.deepEqual(podsInObject({ ...obj, apiVersion: "other.dev/v1" }, kinds), []);
  assert.deepEqual(podsInObject({ ...obj, spec: { tasks: { template: {} } } }, kinds), []);
  // Inherited properties are not fields of the object.
  assert.deepEqual(podsInObject({ ...obj, spec: Object.create({ extra: { containers: [] } }) as Record<string, unknown> }, kinds), []);
});

test("every built-in controller's template is a pod; a template that is not an object has no metadata or spec", () => {
  const template = { metadata: { labels: { a: "b" } }, spec: { containers: [] } };
  for (const [group, kind] of [
    ["apps", "ReplicaSet"],
    ["apps", "StatefulSet"],
    ["", "ReplicationController"],
  ] as const) {
    const apiVersion = group ? `${group}/v1` : "v1";
    const pods = podsInObject({ apiVersion, kind, spec: { template } });
    assert.deepEqual(pods, [
      {
        metadata: { value: template.metadata, field: "spec.template.metadata" },
        spec: { value: template.spec, field: "spec.template.spec" },
        isTemplate: true,
      },
    ]);
    assert.deepEqual(podsInObject({ apiVersion: "x.io/v1", kind, spec: { template } }), [], `${kind} of another group`);
  }
  assert.deepEqual(podsInObject({ apiVersion: "apps/v1", kind: "Deployment", spec: { template: 5 } }), [
    { metadata: { value: undefined, field: "spec.template.metadata" }, spec: { value: undefined, field: "spec.template.spec" }, isTemplate: true },
  ]);
  // A Pod without apiVersion is read as the core group's.
  assert.equal(podsInObject({ kind: "Pod", spec: {} }).length, 1);
});
