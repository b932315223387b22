import { test } from "node:test";
import assert from "node:assert/strict";
import { parseAdmissionReview, admissionResponse, type AdmissionRequest } from "../../src/core/admission-review.ts";
import { subjectOfRequest, type SubjectPlan } from "../../src/core/admission-subject.ts";
import { imagePolicyAnnotations } from "../../src/core/image-review.ts";

/** The images a request asks to review (the one extraction), as the image-policy step sees them. */
function planPodReview(req: AdmissionRequest) {
  const plan: SubjectPlan = subjectOfRequest(req);
  if (!plan.review || plan.subject.images.length === 0) return { review: false as const };
  const { subject } = plan;
  const images = subject.images.map(({ image, field }) => ({ image, field }));
  const spec = {
    containers: images.map((i) => ({ image: i.image })),
    annotations: imagePolicyAnnotations(subject.pods[0]!.annotations),
    namespace: subject.namespace,
  };
  return { review: true as const, images: { images, spec } };
}
import { allow, deny } from "../../src/core/decision.ts";

const pod = (spec: Record<string, unknown>, annotations: Record<string, string> = {}) => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "p", namespace: "ns", annotations },
  spec,
});

const base: AdmissionRequest = { uid: "u", resource: { group: "", version: "v1", resource: "pods" }, operation: "CREATE", namespace: "ns" };

test("all containers, init containers and ephemeral containers are reviewed, with field paths", () => {
  const plan = planPodReview({
    ...base,
    object: pod(
      { containers: [{ image: "a:1" }], initContainers: [{ image: "b:1" }], ephemeralContainers: [{ image: "c:1" }] },
      { "x.image-policy.k8s.io/hint": "1", other: "no" },
    ),
  });
  assert.ok(plan.review);
  assert.deepEqual(
    plan.images.images.map((i) => i.field),
    ["spec.containers[0].image", "spec.initContainers[0].image", "spec.ephemeralContainers[0].image"],
  );
  assert.deepEqual(plan.images.spec, {
    containers: [{ image: "a:1" }, { image: "b:1" }, { image: "c:1" }],
    annotations: { "x.image-policy.k8s.io/hint": "1" },
    namespace: "ns",
  });
});

test("the v1.20 EphemeralContainers kind of the subresource is understood", () => {
  const plan = planPodReview({
    ...base,
    operation: "UPDATE",
    subResource: "ephemeralcontainers",
    kind: { group: "", version: "v1", kind: "EphemeralContainers" },
    object: { kind: "EphemeralContainers", metadata: { name: "p" }, ephemeralContainers: [{ image: "dbg:1" }] },
    oldObject: { kind: "EphemeralContainers", metadata: { name: "p" }, ephemeralContainers: [] },
  });
  assert.ok(plan.review);
  assert.deepEqual(plan.images.images, [{ image: "dbg:1", field: "ephemeralContainers[0].image" }]);
});

test("updates review only new or changed images", () => {
  const old = pod({ containers: [{ image: "a:1" }, { image: "b:1" }] });
  const same = planPodReview({ ...base, operation: "UPDATE", object: pod({ containers: [{ image: "a:1" }, { image: "b:1" }] }), oldObject: old });
  assert.equal(same.review, false);
  const changed = planPodReview({ ...base, operation: "UPDATE", object: pod({ containers: [{ image: "a:1" }, { image: "b:2" }] }), oldObject: old });
  assert.ok(changed.review);
  assert.deepEqual(changed.images.spec.containers, [{ image: "b:2" }]);
});

test("other resources, subresources and operations are not reviewed", () => {
  assert.equal(planPodReview({ ...base, resource: { group: "apps", version: "v1", resource: "deployments" }, object: {} }).review, false);
  assert.equal(planPodReview({ ...base, subResource: "status", object: pod({}) }).review, false);
  assert.equal(planPodReview({ ...base, operation: "DELETE", object: null }).review, false);
});

test("a container without an image is reviewed as an empty reference (and so denied), not skipped", () => {
  const plan = planPodReview({ ...base, object: pod({ containers: [{ name: "x" }] }) });
  assert.ok(plan.review);
  assert.deepEqual(plan.images.spec.containers, [{ image: "" }]);
});

test("responses echo uid and apiVersion; denials are 403 with the rendered reason", () => {
  const parsed = parseAdmissionReview({
    apiVersion: "admission.k8s.io/v1beta1",
    kind: "AdmissionReview",
    request: { uid: "abc", operation: "CREATE", object: {} },
  });
  assert.ok(parsed.ok);
  const ok = admissionResponse(parsed.review, allow({ warnings: ["line1\nline2"] }));
  assert.deepEqual(ok, { apiVersion: "admission.k8s.io/v1beta1", kind: "AdmissionReview", response: { uid: "abc", allowed: true, warnings: ["line1 line2"] } });
  const no = admissionResponse(parsed.review, deny([{ policy: "p", rule: "default", image: "x", field: "spec.containers[0].image", message: "m" }]));
  assert.deepEqual(no.response.status, { code: 403, reason: "Forbidden", message: 'image "x" (spec.containers[0].image) denied by policy p default: m' });
});

const reviewWith = (request: Record<string, unknown>) => ({ apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview", request: { uid: "u", ...request } });

test("a review without an operation, or with one Kubernetes does not define, is refused with the reason", () => {
  for (const operation of [undefined, null, "", "PATCH", "create", 7]) {
    const parsed = parseAdmissionReview(reviewWith(operation === undefined ? {} : { operation }));
    assert.equal(parsed.ok, false, `operation ${JSON.stringify(operation)}`);
    assert.match(parsed.ok ? "" : parsed.error, /request\.operation must be one of CREATE, UPDATE, DELETE, CONNECT, got /);
  }
});

test("DELETE and CONNECT reviews are accepted and not reviewed (they start no image)", () => {
  for (const operation of ["DELETE", "CONNECT"]) {
    const parsed = parseAdmissionReview(reviewWith({ operation, object: null }));
    assert.ok(parsed.ok, operation);
    assert.equal(subjectOfRequest(parsed.review.request).review, false);
  }
});
