// How verification results become decisions (pure core): a verified image passes with evidence, a denial names
// the signer that was missing, an unanswered lookup follows the failure policy, break-glass can override, and
// offline evaluation warns instead of verifying. Also the /mutate annotation patches.
import assert from "node:assert/strict";
import { test } from "node:test";
import { subjectOfObject } from "../../../src/core/admission-subject.ts";
import { DEFAULT_SERVER_CONFIG } from "../../../src/config/server-config.ts";
import { evaluateImagePolicies } from "../../../src/core/image-policy/image-policy.ts";
import { VERIFIED_IMAGES_ANNOTATION, verificationsNeeded, verifiedImagesPatches } from "../../../src/core/image-policy/image-verification.ts";
import { verificationKey, verifiedImagesRecord, verifiedImagesText, type ImageVerification } from "../../../src/core/verification-results.ts";
import { buildEngine } from "../../../src/engine/engine-builder.ts";
import { parsePolicyText } from "../../../src/policy/load-policies.ts";
import { validateSubject } from "../../support/engine-review.ts";

const POLICY = `apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: signed}
spec:
  breakGlass: {allowed: true}
  rules:
    - action: allow
      images: ["registry.example.com/*"]
      attestors: [{entries: [{keyless: {subject: "https://github.com/acme/*", issuer: "https://token.actions.githubusercontent.com"}}]}]
    - {action: allow, images: ["docker.io/*"]}
`;
const policies = parsePolicyText(POLICY, "p.yaml").policies.ImagePolicy;
const IMAGE = "registry.example.com/app@sha256:" + "a".repeat(64);
const key = verificationKey("signed", 0, IMAGE);
const request = (annotations: Record<string, string> = {}) => ({
  namespace: "shop",
  annotations,
  images: [{ image: IMAGE, field: "spec.containers[0].image" }],
});
const verified: ImageVerification = {
  status: "verified",
  digest: "sha256:" + "a".repeat(64),
  evidence: [
    {
      entry: "attestors[0].entries[0]",
      attestor: "keyless",
      signer: "subject https://github.com/acme/x issuer https://token.actions.githubusercontent.com",
      format: "sigstore-bundle",
      tlogIndex: "42",
    },
  ],
};

test("only images whose deciding allow rule has attestors need verification, once per image", () => {
  const needs = verificationsNeeded(
    policies,
    "shop",
    [
      { image: IMAGE, field: "spec.containers[0].image", pod: 0 },
      { image: IMAGE, field: "spec.containers[1].image", pod: 0 },
      { image: "nginx:1.25", field: "spec.containers[2].image", pod: 0 },
    ],
    {},
  );
  assert.deepEqual(
    needs.map((n) => [n.image, n.policy.name, n.rule.index]),
    [[IMAGE, "signed", 0]],
  );
});

test("verified: allowed, with the digest and signers in the audit annotations", () => {
  const d = evaluateImagePolicies(policies, request(), { verifications: new Map([[key, verified]]) });
  assert.equal(d.allowed, true);
  assert.deepEqual(JSON.parse(d.auditAnnotations["verified-images"]!), {
    [IMAGE]: { digest: verified.digest, signers: ["subject https://github.com/acme/x issuer https://token.actions.githubusercontent.com (log index 42)"] },
  });
});

test("denied: the reason names the missing signer; break-glass can override it", () => {
  const denied: ImageVerification = { status: "denied", reason: "attestors[0] needs its entry: keyless https://github.com/acme/*: no signature found" };
  const d = evaluateImagePolicies(policies, request(), { verifications: new Map([[key, denied]]) });
  assert.equal(d.allowed, false);
  assert.equal(
    d.auditAnnotations.reason,
    `image "${IMAGE}" (spec.containers[0].image) denied by policy signed rules[0]: attestors[0] needs its entry: keyless https://github.com/acme/*: no signature found`,
  );
  const overridden = evaluateImagePolicies(
    policies,
    request({ "break-glass.image-policy.k8s.io/reason": "signing outage", "break-glass.image-policy.k8s.io/ticket": "INC-1" }),
    { verifications: new Map([[key, denied]]) },
  );
  assert.equal(overridden.allowed, true);
  assert.equal(overridden.breakGlass?.overridden.length, 1);
});

test("unavailable: denied when failing closed; admitted with a warning and a fail-open record when failing open", () => {
  const down: ImageVerification = { status: "unavailable", reason: "connection refused", registry: "registry.example.com" };
  const closed = evaluateImagePolicies(policies, request(), { verifications: new Map([[key, down]]) });
  assert.equal(closed.allowed, false);
  assert.match(closed.violations[0]!.message, /could not be checked: connection refused; denied because the server fails closed/);
  const open = evaluateImagePolicies(policies, request(), { verifications: new Map([[key, down]]), failOpen: true });
  assert.equal(open.allowed, true);
  assert.deepEqual(open.failOpen, [{ backend: "registry/registry.example.com", error: `${IMAGE}: connection refused` }]);
  assert.equal(open.auditAnnotations["fail-open"], "true");
  assert.match(open.warnings[0]!, /admitted without verified signatures/);
});

test("a result missing for an image that needs one is a denial, never a silent pass", () => {
  const d = evaluateImagePolicies(policies, request(), { verifications: new Map() });
  assert.equal(d.allowed, false);
  assert.match(d.violations[0]!.message, /its signatures were not verified/);
});

test("offline (check): signatures are not checked, and a warning says so", async () => {
  const engine = await buildEngine({ config: structuredClone(DEFAULT_SERVER_CONFIG), policies: parsePolicyText(POLICY, "p.yaml").policies, offline: true });
  const plan = subjectOfObject({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "p", namespace: "shop" },
    spec: { containers: [{ name: "a", image: IMAGE }] },
  });
  assert.ok(plan.review);
  const d = await validateSubject(engine, plan.subject, { endpoint: "check", deadline: Date.now() + 5_000, dryRun: true });
  assert.equal(d.allowed, true);
  assert.deepEqual(d.warnings, [`image ${JSON.stringify(IMAGE)}: signatures required by policy signed rules[0] were not checked (offline)`]);
  await engine.close();
});

test("a rule that cannot verify (a missing trust root) denies what it matches with its reason, online, offline and failing open, before digestVerify", () => {
  const reason = 'trust root "corp" is not loaded: this rule cannot verify signatures, so it denies every image it matches';
  const marked = policies.map((p) => ({ ...p, rules: p.rules.map((r) => (r.index === 0 ? { ...r, unverifiable: reason } : r)) }));
  const expected = [{ policy: "signed", rule: "rules[0]", image: IMAGE, field: "spec.containers[0].image", message: reason }];
  for (const ctx of [{}, { verifications: new Map([[key, verified]]) }, { verifications: new Map(), failOpen: true }]) {
    const d = evaluateImagePolicies(marked, request(), ctx);
    assert.equal(d.allowed, false);
    assert.deepEqual(d.violations, expected);
    assert.deepEqual(d.warnings, []);
  }
  // A tag under digestVerify: the missing root is the reason, as pinning would not get the image past this rule.
  const tagged = evaluateImagePolicies(marked, { ...request(), images: [{ image: "registry.example.com/app:1" }] }, {});
  assert.deepEqual(tagged.violations, [{ policy: "signed", rule: "rules[0]", image: "registry.example.com/app:1", message: reason }]);
  // Nothing to look up for it; the other rules are as they were.
  assert.deepEqual(verificationsNeeded(marked, "shop", [{ image: IMAGE, field: "spec.containers[0].image", pod: 0 }], {}), []);
  assert.equal(evaluateImagePolicies(marked, { ...request(), images: [{ image: "docker.io/library/nginx:1" }] }, {}).allowed, true);
});

test("/mutate records verified images on the pod, creating annotations only when no earlier patch did", () => {
  const needs = verificationsNeeded(policies, "shop", [{ image: IMAGE, field: "spec.template.spec.containers[0].image", pod: 0 }], {});
  const results = new Map([[key, verified]]);
  const at = { value: { labels: { app: "x" } }, field: "spec.template.metadata" };
  assert.deepEqual(verifiedImagesPatches(needs, results, [at], new Set()), [
    {
      op: "add",
      path: "/spec/template/metadata/annotations",
      value: {
        [VERIFIED_IMAGES_ANNOTATION]: JSON.stringify({ [IMAGE]: { digest: verified.digest, signers: [verified.evidence[0]!.signer + " (log index 42)"] } }),
      },
    },
  ]);
  const after = verifiedImagesPatches(needs, results, [at], new Set(["spec.template.metadata"]));
  assert.equal(after[0]!.path, "/spec/template/metadata/annotations/imprimatur.dev~1verified-images");
  assert.deepEqual(verifiedImagesPatches(needs, new Map([[key, { status: "denied", reason: "x" } as ImageVerification]]), [at], new Set()), []);
});

test("records and warnings stay bounded: 25 verified images list 20 and a count; one image in many containers warns once", () => {
  const many = new Map<string, ImageVerification>();
  for (let i = 0; i < 25; i++) many.set(verificationKey("signed", 0, `registry.example.com/app${i}@sha256:${"b".repeat(64)}`), verified);
  const record = verifiedImagesRecord(many);
  assert.equal(Object.keys(record).length, 21);
  assert.equal(record["…"], "5 more");
  const offline = evaluateImagePolicies(
    policies,
    { namespace: "shop", annotations: {}, images: Array.from({ length: 50 }, (_, i) => ({ image: IMAGE, field: `spec.containers[${i}].image` })) },
    {},
  );
  assert.equal(offline.warnings.length, 1);
});

test("the verified-images record names who signed the attestations, by predicate type, and not types no statement verified", () => {
  const slsa = "https://slsa.dev/provenance/v1";
  const signer = { entry: "attestors[0].entries[0]", attestor: "key", signer: "key sha256:cd", format: "cosign-attestation", tlogIndex: 7 };
  const result = {
    status: "verified",
    digest: `sha256:${"b".repeat(64)}`,
    evidence: [],
    attestations: [
      { index: 0, predicateType: slsa, statements: [{ statement: {}, signers: [signer] }], failures: [] },
      { index: 1, predicateType: "https://example.com/none/v1", statements: [], failures: ["no attestation found"] },
    ],
  } as ImageVerification;
  const record = verifiedImagesRecord(new Map([[verificationKey("built", 0, IMAGE), result]]));
  assert.deepEqual(record[IMAGE], { digest: `sha256:${"b".repeat(64)}`, signers: [], attestations: { [slsa]: ["key sha256:cd (log index 7)"] } });
  // A second policy's result for the same image adds its signers and types; the first result's own entry, kept
  // with it for later admissions, is left as it was.
  const vuln = "https://cosign.sigstore.dev/attestation/vuln/v1";
  const other = { ...signer, signer: "key sha256:ef", tlogIndex: "8" };
  const second = {
    status: "verified",
    digest: `sha256:${"b".repeat(64)}`,
    evidence: [other],
    attestations: [
      { index: 0, predicateType: vuln, statements: [{ statement: {}, signers: [other] }], failures: [] },
      { index: 1, predicateType: slsa, statements: [{ statement: {}, signers: [other, signer] }], failures: [] },
    ],
  } as ImageVerification;
  const both = verifiedImagesRecord(
    new Map([
      [verificationKey("built", 0, IMAGE), result],
      [verificationKey("scanned", 0, IMAGE), second],
    ]),
  );
  assert.deepEqual(both[IMAGE], {
    digest: `sha256:${"b".repeat(64)}`,
    signers: ["key sha256:ef (log index 8)"],
    attestations: { [slsa]: ["key sha256:cd (log index 7)", "key sha256:ef (log index 8)"], [vuln]: ["key sha256:ef (log index 8)"] },
  });
  assert.deepEqual(verifiedImagesRecord(new Map([[verificationKey("built", 0, IMAGE), result]])), record);
});

test("the verified-images text is the record's JSON: one image's the same text while its result is kept, several merged", () => {
  const other = `registry.example.com/other@sha256:${"c".repeat(64)}`;
  const one = new Map([[verificationKey("signed", 0, IMAGE), verified]]);
  const text = verifiedImagesText(one);
  assert.equal(text, JSON.stringify(verifiedImagesRecord(one)));
  assert.equal(verifiedImagesText(new Map(one)), text, "another admission of the same kept result");
  // A denial beside it adds nothing; nothing verified: no text at all.
  const withDenial = new Map<string, ImageVerification>([...one, [verificationKey("signed", 0, other), { status: "denied", reason: "x" }]]);
  assert.equal(verifiedImagesText(withDenial), text);
  assert.equal(verifiedImagesText(new Map([[verificationKey("signed", 0, other), { status: "denied", reason: "x" } as ImageVerification]])), undefined);
  // Two images, or one image verified by two policies: the record merges them, as verifiedImagesRecord does.
  const two = new Map<string, ImageVerification>([...one, [verificationKey("signed", 0, other), verified]]);
  assert.equal(verifiedImagesText(two), JSON.stringify(verifiedImagesRecord(two)));
  const signer = { entry: "attestors[0].entries[0]", attestor: "key", signer: "key sha256:ef", format: "cosign-signature" };
  const samePolicyTwice = new Map<string, ImageVerification>([
    ...one,
    [verificationKey("scanned", 0, IMAGE), { ...verified, evidence: [signer] } as ImageVerification],
  ]);
  assert.equal(verifiedImagesText(samePolicyTwice), JSON.stringify(verifiedImagesRecord(samePolicyTwice)));
  assert.notEqual(verifiedImagesText(samePolicyTwice), text);
});
