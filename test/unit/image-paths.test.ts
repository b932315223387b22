// ImagePolicy imagePaths (src/core/image-paths.ts and the extraction in src/core/admission-subject.ts): images
// that custom resources keep outside pod specs are found by JMESPath, located for denials and pins, reviewed
// by every image policy, and never judged as pods; what cannot be located denies.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { DEFAULT_SERVER_CONFIG } from "../../src/config/server-config.ts";
import type { AdmissionRequest } from "../../src/core/admission-review.ts";
import { renderReason } from "../../src/core/decision.ts";
import { compileImagePath, imagesAtPaths, parseKindSelector, pathsFor, selectsKind, type ImagePath } from "../../src/core/image-paths.ts";
import type { AdmissionCall } from "../../src/engine/admission-call.ts";
import { Engine } from "../../src/engine/engine.ts";
import { buildEngine } from "../../src/engine/engine-builder.ts";
import { parsePolicyText } from "../../src/policy/load-policies.ts";
import { renderPolicyError } from "../../src/policy/policy-error.ts";
import { profileSources, shippedProfiles } from "../../src/policy/profiles.ts";
import { imagePathResources } from "../../src/server/webhook-manifests.ts";
import { planOfObject, planOfRequest, validateSubject } from "../support/engine-review.ts";

function path(raw: { kinds?: string[]; path: string; keyField?: string; valueField?: string }): ImagePath {
  const compiled = compileImagePath({ kinds: raw.kinds ?? ["Task"], ...raw }, "p", ["spec", "imagePaths", 0]);
  assert.deepEqual(compiled.errors, []);
  return compiled.imagePath!;
}

const task = (spec: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({
  apiVersion: "tekton.dev/v1",
  kind: "Task",
  metadata: { name: "build", namespace: "ci", ...extra },
  spec,
});

describe("kind selectors", () => {
  it("accept Kind, version/Kind and group/version/Kind with * for any version", () => {
    assert.deepEqual(parseKindSelector("Task"), { kind: "Task" });
    assert.deepEqual(parseKindSelector("v1/Pod"), { group: "", version: "v1", kind: "Pod" });
    assert.deepEqual(parseKindSelector("tekton.dev/v1beta1/Task"), { group: "tekton.dev", version: "v1beta1", kind: "Task" });
    assert.deepEqual(parseKindSelector("argoproj.io/*/Workflow"), { group: "argoproj.io", kind: "Workflow" });
  });

  it("refuse anything else, saying what is expected", () => {
    assert.match(String(parseKindSelector("a/b/c/Task")), /is not Kind, version\/Kind or group\/version\/Kind/);
    assert.match(String(parseKindSelector("tekton.dev/one/Task")), /"one" is not an API version/);
    assert.match(String(parseKindSelector("Tekton_Dev/v1/Task")), /is not an API group/);
    assert.match(String(parseKindSelector("tekton.dev/v1/task-run")), /is not Kind/);
  });
});

describe("imagesAtPaths", () => {
  it("finds the images of the selected objects with their field paths, in path order, each field once", () => {
    const obj = task({
      steps: [
        { name: "a", image: "registry.example.com/a:1" },
        { name: "b", image: "registry.example.com/b:1" },
      ],
      sidecars: [{ name: "s", image: "redis:7" }],
    });
    const found = imagesAtPaths(obj, [path({ path: "{{ spec.steps[*] }}" }), path({ path: "{{ [spec.sidecars[], spec.steps[]][] }}" })]);
    assert.deepEqual(found.errors, []);
    assert.deepEqual(found.images, [
      { image: "registry.example.com/a:1", field: "spec.steps[0].image" },
      { image: "registry.example.com/b:1", field: "spec.steps[1].image" },
      { image: "redis:7", field: "spec.sidecars[0].image" },
    ]);
  });

  it("takes filters, single objects and another valueField", () => {
    const obj = task({ steps: [{ name: "a", ref: "x" }, { name: "b" }], builder: { name: "ko", from: "ko:0.17" } });
    assert.deepEqual(imagesAtPaths(obj, [path({ path: "{{ spec.builder }}", valueField: "from" })]).images, [{ image: "ko:0.17", field: "spec.builder.from" }]);
    assert.deepEqual(imagesAtPaths(obj, [path({ path: "{{ spec.steps[?name == 'b'] }}" })]).images, []); // no image field: not an image holder
  });

  it("denies a value that is not a string, showing it, rather than skipping it or calling it an empty image", () => {
    const found = imagesAtPaths(
      task({
        steps: [
          { name: "a", image: 42 },
          { name: "b", image: { repo: "x" } },
        ],
      }),
      [path({ path: "{{ spec.steps[*] }}" })],
    );
    assert.deepEqual(found.images, []);
    assert.deepEqual(found.errors, [
      { policy: "p", message: "imagePaths (spec.steps[*]) finds the number 42 at spec.steps[0].image, not an image reference" },
      { policy: "p", message: 'imagePaths (spec.steps[*]) finds the object {"repo":"x"} at spec.steps[1].image, not an image reference' },
    ]);
  });

  it("a holder whose image is an OCI image volume source is reviewed at image.reference: a path over volumes finds their images", () => {
    const obj = task({
      volumes: [
        { name: "cfg", configMap: { name: "c" } },
        { name: "model", image: { reference: "quay.io/m/llm:7b", pullPolicy: "IfNotPresent" } },
      ],
    });
    assert.deepEqual(imagesAtPaths(obj, [path({ path: "{{ spec.volumes[*] }}" })]).images, [
      { image: "quay.io/m/llm:7b", field: "spec.volumes[1].image.reference" },
    ]);
    // A source without a string reference is denied, showing what it holds.
    const broken = task({ volumes: [{ name: "model", image: { reference: 7 } }] });
    assert.deepEqual(imagesAtPaths(broken, [path({ path: "{{ spec.volumes[*] }}" })]).errors, [
      { policy: "p", message: "imagePaths (spec.volumes[*]) finds the number 7 at spec.volumes[0].image.reference, not an image reference" },
    ]);
  });

  it("a path that selects strings or computed objects cannot be located: an error naming the policy and why", () => {
    const obj = task({ steps: [{ name: "a", image: "a:1" }] });
    const strings = imagesAtPaths(obj, [path({ path: "{{ spec.steps[*].image }}" })]);
    assert.deepEqual(strings.images, []);
    assert.deepEqual(strings.errors, [
      { policy: "p", message: 'imagePaths (spec.steps[*].image) selects the string "a:1", not an object of the resource that holds "image"' },
    ]);
    const computed = imagesAtPaths(obj, [path({ path: "{{ spec.steps[*].{image: image} }}" })]);
    assert.match(computed.errors[0]!.message, /selects a computed object/);
  });

  it("an object under a field name with a dot cannot be named by a field path: an error", () => {
    const obj = task({ "steps.v2": [{ name: "a", image: "a:1" }] });
    const found = imagesAtPaths(obj, [path({ path: '{{ spec."steps.v2"[*] }}' })]);
    assert.deepEqual(found.images, []);
    assert.match(found.errors[0]!.message, /field name with "\.", "\[" or "\]"/);
  });

  it("a function on the wrong type at run time is an error, not a crash", () => {
    const found = imagesAtPaths(task({ steps: "oops" }), [path({ path: "{{ length(spec.steps[*]) }}" })]);
    assert.equal(found.errors.length, 1);
    assert.match(found.errors[0]!.message, /imagePaths \(length\(spec\.steps\[\*\]\)\)/);
  });
});

describe("imagePaths in an ImagePolicy", () => {
  it("mistakes are load errors with file, line and field", () => {
    const text = `apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: p}
spec:
  imagePaths:
    - kinds: ["tekton.dev/v1/Task"]
      path: "spec.steps[*]"
    - kinds: ["tekton.dev/latest/Task"]
      path: "{{ spec.steps[ }}"
      valueField: "a.b"
    - kinds: ["Task"]
      path: "{{ spec.steps }}"
      colour: blue
  rules: [{action: allow, images: ["*"]}]
`;
    const { errors } = parsePolicyText(text, "tasks.yaml");
    const rendered = errors.map(renderPolicyError);
    assert.equal(rendered.length, 1, rendered.join("\n"));
    assert.match(rendered[0]!, /^tasks\.yaml:13 \(document 1, spec\.imagePaths\[2\]\.colour\): unknown field "colour"/);
    const semantic = parsePolicyText(text.replace("      colour: blue\n", ""), "tasks.yaml").errors.map(renderPolicyError);
    assert.deepEqual(semantic.length, 4, semantic.join("\n"));
    assert.match(semantic[0]!, /^tasks\.yaml:7 \(document 1, spec\.imagePaths\[0\]\.path\): write the path as a JMESPath expression in \{\{ \}\}/);
    assert.match(semantic[1]!, /^tasks\.yaml:8 \(document 1, spec\.imagePaths\[1\]\.kinds\[0\]\): .*"latest" is not an API version/);
    assert.match(semantic[2]!, /^tasks\.yaml:9 \(document 1, spec\.imagePaths\[1\]\.path\): invalid JMESPath/);
    assert.match(semantic[3]!, /^tasks\.yaml:10 \(document 1, spec\.imagePaths\[1\]\.valueField\): "a\.b" must be one field name/);
  });
});

const POLICIES = `
apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: tasks}
spec:
  imagePaths:
    - {kinds: ["tekton.dev/v1/Task"], path: "{{ spec.steps[*] }}"}
    - {kinds: ["v1/Pod"], path: "{{ spec.containers[*] }}"}
  rules: [{action: allow, images: ["registry.example.com/*"]}]
  default: deny
  breakGlass: {allowed: true}
---
apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: no-latest}
spec:
  rules: [{action: deny, images: ["*:latest"]}]
  default: allow
---
apiVersion: imprimatur.dev/v1alpha1
kind: PodRestriction
metadata: {name: restricted}
spec: {profile: restricted}
`;

async function engine(): Promise<Engine> {
  const parsed = parsePolicyText(POLICIES, "inline.yaml", { profiles: profileSources(await shippedProfiles()) });
  assert.deepEqual(parsed.errors, []);
  return buildEngine({ config: structuredClone(DEFAULT_SERVER_CONFIG), policies: parsed.policies, offline: true });
}

const call: AdmissionCall = { endpoint: "validate", deadline: Date.now() + 60_000, dryRun: true };

function request(object: Record<string, unknown>, oldObject?: Record<string, unknown>): AdmissionRequest {
  return {
    uid: "u",
    operation: oldObject ? "UPDATE" : "CREATE",
    namespace: "ci",
    resource: { group: "tekton.dev", version: "v1", resource: "tasks" },
    object,
    ...(oldObject ? { oldObject } : {}),
  };
}

describe("the engine with imagePaths", () => {
  it("a Task's images are reviewed by every image policy and denied with their field; PodRestrictions do not judge it", async () => {
    const e = await engine();
    const plan = await planOfRequest(
      e,
      request(
        task({
          steps: [
            { name: "a", image: "registry.example.com/a:1" },
            { name: "b", image: "docker.io/b:latest" },
          ],
        }),
      ),
    );
    assert.ok(plan.review);
    const d = await validateSubject(e, plan.subject, call);
    assert.equal(d.allowed, false);
    assert.deepEqual(
      d.violations.map((v) => [v.policy, v.rule, v.field]),
      [
        ["tasks", "default", "spec.steps[1].image"],
        ["no-latest", "rules[0]", "spec.steps[1].image"],
      ],
    );
    const ok = await planOfRequest(e, request(task({ steps: [{ name: "a", image: "registry.example.com/a:1" }] })));
    assert.ok(ok.review);
    assert.equal((await validateSubject(e, ok.subject, call)).allowed, true, "the restricted profile must not judge a Task as a pod");
  });

  it("a path that cannot be located denies the Task in the declaring policy's name (fail closed)", async () => {
    const parsed = parsePolicyText(POLICIES.replace("{{ spec.steps[*] }}", "{{ spec.steps[*].image }}"), "inline.yaml", {
      profiles: profileSources(await shippedProfiles()),
    });
    const e = await buildEngine({ config: structuredClone(DEFAULT_SERVER_CONFIG), policies: parsed.policies, offline: true });
    const plan = await planOfRequest(e, request(task({ steps: [{ name: "a", image: "registry.example.com/a:1" }] })));
    assert.ok(plan.review);
    const d = await validateSubject(e, plan.subject, call);
    assert.equal(d.allowed, false);
    assert.match(renderReason(d.violations), /^request denied by policy tasks imagePaths: imagePaths \(spec\.steps\[\*\]\.image\) selects the string/);
  });

  it("a path that would double the object at every step ends at its cost limit and denies the Task with the reason", async () => {
    const doubling = `{{ spec.steps[*] | ${Array.from({ length: 40 }, () => "[@, @][]").join(" | ")} }}`;
    const parsed = parsePolicyText(POLICIES.replace("{{ spec.steps[*] }}", doubling), "inline.yaml", { profiles: profileSources(await shippedProfiles()) });
    assert.deepEqual(parsed.errors, []);
    const e = await buildEngine({ config: structuredClone(DEFAULT_SERVER_CONFIG), policies: parsed.policies, offline: true });
    const { decision } = await e.review({ kind: "admission", request: request(task({ steps: [{ name: "a", image: "registry.example.com/a:1" }] })) }, call);
    assert.equal(decision?.allowed, false);
    assert.match(
      renderReason(decision.violations),
      /^request denied by policy tasks imagePaths: imagePaths \(spec\.steps\[\*\] \| \[@, @\]\[\] .*\): JMESPath ".*": operation cancelled: actual cost limit exceeded: one evaluation may cost at most 1000000$/,
    );
  });

  it("paths are evaluated under the review's deadline: past it none runs, and the Task is denied with the reason", async () => {
    const e = await engine();
    const late: AdmissionCall = { ...call, deadline: Date.now() - 1 };
    const { decision } = await e.review({ kind: "admission", request: request(task({ steps: [{ name: "a", image: "registry.example.com/a:1" }] })) }, late);
    assert.equal(decision?.allowed, false);
    assert.match(
      renderReason(decision.violations),
      /imagePaths \(spec\.steps\[\*\]\): JMESPath "spec\.steps\[\*\]": evaluation cancelled: the review ran past its deadline/,
    );
  });

  it("an update of an object whose paths could not be located is judged only on what it brings (a finalizer can go)", async () => {
    const parsed = parsePolicyText(POLICIES.replace("{{ spec.steps[*] }}", "{{ spec.steps[*].image }}"), "inline.yaml", {
      profiles: profileSources(await shippedProfiles()),
    });
    const e = await buildEngine({ config: structuredClone(DEFAULT_SERVER_CONFIG), policies: parsed.policies, offline: true });
    const before = task({ steps: [{ name: "a", image: "registry.example.com/a:1" }] }, { finalizers: ["example.com/cleanup"] });
    const finalizerGone = await planOfRequest(e, request(task({ steps: [{ name: "a", image: "registry.example.com/a:1" }] }), before));
    assert.equal(finalizerGone.review, false, finalizerGone.review ? JSON.stringify(finalizerGone.subject.extractionErrors) : "");
    const another = await planOfRequest(
      e,
      request(
        task({
          steps: [
            { name: "a", image: "registry.example.com/a:1" },
            { name: "b", image: "registry.example.com/b:1" },
          ],
        }),
        before,
      ),
    );
    assert.ok(another.review);
    assert.equal((await validateSubject(e, another.subject, call)).allowed, false, "a holder the update adds is judged, and cannot be located");
  });

  it("an update that changes no image is not reviewed again; one that changes an image is", async () => {
    const e = await engine();
    const before = task({ steps: [{ name: "a", image: "docker.io/old:latest" }] });
    const relabelled = task({ steps: [{ name: "a", image: "docker.io/old:latest" }] }, { labels: { team: "x" } });
    const plan = await planOfRequest(e, request(relabelled, before));
    assert.equal(plan.review, false);
    const changed = await planOfRequest(e, request(task({ steps: [{ name: "a", image: "docker.io/new:latest" }] }), before));
    assert.ok(changed.review);
    assert.deepEqual(
      changed.subject.images.map((i) => i.field),
      ["spec.steps[0].image"],
    );
  });

  it("a Pod's containers named by a path too are reviewed once, as the pod's", async () => {
    const e = await engine();
    const pod = {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "p", namespace: "ci" },
      spec: { containers: [{ name: "c", image: "registry.example.com/a:1" }] },
    };
    const plan = await planOfObject(e, pod);
    assert.ok(plan.review);
    assert.equal(plan.subject.pods.length, 1);
    assert.deepEqual(
      plan.subject.images.map((i) => [i.field, i.pod]),
      [["spec.containers[0].image", 0]],
    );
  });

  it("break-glass annotations on the custom resource apply to its images", async () => {
    const e = await engine();
    const annotations = { "break-glass.image-policy.k8s.io/reason": "incident", "break-glass.image-policy.k8s.io/ticket": "OPS-1" };
    const overridden = await planOfRequest(e, request(task({ steps: [{ name: "a", image: "quay.io/tool:1" }] }, { annotations })));
    assert.ok(overridden.review);
    const d = await validateSubject(e, overridden.subject, call);
    assert.equal(d.allowed, true, renderReason(d.violations));
    assert.deepEqual(
      d.breakGlass?.overridden.map((v) => [v.policy, v.field]),
      [["tasks", "spec.steps[0].image"]],
    );
    const plain = await planOfRequest(e, request(task({ steps: [{ name: "a", image: "quay.io/tool:1" }] })));
    assert.ok(plain.review);
    assert.equal((await validateSubject(e, plain.subject, call)).allowed, false);
  });

  it("kinds the paths do not name are skipped", async () => {
    const e = await engine();
    const plan = await planOfObject(e, { ...task({ steps: [{ name: "a", image: "x:latest" }] }), apiVersion: "example.com/v1" });
    assert.equal(plan.review, false);
  });
});

describe("webhook rules for imagePaths kinds", () => {
  it("guess the resource from the kind, with * where the selector leaves group or version open", () => {
    const paths = [path({ kinds: ["tekton.dev/v1/Task", "tekton.dev/v1beta1/Task", "argoproj.io/*/WorkflowTemplate"], path: "{{ a }}" })];
    paths.push(path({ kinds: ["example.com/v1/Policy", "example.com/v1/Gateway", "example.com/v1/Ingress", "Runner"], path: "{{ b }}" }));
    assert.deepEqual(imagePathResources(paths), [
      { group: "tekton.dev", version: "v1", resource: "tasks" },
      { group: "tekton.dev", version: "v1beta1", resource: "tasks" },
      { group: "argoproj.io", version: "*", resource: "workflowtemplates" },
      { group: "example.com", version: "v1", resource: "policies" },
      { group: "example.com", version: "v1", resource: "gateways" },
      { group: "example.com", version: "v1", resource: "ingresses" },
      { group: "*", version: "*", resource: "runners" },
    ]);
  });
});

describe("image path edges", () => {
  it("versions and groups as Kubernetes writes them", () => {
    for (const ok of ["apps/v10/Deployment", "x.io/v1beta10/Task", "a/v1/Task"]) assert.equal(typeof parseKindSelector(ok), "object", ok);
    for (const bad of ["apps/v1x/Deployment", "apps/xv1/Deployment", "a_b/v1/Task"]) assert.equal(typeof parseKindSelector(bad), "string", bad);
  });

  it("a bad kind gives no image path; keyField and valueField default to name and image", () => {
    const bad = compileImagePath({ kinds: ["bad kind"], path: "{{ spec.steps[*] }}" }, "p", []);
    assert.equal(bad.imagePath, undefined);
    const defaults = path({ path: "{{ spec.steps[*] }}" });
    assert.deepEqual([defaults.keyField, defaults.valueField], ["name", "image"]);
    const given = path({ path: "{{ spec.steps[*] }}", keyField: "id", valueField: "ref" });
    assert.deepEqual([given.keyField, given.valueField], ["id", "ref"]);
  });

  it("kind selectors: any group, the core group, a group with or without a version", () => {
    assert.equal(selectsKind({ kind: "Task" }, "tekton.dev/v1", "Task"), true);
    assert.equal(selectsKind({ kind: "Task" }, "tekton.dev/v1", "Pipeline"), false);
    assert.equal(selectsKind({ group: "", kind: "Pod" }, "v1", "Pod"), true);
    assert.equal(selectsKind({ group: "", version: "v1", kind: "Pod" }, "v1", "Pod"), true);
    assert.equal(selectsKind({ group: "", version: "v2", kind: "Pod" }, "v1", "Pod"), false);
    assert.equal(selectsKind({ group: "tekton.dev", kind: "Task" }, "v1", "Task"), false);
    assert.equal(selectsKind({ group: "tekton.dev", version: "v1", kind: "Task" }, "tekton.dev/v1beta1", "Task"), false);
    const either = path({ kinds: ["Task", "Pipeline"], path: "{{ spec.steps[*] }}" });
    assert.equal(pathsFor([either], "tekton.dev/v1", "Pipeline").length, 1);
  });

  it("holders that are null, without the value field, or with a null value name no image", () => {
    const steps = path({ path: "{{ spec.steps }}" });
    assert.deepEqual(imagesAtPaths(task({ steps: [null, { name: "a" }, { name: "b", image: null }, { image: "x:1" }] }), [steps]), {
      images: [{ image: "x:1", field: "spec.steps[3].image" }],
      errors: [],
    });
  });

  it("what a wrong selection or value is, as the denial shows it", () => {
    const long = "a".repeat(90);
    const selected = imagesAtPaths(task({ steps: [long, 5, ["x"]] }), [path({ path: "{{ spec.steps[*] }}" })]).errors.map((e) => e.message);
    assert.deepEqual(selected, [
      `imagePaths (spec.steps[*]) selects the string "${"a".repeat(80)}…", not an object of the resource that holds "image"`,
      'imagePaths (spec.steps[*]) selects the number 5, not an object of the resource that holds "image"',
      'imagePaths (spec.steps[*]) selects an array, not an object of the resource that holds "image"',
    ]);
    const exact = imagesAtPaths(task({ steps: ["b".repeat(80)] }), [path({ path: "{{ spec.steps[*] }}" })]).errors[0]!.message;
    assert.match(exact, new RegExp(`the string "${"b".repeat(80)}",`));
    const values = imagesAtPaths(task({ steps: [{ image: ["x"] }, { image: true }, { image: { r: "c".repeat(90) } }, { image: { r: "d".repeat(72) } }] }), [
      path({ path: "{{ spec.steps[*] }}" }),
    ]).errors.map((e) => e.message);
    assert.deepEqual(values, [
      'imagePaths (spec.steps[*]) finds the list ["x"] at spec.steps[0].image, not an image reference',
      "imagePaths (spec.steps[*]) finds the boolean true at spec.steps[1].image, not an image reference",
      `imagePaths (spec.steps[*]) finds the object ${JSON.stringify({ r: "c".repeat(90) }).slice(0, 80)}… at spec.steps[2].image, not an image reference`,
      `imagePaths (spec.steps[*]) finds the object ${JSON.stringify({ r: "d".repeat(72) })} at spec.steps[3].image, not an image reference`,
    ]);
  });

  it("an image volume source whose reference is null is denied as null, not as an object", () => {
    // The holder's value is the source object, so the null is only met at image.reference: it is shown as what it is.
    const obj = task({ volumes: [{ name: "model", image: { reference: null } }] });
    assert.deepEqual(imagesAtPaths(obj, [path({ path: "{{ spec.volumes[*] }}" })]).errors, [
      { policy: "p", message: "imagePaths (spec.volumes[*]) finds the null null at spec.volumes[0].image.reference, not an image reference" },
    ]);
  });
});
