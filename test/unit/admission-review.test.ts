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

const refusal = (body: unknown) => {
  const parsed = parseAdmissionReview(body);
  assert.equal(parsed.ok, false, JSON.stringify(body));
  return parsed.ok ? "" : parsed.error;
};

test("a body that is no AdmissionReview is refused with what is wrong", () => {
  assert.equal(refusal([]), "body must be a JSON object (an AdmissionReview)");
  assert.equal(refusal("AdmissionReview"), "body must be a JSON object (an AdmissionReview)");
  assert.equal(
    refusal({ kind: "AdmissionReview", request: { uid: "u", operation: "CREATE", object: {} } }),
    "apiVersion must be one of admission.k8s.io/v1, admission.k8s.io/v1beta1, got null",
  );
  assert.equal(
    refusal({ apiVersion: "imagepolicy.k8s.io/v1alpha1", kind: "AdmissionReview", request: { uid: "u", operation: "CREATE", object: {} } }),
    'apiVersion must be one of admission.k8s.io/v1, admission.k8s.io/v1beta1, got "imagepolicy.k8s.io/v1alpha1"',
  );
  assert.equal(refusal({ apiVersion: "admission.k8s.io/v1", request: { uid: "u" } }), 'kind must be "AdmissionReview", got null');
  assert.equal(refusal({ apiVersion: "admission.k8s.io/v1", kind: "ImageReview", request: { uid: "u" } }), 'kind must be "AdmissionReview", got "ImageReview"');
  assert.equal(refusal({ apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview" }), "request must be an object");
  assert.equal(refusal({ apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview", request: [] }), "request must be an object");
});

test("a value quoted in a refusal is shortened: the answer and the log do not carry a sender's megabytes back", () => {
  const huge = "v".repeat(100_000);
  assert.equal(
    refusal({ apiVersion: huge, kind: "AdmissionReview", request: { uid: "u", operation: "CREATE", object: {} } }),
    `apiVersion must be one of admission.k8s.io/v1, admission.k8s.io/v1beta1, got "${"v".repeat(79)}… (100002 characters)`,
  );
  const kind = refusal({ apiVersion: "admission.k8s.io/v1", kind: { nested: huge }, request: { uid: "u" } });
  assert.ok(kind.length < 160, kind);
  assert.match(kind, /^kind must be "AdmissionReview", got \{"nested":"v+… \(100013 characters\)$/);
  const operation = refusal({ apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview", request: { uid: "u", operation: huge, object: {} } });
  assert.ok(operation.length < 200, operation);
});

test("the request's fields the engine reads must have their types; absent or null is fine", () => {
  const base = { uid: "u", operation: "CREATE", object: {} };
  const review = (request: Record<string, unknown>) => ({ apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview", request: { ...base, ...request } });
  const WRONG: Array<[Record<string, unknown>, string]> = [
    [{ name: 7 }, "request.name must be a string"],
    [{ namespace: ["shop"] }, "request.namespace must be a string"],
    [{ subResource: {} }, "request.subResource must be a string"],
    [{ dryRun: "true" }, "request.dryRun must be true or false"],
    [{ kind: "Pod" }, "request.kind must be an object"],
    [{ kind: { group: "", version: "v1", kind: 1 } }, "request.kind.kind must be a string"],
    [{ kind: { group: 0 } }, "request.kind.group must be a string"],
    [{ resource: [] }, "request.resource must be an object"],
    [{ resource: { version: true } }, "request.resource.version must be a string"],
    [{ resource: { resource: 5 } }, "request.resource.resource must be a string"],
    [{ userInfo: "alice" }, "request.userInfo must be an object"],
    [{ userInfo: { username: 1 } }, "request.userInfo.username must be a string"],
    [{ userInfo: { uid: {} } }, "request.userInfo.uid must be a string"],
    [{ userInfo: { groups: "system:masters" } }, "request.userInfo.groups must be a list of strings"],
    [{ userInfo: { groups: ["a", 1] } }, "request.userInfo.groups must be a list of strings"],
    [{ userInfo: { groups: [1, "a"] } }, "request.userInfo.groups must be a list of strings"],
    [{ userInfo: { extra: ["x"] } }, "request.userInfo.extra must map names to lists of strings"],
    [{ userInfo: { extra: { scopes: "x" } } }, "request.userInfo.extra must map names to lists of strings"],
    [{ userInfo: { extra: { scopes: ["x", 2] } } }, "request.userInfo.extra must map names to lists of strings"],
    [{ userInfo: { extra: { a: ["x"], scopes: [2, "x"] } } }, "request.userInfo.extra must map names to lists of strings"],
    [{ object: "pod" }, "request.object must be an object"],
    [{ oldObject: [] }, "request.oldObject must be an object"],
  ];
  for (const [request, error] of WRONG) assert.equal(refusal(review(request)), error, JSON.stringify(request));
  const FINE: Array<Record<string, unknown>> = [
    { name: null, namespace: null, subResource: null, dryRun: null, kind: null, resource: null, userInfo: null, oldObject: null },
    { name: "p", namespace: "shop", subResource: "", dryRun: false },
    { kind: { group: "", version: "v1", kind: "Pod" }, resource: { group: "", version: "v1", resource: "pods" } },
    { kind: { group: null }, resource: {} },
    { userInfo: { username: "alice", uid: "1", groups: ["a", "b"], extra: { scopes: ["x"], none: [] } } },
    { userInfo: { username: null, uid: null, groups: null, extra: null } },
    { userInfo: { groups: [], extra: {} } },
  ];
  for (const request of FINE) assert.equal(parseAdmissionReview(review(request)).ok, true, JSON.stringify(request));
});

test("the request must carry a uid to answer with", () => {
  for (const uid of [undefined, "", 7, null]) {
    const request = uid === undefined ? { operation: "CREATE", object: {} } : { uid, operation: "CREATE", object: {} };
    assert.equal(refusal({ apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview", request }), "request.uid must be a non-empty string", String(uid));
  }
});

test("a refused operation is quoted as it was sent, a missing one as null", () => {
  assert.equal(refusal(reviewWith({})), "request.operation must be one of CREATE, UPDATE, DELETE, CONNECT, got null");
  assert.equal(refusal(reviewWith({ operation: "PATCH" })), 'request.operation must be one of CREATE, UPDATE, DELETE, CONNECT, got "PATCH"');
});

test("object and oldObject must be objects when sent, and CREATE and UPDATE must send the object", () => {
  assert.equal(refusal(reviewWith({ operation: "DELETE", object: "pod" })), "request.object must be an object");
  assert.equal(refusal(reviewWith({ operation: "UPDATE", object: pod({}), oldObject: [1] })), "request.oldObject must be an object");
  assert.equal(refusal(reviewWith({ operation: "DELETE", oldObject: 3 })), "request.oldObject must be an object");
  for (const operation of ["CREATE", "UPDATE"]) {
    assert.equal(refusal(reviewWith({ operation })), `request.object must be an object for operation ${operation}`);
    assert.equal(refusal(reviewWith({ operation, object: null, oldObject: pod({}) })), `request.object must be an object for operation ${operation}`);
  }
  // A CREATE has no old object: the apiserver sends null.
  const created = parseAdmissionReview(reviewWith({ operation: "CREATE", object: pod({}), oldObject: null }));
  assert.ok(created.ok);
  assert.equal(created.review.apiVersion, "admission.k8s.io/v1");
  assert.deepEqual(created.review.request.object, pod({}));
  // DELETE sends only the old object.
  assert.ok(parseAdmissionReview(reviewWith({ operation: "DELETE", object: null, oldObject: pod({}) })).ok);
});

test("the response carries warnings, audit annotations and patches only when there are any", () => {
  const parsed = parseAdmissionReview(reviewWith({ operation: "CREATE", object: pod({}) }));
  assert.ok(parsed.ok);
  assert.deepEqual(admissionResponse(parsed.review, allow()), {
    apiVersion: "admission.k8s.io/v1",
    kind: "AdmissionReview",
    response: { uid: "u", allowed: true },
  });
  assert.deepEqual(admissionResponse(parsed.review, allow({ patches: [] })).response, { uid: "u", allowed: true });
  const patches = [{ op: "replace" as const, path: "/spec/containers/0/image", value: "nginx@sha256:" + "a".repeat(64) }];
  const patched = admissionResponse(parsed.review, allow({ patches, auditAnnotations: { pinned: "1" } }));
  assert.deepEqual(patched.response, {
    uid: "u",
    allowed: true,
    auditAnnotations: { pinned: "1" },
    patchType: "JSONPatch",
    patch: Buffer.from(JSON.stringify(patches)).toString("base64"),
  });
  assert.deepEqual(JSON.parse(Buffer.from(patched.response.patch!, "base64").toString()), patches);
  // A denial patches nothing, even when the decision carries patches.
  const denied = admissionResponse(parsed.review, deny([{ policy: "p", rule: "r", message: "m" }], { patches }));
  assert.equal(denied.response.patch, undefined);
  assert.equal(denied.response.patchType, undefined);
  assert.equal(denied.response.warnings, undefined);
});

test("warnings are capped in number and in length, as Kubernetes keeps them", () => {
  const parsed = parseAdmissionReview(reviewWith({ operation: "CREATE", object: pod({}) }));
  assert.ok(parsed.ok);
  const many = Array.from({ length: 23 }, (_, i) => `w${i}`);
  const capped = admissionResponse(parsed.review, allow({ warnings: many })).response.warnings!;
  assert.deepEqual(capped, [...many.slice(0, 20), "… and 3 more warnings"]);
  assert.deepEqual(admissionResponse(parsed.review, allow({ warnings: many.slice(0, 20) })).response.warnings, many.slice(0, 20));
  const exact = "x".repeat(500);
  assert.deepEqual(admissionResponse(parsed.review, allow({ warnings: [exact] })).response.warnings, [exact]);
  assert.deepEqual(admissionResponse(parsed.review, allow({ warnings: [exact + "y"] })).response.warnings, ["x".repeat(497) + "..."]);
});
