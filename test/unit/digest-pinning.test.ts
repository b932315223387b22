import { test } from "node:test";
import assert from "node:assert/strict";
import { admissionResponse } from "../../src/core/admission-review.ts";
import { imagesToPin, pinningDecision, PINNED_IMAGES_ANNOTATION, type PinTarget, type Resolution } from "../../src/core/image-policy/digest-pinning.ts";
import { evaluateImagePolicies } from "../../src/core/image-policy/image-policy.ts";
import { escapePointerSegment, fieldPathToPointer } from "../../src/core/primitives/field-path.ts";
import { setAnnotationPatch } from "../../src/core/pod-locations.ts";
import { parsePolicyText } from "../../src/policy/load-policies.ts";
import { imagePolicies } from "../support/image-policies.ts";

const D1 = `sha256:${"1".repeat(64)}`;
const D2 = `sha256:${"2".repeat(64)}`;

const pinning = imagePolicies(`
apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: pin-internal}
spec:
  rules:
    - {action: deny, images: ["registry.example.com/banned/*"]}
    - {action: allow, images: ["registry.example.com/*"], digestMutate: true, digestVerify: true}
    - {action: allow, images: ["docker.io/*"]}
  default: deny
---
apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: labelled}
spec:
  namespaceSelector: {matchLabels: {pin: "yes"}}
  rules:
    - {action: allow, images: ["quay.io/*"], digestMutate: true}
  default: allow
`);

const at = (images: string[], pod = 0, prefix = "spec.") => images.map((image, i) => ({ image, field: `${prefix}containers[${i}].image`, pod }));

test("imagesToPin: only images allowed by a digestMutate rule, without a digest, in policies that apply", () => {
  const targets = imagesToPin(
    pinning,
    "team-a",
    at([
      "registry.example.com/app:1.0",
      `registry.example.com/app:1.0@${D1}`,
      "registry.example.com/banned/x:1",
      "nginx:1.25",
      "quay.io/org/tool:2",
      "NOT A REFERENCE",
    ]),
    {},
  );
  assert.deepEqual(
    targets.map((t) => [t.image, t.policy, t.rule, t.field]),
    [["registry.example.com/app:1.0", "pin-internal", "rules[1]", "spec.containers[0].image"]],
  );
  assert.equal(targets[0]!.ref.repository, "app");

  // With the namespace labels known, the selector-bound policy asks too; unknown labels ask nothing (validation denies).
  const labelled = imagesToPin(pinning, "team-a", at(["quay.io/org/tool:2"]), { namespaceLabels: { pin: "yes" } });
  assert.deepEqual(
    labelled.map((t) => t.policy),
    ["labelled"],
  );
});

function target(image: string, field: string, pod = 0): PinTarget {
  const [t] = imagesToPin(pinning, "ns", [{ image, field, pod }], {});
  assert.ok(t, `expected ${image} to be a pin target`);
  return t;
}

test("mutate: patches replace the image with tag@digest and record the pin on the pod's annotations", () => {
  const targets = [target("registry.example.com/app:1.0", "spec.containers[0].image"), target("registry.example.com/init", "spec.initContainers[0].image")];
  const resolutions: Resolution[] = [
    { ok: true, digest: D1, credentialSource: "secret ns/regcred" },
    { ok: true, digest: D2, credentialSource: "anonymous" },
  ];
  const { decision, pinned } = pinningDecision(targets, resolutions, [{ value: { name: "p" }, field: "metadata" }], { mode: "mutate", failOpen: false });
  assert.equal(decision.allowed, true);
  assert.deepEqual(
    pinned.map((p) => p.pinned),
    [`registry.example.com/app:1.0@${D1}`, `registry.example.com/init@${D2}`],
  );
  const record = { "registry.example.com/app:1.0": `registry.example.com/app:1.0@${D1}`, "registry.example.com/init": `registry.example.com/init@${D2}` };
  assert.deepEqual(decision.patches, [
    { op: "replace", path: "/spec/containers/0/image", value: `registry.example.com/app:1.0@${D1}` },
    { op: "replace", path: "/spec/initContainers/0/image", value: `registry.example.com/init@${D2}` },
    { op: "add", path: "/metadata/annotations", value: { [PINNED_IMAGES_ANNOTATION]: JSON.stringify(record) } },
  ]);
  assert.deepEqual(JSON.parse(decision.auditAnnotations["pinned-images"]!), record);
  assert.deepEqual(JSON.parse(decision.auditAnnotations["pull-credentials"]!), {
    "registry.example.com/app:1.0": "secret ns/regcred",
    "registry.example.com/init": "anonymous",
  });
});

test("mutate: existing annotations get one escaped key, earlier pins are kept, a template without metadata gets some", () => {
  const t = target("registry.example.com/app:2", "spec.template.spec.containers[1].image");
  const earlier = JSON.stringify({ "registry.example.com/side:1": `registry.example.com/side:1@${D2}` });
  const withAnnotations = pinningDecision(
    [t],
    [{ ok: true, digest: D1, credentialSource: "anonymous" }],
    [{ value: { annotations: { a: "b", [PINNED_IMAGES_ANNOTATION]: earlier } }, field: "spec.template.metadata" }],
    { mode: "mutate", failOpen: false },
  );
  const annotationPatch = withAnnotations.decision.patches!.at(-1)!;
  assert.equal(annotationPatch.path, "/spec/template/metadata/annotations/imprimatur.dev~1pinned-images");
  assert.deepEqual(JSON.parse(annotationPatch.value as string), {
    "registry.example.com/side:1": `registry.example.com/side:1@${D2}`,
    "registry.example.com/app:2": `registry.example.com/app:2@${D1}`,
  });

  const noMetadata = pinningDecision([t], [{ ok: true, digest: D1, credentialSource: "anonymous" }], [{ value: undefined, field: "spec.template.metadata" }], {
    mode: "mutate",
    failOpen: false,
  });
  assert.deepEqual(noMetadata.decision.patches!.at(-1), {
    op: "add",
    path: "/spec/template/metadata",
    value: { annotations: { [PINNED_IMAGES_ANNOTATION]: JSON.stringify({ "registry.example.com/app:2": `registry.example.com/app:2@${D1}` }) } },
  });

  const nowhere = pinningDecision([t], [{ ok: true, digest: D1, credentialSource: "anonymous" }], [undefined], { mode: "mutate", failOpen: false });
  assert.deepEqual(
    nowhere.decision.patches!.map((p) => p.op),
    ["replace"],
    "no metadata to record in: only the image is pinned",
  );
});

test('mutate: an earlier pin of an image named "undefined" is kept like any other', () => {
  // "undefined" is a valid image (docker.io/library/undefined): a record keyed by it is an earlier pin, not an
  // absent value, and pinning another container must not drop it.
  const t = target("registry.example.com/app:2", "spec.containers[0].image");
  const earlier = JSON.stringify({ undefined: `undefined@${D2}` });
  const { decision } = pinningDecision(
    [t],
    [{ ok: true, digest: D1, credentialSource: "anonymous" }],
    [{ value: { annotations: { [PINNED_IMAGES_ANNOTATION]: earlier } }, field: "metadata" }],
    { mode: "mutate", failOpen: false },
  );
  assert.deepEqual(JSON.parse(decision.patches!.at(-1)!.value as string), {
    undefined: `undefined@${D2}`,
    "registry.example.com/app:2": `registry.example.com/app:2@${D1}`,
  });
});

test("record mode resolves and records, and never patches", () => {
  const t = target("registry.example.com/app:1.0", "spec.containers[0].image");
  const { decision } = pinningDecision([t], [{ ok: true, digest: D1, credentialSource: "authfile" }], [{ value: {}, field: "metadata" }], {
    mode: "record",
    failOpen: false,
  });
  assert.equal(decision.allowed, true);
  assert.equal(decision.patches, undefined);
  assert.deepEqual(JSON.parse(decision.auditAnnotations["resolved-images"]!), { "registry.example.com/app:1.0": `registry.example.com/app:1.0@${D1}` });
  assert.equal(decision.auditAnnotations["pinned-images"], undefined);
});

test("an unresolved tag is denied when failing closed, and admitted with a warning and a fail-open record when failing open", () => {
  const targets = [target("registry.example.com/app:1.0", "spec.containers[0].image"), target("registry.example.com/db:3", "spec.containers[1].image")];
  const resolutions: Resolution[] = [
    { ok: true, digest: D1, credentialSource: "anonymous" },
    { ok: false, error: "unauthorized: no credential for registry.example.com/db" },
  ];
  const closed = pinningDecision(targets, resolutions, [{ value: {}, field: "metadata" }], { mode: "mutate", failOpen: false });
  assert.equal(closed.decision.allowed, false);
  assert.equal(closed.decision.patches, undefined, "a denied request carries no patch");
  assert.deepEqual(
    closed.decision.violations.map((v) => [v.policy, v.rule, v.image, v.field]),
    [["pin-internal", "rules[1].digestMutate", "registry.example.com/db:3", "spec.containers[1].image"]],
  );
  assert.match(closed.decision.violations[0]!.message, /unauthorized: no credential.*fails closed.*pull secret/);

  const open = pinningDecision(targets, resolutions, [{ value: {}, field: "metadata" }], { mode: "mutate", failOpen: true });
  assert.equal(open.decision.allowed, true);
  assert.deepEqual(open.decision.failOpen, [
    { backend: "registry/registry.example.com", error: "registry.example.com/db:3: unauthorized: no credential for registry.example.com/db" },
  ]);
  assert.match(open.decision.warnings[0]!, /admitted without a digest/);
  assert.equal(open.decision.auditAnnotations["fail-open"], "true");
  assert.deepEqual(
    open.decision.patches!.map((p) => p.path),
    ["/spec/containers/0/image", "/metadata/annotations"],
    "the resolved image is still pinned",
  );
});

test("typed registry failures: a registry's answer (not-found, unauthorized, digest-mismatch) denies even when failing open; no answer follows the failure policy", () => {
  const t = [target("registry.example.com/app:9", "spec.containers[0].image")];
  const open = { mode: "mutate" as const, failOpen: true };
  for (const code of ["not-found", "unauthorized", "digest-mismatch"]) {
    const d = pinningDecision(t, [{ ok: false, error: "manifest unknown", code }], [{ value: {}, field: "metadata" }], open).decision;
    assert.equal(d.allowed, false, code);
    assert.match(d.violations[0]!.message, new RegExp(`could not be resolved to a digest \\(${code}: manifest unknown\\); that is the registry's answer`));
  }
  for (const code of ["unreachable", "timeout", "unavailable"]) {
    const d = pinningDecision(t, [{ ok: false, error: "connection refused", code }], [{ value: {}, field: "metadata" }], open).decision;
    assert.equal(d.allowed, true, code);
    assert.equal(d.auditAnnotations["fail-open"], "true");
  }
});

test("a refused address denies even when failing open, with the refusal as the reason and no advice about pull secrets", () => {
  const t = [target("registry.example.com/app:9", "spec.containers[0].image")];
  const refusal = "refused to connect to https://registry.example.com: registry.example.com resolves to 127.0.0.1, a loopback address: refused";
  const d = pinningDecision(t, [{ ok: false, error: refusal, code: "address-refused" }], [{ value: {}, field: "metadata" }], {
    mode: "mutate",
    failOpen: true,
  }).decision;
  assert.equal(d.allowed, false);
  assert.equal(d.violations[0]!.message, `the tag could not be resolved to a digest (address-refused: ${refusal}); denied whatever the failure policy`);
});

test("a pod of a cluster the server cannot read denies even when failing open: its pull secrets are never another cluster's", () => {
  const t = [target("registry.example.com/app:9", "spec.containers[0].image")];
  const reason = 'the pod\'s pull secrets could not be read: cluster "b" has no kubeconfig on this server';
  const d = pinningDecision(t, [{ ok: false, error: reason, code: "cluster-unreadable" }], [{ value: {}, field: "metadata" }], {
    mode: "mutate",
    failOpen: true,
  }).decision;
  assert.equal(d.allowed, false);
  assert.equal(d.violations[0]!.message, `the tag could not be resolved to a digest (cluster-unreadable: ${reason}); denied whatever the failure policy`);
});

test("imagesToPin: a NamespacedImagePolicy's targets name its namespace, so its lookups get only lent credentials", () => {
  const namespaced = imagePolicies(`
apiVersion: imprimatur.dev/v1alpha1
kind: NamespacedImagePolicy
metadata: {name: pin, namespace: team-a}
spec:
  rules: [{action: allow, images: ["quay.io/*"], digestMutate: true}]
  default: allow
`);
  const [t] = imagesToPin([...namespaced, ...pinning], "team-a", at(["quay.io/org/tool:2", "registry.example.com/app:1"]), {});
  assert.equal(t!.policyNamespace, "team-a");
  assert.equal(target("registry.example.com/app:1", "spec.containers[0].image").policyNamespace, undefined);
});

test("digestVerify denies a tag-only image with a message that says how to fix it, and admits a digest", () => {
  const req = (image: string) => ({ namespace: "ns", annotations: {}, images: [{ image, field: "spec.containers[0].image" }] });
  const denied = evaluateImagePolicies(pinning, req("registry.example.com/app:1.0"), { namespaceLabels: {} });
  assert.equal(denied.allowed, false);
  assert.equal(denied.violations[0]!.rule, "rules[1].digestVerify");
  assert.match(
    denied.violations[0]!.message,
    /pin it as registry\.example\.com\/app:1\.0@sha256:<digest>.*imprimatur resolve registry\.example\.com\/app:1\.0.*mutating webhook/,
  );
  assert.equal(evaluateImagePolicies(pinning, req(`registry.example.com/app:1.0@${D1}`), { namespaceLabels: {} }).allowed, true);
  assert.equal(evaluateImagePolicies(pinning, req("nginx:1.25"), { namespaceLabels: {} }).allowed, true, "rules without digestVerify still admit tags");
});

test("digestVerify / digestMutate on a deny rule is a load error", () => {
  const { errors } = parsePolicyText(
    `
apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: wrong}
spec:
  rules:
    - {action: deny, images: ["*"], digestMutate: true}
`,
    "wrong.yaml",
  );
  assert.equal(errors.length, 1);
  assert.match(errors[0]!.message, /apply to images a rule allows/);
});

test("field paths become JSON pointers", () => {
  assert.equal(fieldPathToPointer("spec.template.spec.containers[12].image"), "/spec/template/spec/containers/12/image");
  assert.equal(fieldPathToPointer("ephemeralContainers[0].image"), "/ephemeralContainers/0/image");
  assert.equal(fieldPathToPointer("spec.jobTemplate.spec.template.metadata"), "/spec/jobTemplate/spec/template/metadata");
});

test("an allowed decision with patches answers with patchType JSONPatch and the patch in base64; a denial never does", () => {
  const review = { apiVersion: "admission.k8s.io/v1" as const, request: { uid: "u1" } };
  const patches = [{ op: "replace" as const, path: "/spec/containers/0/image", value: `a@${D1}` }];
  const allowed = admissionResponse(review, { allowed: true, violations: [], warnings: [], auditAnnotations: {}, patches });
  assert.equal(allowed.response.patchType, "JSONPatch");
  assert.deepEqual(JSON.parse(Buffer.from(allowed.response.patch!, "base64").toString()), patches);
  const denied = admissionResponse(review, {
    allowed: false,
    violations: [{ policy: "p", rule: "r", message: "m" }],
    warnings: [],
    auditAnnotations: {},
    patches,
  });
  assert.equal(denied.response.patch, undefined);
});

test("JSON pointers: an empty field path is the whole object, and '~' and '/' in a segment are escaped", () => {
  assert.equal(fieldPathToPointer(""), "");
  assert.equal(escapePointerSegment("a~b/c"), "a~0b~1c");
  assert.deepEqual(setAnnotationPatch({ value: { annotations: {} }, field: "metadata" }, "x.io/k", "v", false), {
    op: "add",
    path: "/metadata/annotations/x.io~1k",
    value: "v",
  });
});

test("pinning edges: a policy that does not apply, a missing resolution, records only of what was pinned, earlier records that are no record", () => {
  assert.deepEqual(imagesToPin(pinning, "team-a", at(["quay.io/org/tool:2"]), { namespaceLabels: { pin: "no" } }), []);
  assert.deepEqual(imagesToPin([], "team-a", at(["registry.example.com/app:1"]), {}), []);

  const t = target("registry.example.com/app:1.0", "spec.containers[0].image");
  const pod = [{ value: {}, field: "metadata" }];
  const missing = pinningDecision([t], [], pod, { mode: "mutate", failOpen: false });
  assert.deepEqual(missing.failed, [{ target: t, error: "not resolved" }]);
  assert.deepEqual(missing.decision.auditAnnotations, {}, "nothing was pinned, so nothing is recorded");
  assert.match(missing.decision.violations[0]!.message, /could not be resolved to a digest \(not resolved\)/);

  const noAnswer = pinningDecision([t], [{ ok: false, error: "connection refused" }], pod, { mode: "mutate", failOpen: true });
  assert.deepEqual(noAnswer.failed, [{ target: t, error: "connection refused" }]);
  assert.equal(noAnswer.decision.patches, undefined, "nothing to patch");

  const answered = pinningDecision([t], [{ ok: false, error: "manifest unknown", code: "not-found" }], pod, { mode: "mutate", failOpen: true });
  assert.match(answered.decision.violations[0]!.message, /Give the pod a pull secret for this registry, or fix the image reference$/);

  // A denial still carries the record of what was resolved.
  const other = target("registry.example.com/db:3", "spec.containers[1].image");
  const half = pinningDecision(
    [t, other],
    [
      { ok: true, digest: D1, credentialSource: "anonymous" },
      { ok: false, error: "unauthorized" },
    ],
    pod,
    {
      mode: "mutate",
      failOpen: false,
    },
  );
  assert.equal(half.decision.allowed, false);
  assert.deepEqual(JSON.parse(half.decision.auditAnnotations["pinned-images"]!), { "registry.example.com/app:1.0": `registry.example.com/app:1.0@${D1}` });

  const resolved = pinningDecision([t], [{ ok: true, digest: D1, credentialSource: "anonymous" }], pod, { mode: "mutate", failOpen: true });
  assert.equal(resolved.decision.failOpen, undefined);
  assert.equal(resolved.decision.auditAnnotations["fail-open"], undefined);

  // Earlier records that are a list, or hold entries that are not references, contribute nothing.
  for (const earlier of ['["x"]', JSON.stringify({ "a:1": 5 })]) {
    const d = pinningDecision(
      [t],
      [{ ok: true, digest: D1, credentialSource: "anonymous" }],
      [{ value: { annotations: { [PINNED_IMAGES_ANNOTATION]: earlier } }, field: "metadata" }],
      {
        mode: "mutate",
        failOpen: false,
      },
    );
    assert.deepEqual(
      JSON.parse(d.decision.patches!.at(-1)!.value as string),
      { "registry.example.com/app:1.0": `registry.example.com/app:1.0@${D1}` },
      earlier,
    );
  }
});
