// The ImageReview wire format (src/core/image-review.ts): what the ImagePolicyWebhook backend accepts, the exact
// reason it gives for a body it refuses (a 400 answer), which annotations reach policies, and the decision cache key.
import assert from "node:assert/strict";
import { test } from "node:test";
import { canonicalSpecKey, imagePolicyAnnotations, isImagePolicyAnnotation, parseImageReview } from "../../src/core/image-review.ts";

const review = (spec: unknown, extra: Record<string, unknown> = {}) => ({ apiVersion: "imagepolicy.k8s.io/v1alpha1", kind: "ImageReview", spec, ...extra });

test("a valid ImageReview is read with its containers, annotations, namespace and metadata", () => {
  assert.deepEqual(
    parseImageReview(
      review(
        {
          containers: [{ image: "nginx:1" }, { image: "registry.example.com/app@sha256:" + "a".repeat(64), extra: 1 }],
          annotations: { "a.image-policy.k8s.io/b": "c" },
          namespace: "shop",
        },
        { metadata: { creationTimestamp: null } },
      ),
    ),
    {
      ok: true,
      review: {
        apiVersion: "imagepolicy.k8s.io/v1alpha1",
        kind: "ImageReview",
        metadata: { creationTimestamp: null },
        spec: {
          containers: [{ image: "nginx:1" }, { image: "registry.example.com/app@sha256:" + "a".repeat(64) }],
          annotations: { "a.image-policy.k8s.io/b": "c" },
          namespace: "shop",
        },
      },
    },
  );
  // Containers, annotations and namespace may be left out; metadata that is no object is dropped.
  assert.deepEqual(parseImageReview(review({}, { metadata: "x" })), {
    ok: true,
    review: { apiVersion: "imagepolicy.k8s.io/v1alpha1", kind: "ImageReview", spec: { containers: [], annotations: {}, namespace: "" } },
  });
});

test("a body that is no ImageReview is refused with what is wrong", () => {
  const refused = (body: unknown) => {
    const parsed = parseImageReview(body);
    assert.ok(!parsed.ok);
    return parsed.error;
  };
  assert.equal(refused([]), "body must be a JSON object (an ImageReview)");
  assert.equal(refused(null), "body must be a JSON object (an ImageReview)");
  assert.equal(refused({ kind: "ImageReview", spec: {} }), 'apiVersion must be "imagepolicy.k8s.io/v1alpha1", got null');
  assert.equal(refused(review({}, { apiVersion: "imagepolicy.k8s.io/v1" })), 'apiVersion must be "imagepolicy.k8s.io/v1alpha1", got "imagepolicy.k8s.io/v1"');
  assert.equal(refused(review({}, { kind: undefined })), 'kind must be "ImageReview", got null');
  assert.equal(refused(review({}, { kind: "AdmissionReview" })), 'kind must be "ImageReview", got "AdmissionReview"');
  assert.equal(refused(review(undefined)), "spec must be an object");
  assert.equal(refused(review([])), "spec must be an object");
  assert.equal(refused(review({ containers: { image: "nginx" } })), "spec.containers must be a list");
  assert.equal(refused(review({ containers: [{ image: "nginx" }, "nginx"] })), "spec.containers[1].image must be a string");
  assert.equal(refused(review({ containers: [{ image: 1 }] })), "spec.containers[0].image must be a string");
  assert.equal(refused(review({ annotations: ["a"] })), "spec.annotations must be a map of strings");
  assert.equal(
    refused(review({ annotations: { "a.image-policy.k8s.io/b": "c", "d.image-policy.k8s.io/e": true } })),
    "spec.annotations must be a map of strings",
  );
  assert.equal(refused(review({ namespace: 3 })), "spec.namespace must be a string");
});

test("only <name>.image-policy.k8s.io/<key> annotations reach image policies", () => {
  for (const key of ["break-glass.image-policy.k8s.io/reason", "a.b.image-policy.k8s.io/x"]) assert.equal(isImagePolicyAnnotation(key), true, key);
  for (const key of [
    "image-policy.k8s.io/reason",
    ".image-policy.k8s.io/reason",
    "break-glass.image-policy.k8s.io/",
    "break-glass.image-policy.k8s.io",
    "/break-glass.image-policy.k8s.io/x",
    "break-glass.image-policy.k8s.io.evil/x",
    "example.com/x",
    // A name without a prefix, even one ending like the domain.
    "a.image-policy.k8s.iox",
  ])
    assert.equal(isImagePolicyAnnotation(key), false, key);
  assert.deepEqual(imagePolicyAnnotations({ "a.image-policy.k8s.io/b": "1", "example.com/c": "2" }), { "a.image-policy.k8s.io/b": "1" });
  assert.deepEqual(imagePolicyAnnotations(undefined), {});
});

test("the cache key is the same for the same review whatever the order of its annotations, and differs otherwise", () => {
  const a = canonicalSpecKey({
    containers: [{ image: "x:1" }],
    annotations: { "b.image-policy.k8s.io/k": "1", "a.image-policy.k8s.io/k": "2" },
    namespace: "n",
  });
  const b = canonicalSpecKey({
    containers: [{ image: "x:1" }],
    annotations: { "a.image-policy.k8s.io/k": "2", "b.image-policy.k8s.io/k": "1" },
    namespace: "n",
  });
  assert.equal(a, b);
  assert.equal(
    a,
    JSON.stringify([
      "n",
      ["x:1"],
      [
        ["a.image-policy.k8s.io/k", "2"],
        ["b.image-policy.k8s.io/k", "1"],
      ],
    ]),
  );
  assert.equal(canonicalSpecKey({ containers: [{ image: "x:1" }] }), JSON.stringify(["", ["x:1"], []]));
  assert.notEqual(canonicalSpecKey({ containers: [{ image: "x:1" }], namespace: "m" }), canonicalSpecKey({ containers: [{ image: "x:1" }], namespace: "n" }));
  // Keys that compare equal are kept as they are.
  assert.equal(
    canonicalSpecKey({ containers: [], annotations: { "a.image-policy.k8s.io/k": "1", "a.image-policy.k8s.io/j": "1" } }),
    JSON.stringify([
      "",
      [],
      [
        ["a.image-policy.k8s.io/j", "1"],
        ["a.image-policy.k8s.io/k", "1"],
      ],
    ]),
  );
});
