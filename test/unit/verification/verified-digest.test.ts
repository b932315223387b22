// A rule that verifies signatures admits the digest it verified, never a tag: by default such a rule requires the
// digest (digestVerify) and /mutate pins tags (digestMutate), as Kyverno's verifyDigest/mutateDigest default to
// true and policy-controller refuses tags. Before, a tag was verified at the digest it pointed to then, and the
// pod kept the tag, which the node could resolve to another digest a second later.
import assert from "node:assert/strict";
import { test } from "node:test";
import { subjectOfImageReview, subjectOfObject } from "../../../src/core/admission-subject.ts";
import { imagesToPin } from "../../../src/core/image-policy/digest-pinning.ts";
import { evaluateImagePolicies } from "../../../src/core/image-policy/image-policy.ts";
import { evaluateSubjectImages } from "../../../src/core/image-policy/image-policy-kind.ts";
import { verificationKey, type ImageVerification } from "../../../src/core/verification-results.ts";
import { parsePolicyText } from "../../../src/policy/load-policies.ts";

const KEYLESS = `attestors: [{entries: [{keyless: {subject: "https://github.com/acme/*", issuer: "https://token.actions.githubusercontent.com"}}]}]`;

function policy(ruleExtra = "") {
  const parsed = parsePolicyText(
    `apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: signed}
spec:
  rules:
    - {action: allow, images: ["registry.example.com/*"], ${KEYLESS}${ruleExtra}}
    - {action: allow, images: ["docker.io/*"]}
`,
    "p.yaml",
  );
  return parsed;
}

const DIGEST = `sha256:${"a".repeat(64)}`;
const TAG = "registry.example.com/app:1.0";
const verified = (image: string): Map<string, ImageVerification> =>
  new Map([
    [
      verificationKey("signed", 0, image),
      { status: "verified", digest: DIGEST, evidence: [{ entry: "attestors[0].entries[0]", attestor: "a", signer: "s", format: "f" }] },
    ],
  ]);

const podRequest = (image: string) => ({ namespace: "shop", annotations: {}, images: [{ image, field: "spec.containers[0].image" }] });

test("by default a tag under a rule with attestors is denied even when its signatures verify, saying to pin or install /mutate", () => {
  const { policies, errors } = policy();
  assert.deepEqual(errors, []);
  const d = evaluateImagePolicies(policies.ImagePolicy, podRequest(TAG), { verifications: verified(TAG) });
  assert.equal(d.allowed, false);
  assert.equal(d.violations[0]!.rule, "rules[0].digestVerify");
  assert.match(d.violations[0]!.message, /verifies signatures on a digest, and a tag may point to another digest/);
  assert.match(d.violations[0]!.message, /pin it as registry\.example\.com\/app:1\.0@sha256:<digest>.*or install the mutating webhook \(\/mutate\)/);
  // The same image pinned (by the user, or by /mutate earlier in the same admission) is admitted.
  const pinned = `${TAG}@${DIGEST}`;
  assert.equal(evaluateImagePolicies(policies.ImagePolicy, podRequest(pinned), { verifications: verified(pinned) }).allowed, true);
  // Rules without attestors keep their own defaults: a tag is fine there.
  assert.equal(evaluateImagePolicies(policies.ImagePolicy, podRequest("docker.io/library/nginx:1.25"), {}).allowed, true);
});

test("/mutate pins tags under a rule with attestors by default", () => {
  const { policies } = policy();
  const targets = imagesToPin(policies.ImagePolicy, "shop", [{ image: TAG, field: "spec.containers[0].image", pod: 0 }], {});
  assert.deepEqual(
    targets.map((t) => t.rule),
    ["rules[0]"],
  );
});

test("an ImageReview cannot pin: a tag under such a rule is denied with a message that says so", () => {
  const { policies } = policy();
  const subject = subjectOfImageReview({ containers: [{ image: TAG }], namespace: "shop" });
  const d = evaluateSubjectImages(policies.ImagePolicy, subject, { verifications: verified(TAG) })!;
  assert.equal(d.allowed, false);
  assert.match(d.violations[0]!.message, /the ImagePolicyWebhook cannot change the pod to pin it: pin it as registry\.example\.com\/app:1\.0@sha256:<digest>/);
  assert.doesNotMatch(d.violations[0]!.message, /mutating webhook/);
  // A pod object names the webhook instead.
  const plan = subjectOfObject({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "p", namespace: "shop" },
    spec: { containers: [{ name: "c", image: TAG }] },
  });
  assert.ok(plan.review);
  assert.match(evaluateSubjectImages(policies.ImagePolicy, plan.subject, { verifications: verified(TAG) })!.violations[0]!.message, /\/mutate/);
});

test("digestVerify: false and digestMutate: false (or Kyverno's verifyDigest/mutateDigest) keep a tag admitted at its verified digest", () => {
  for (const extra of [", digestVerify: false, digestMutate: false", ", verifyDigest: false, mutateDigest: false"]) {
    const { policies, errors } = policy(extra);
    assert.deepEqual(errors, [], extra);
    assert.equal(evaluateImagePolicies(policies.ImagePolicy, podRequest(TAG), { verifications: verified(TAG) }).allowed, true, extra);
    assert.deepEqual(imagesToPin(policies.ImagePolicy, "shop", [{ image: TAG, field: "f", pod: 0 }], {}), [], extra);
  }
  // Only pinning turned off: the tag is still denied, and the message does not point at /mutate.
  const noMutate = policy(", digestMutate: false").policies.ImagePolicy;
  const d = evaluateImagePolicies(noMutate, podRequest(TAG), { verifications: verified(TAG) });
  assert.equal(d.allowed, false);
  assert.doesNotMatch(d.violations[0]!.message, /mutating webhook/);
});

test("the two spellings of one setting must agree", () => {
  const { errors } = policy(", digestVerify: true, verifyDigest: false");
  assert.equal(errors.length, 1);
  assert.match(errors[0]!.message, /verifyDigest is another name for digestVerify, which says true/);
});
