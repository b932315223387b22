import { test } from "node:test";
import assert from "node:assert/strict";
import { evaluateImagePolicies, policiesMutate } from "../../src/core/image-policy/image-policy.ts";
import { renderReason } from "../../src/core/decision.ts";
import { evaluateSubjectImages, imagePolicyKind } from "../../src/core/image-policy/image-policy-kind.ts";
import { verificationKey, type ImageVerification } from "../../src/core/verification-results.ts";
import { subjectOfImageReview, type AdmissionSubject } from "../../src/core/admission-subject.ts";
import { imagePolicies } from "../support/image-policies.ts";

const trusted = imagePolicies(`
apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: trusted-registries}
spec:
  namespaces: [team-a]
  rules:
    - {action: deny, images: ["*:latest"], message: "pin a version"}
    - {action: allow, images: ["registry.example.com/*"]}
  default: deny
  breakGlass: {allowed: true}
`);

const req = (images: string[], namespace = "team-a", annotations: Record<string, string> = {}) => ({
  namespace,
  annotations,
  images: images.map((image, i) => ({ image, field: `spec.containers[${i}].image` })),
});

test("first matching rule wins; default decides the rest", () => {
  const d = evaluateImagePolicies(trusted, req(["registry.example.com/app:1.0", "registry.example.com/app:latest", "docker.io/evil:1"]), {});
  assert.equal(d.allowed, false);
  assert.deepEqual(
    d.violations.map((v) => [v.image, v.rule, v.field]),
    [
      ["registry.example.com/app:latest", "rules[0]", "spec.containers[1].image"],
      ["docker.io/evil:1", "default", "spec.containers[2].image"],
    ],
  );
  assert.match(
    renderReason(d.violations),
    /image "registry.example.com\/app:latest" \(spec.containers\[1\].image\) denied by policy trusted-registries rules\[0\]: pin a version/,
  );
  assert.equal(d.auditAnnotations.decision, "denied");
});

test("an image with neither tag nor digest is treated as :latest", () => {
  const d = evaluateImagePolicies(trusted, req(["registry.example.com/app"]), {});
  assert.equal(d.allowed, false);
  assert.equal(d.violations[0]?.rule, "rules[0]");
});

test("policies apply only to their namespaces; no applicable policy admits", () => {
  const d = evaluateImagePolicies(trusted, req(["docker.io/evil:1"], "team-b"), {});
  assert.equal(d.allowed, true);
  assert.equal(d.auditAnnotations.policies, "none");
});

test("an invalid image reference is a denial with the grammar's reason, not an exception", () => {
  const d = evaluateImagePolicies(trusted, req(["Registry.Example.com/App:1"]), {});
  assert.equal(d.allowed, false);
  assert.equal(d.violations[0]?.rule, "imageReference");
  assert.match(d.violations[0]!.message, /Registry\.Example\.com\/App:1/);
});

const selected = imagePolicies(`
apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: prod-only}
spec:
  namespaceSelector:
    matchLabels: {env: prod}
    matchExpressions: [{key: tier, operator: NotIn, values: [sandbox]}]
  rules: [{action: allow, images: ["registry.example.com/*"]}]
`);

test("namespaceSelector: matching labels apply the policy, others do not", () => {
  assert.equal(evaluateImagePolicies(selected, req(["nginx:1"], "x"), { namespaceLabels: { env: "prod" } }).allowed, false);
  assert.equal(evaluateImagePolicies(selected, req(["nginx:1"], "x"), { namespaceLabels: { env: "dev" } }).allowed, true);
  assert.equal(evaluateImagePolicies(selected, req(["nginx:1"], "x"), { namespaceLabels: { env: "prod", tier: "sandbox" } }).allowed, true);
});

test("namespaceSelector with unknown labels is an explicit denial, not a silent match", () => {
  const d = evaluateImagePolicies(selected, req(["registry.example.com/a:1"], "x"), {});
  assert.equal(d.allowed, false);
  assert.equal(d.violations[0]?.rule, "namespaceSelector");
  assert.match(d.violations[0]!.message, /labels of namespace "x" are unknown/);
});

test("every applicable policy must allow", () => {
  const both = [
    ...trusted,
    ...imagePolicies(`
apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: no-debug}
spec:
  rules: [{action: deny, images: ["registry.example.com/debug/*"], message: "no debug images"}]
  default: allow
`),
  ];
  const d = evaluateImagePolicies(both, req(["registry.example.com/debug/shell:1"]), {});
  assert.deepEqual(
    d.violations.map((v) => v.policy),
    ["no-debug"],
  );
});

const BG = {
  "break-glass.image-policy.k8s.io/reason": "CVE hotfix",
  "break-glass.image-policy.k8s.io/ticket": "INC-42",
};

test("break-glass with reason and ticket overrides a denial where the policy allows it", () => {
  const d = evaluateImagePolicies(trusted, req(["docker.io/evil:1"], "team-a", BG), {});
  assert.equal(d.allowed, true);
  assert.equal(d.breakGlass?.ticket, "INC-42");
  assert.equal(d.breakGlass?.overridden.length, 1);
  assert.equal(d.auditAnnotations["break-glass"], "used");
  assert.match(d.warnings[0]!, /break-glass override \(ticket INC-42\)/);
});

test("break-glass without a ticket is a denial explaining what is required", () => {
  const d = evaluateImagePolicies(trusted, req(["docker.io/evil:1"], "team-a", { "break-glass.image-policy.k8s.io/reason": "urgent" }), {});
  assert.equal(d.allowed, false);
  const bg = d.violations.find((v) => v.rule === "breakGlass");
  assert.match(bg!.message, /missing: break-glass.image-policy.k8s.io\/ticket/);
});

test("break-glass where the policy does not allow it is refused", () => {
  const strict = imagePolicies(`
apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: strict}
spec:
  rules: [{action: allow, images: ["registry.example.com/*"]}]
`);
  const d = evaluateImagePolicies(strict, req(["docker.io/evil:1"], "team-a", BG), {});
  assert.equal(d.allowed, false);
  assert.match(d.violations.at(-1)!.message, /does not allow overrides in namespace "team-a"/);
  assert.equal(d.breakGlass, undefined);
});

test("break-glass enforces the ticket pattern and extra required annotations", () => {
  const p = imagePolicies(`
apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: ticketed}
spec:
  rules: []
  breakGlass:
    allowed: true
    ticketPattern: "^INC-[0-9]+$"
    requiredAnnotations: [break-glass.image-policy.k8s.io/approver]
`);
  const bad = evaluateImagePolicies(p, req(["nginx:1"], "ns", { ...BG, "break-glass.image-policy.k8s.io/ticket": "whatever" }), {});
  assert.equal(bad.allowed, false);
  assert.ok(bad.violations.some((v) => /does not match the required form/.test(v.message)));
  assert.ok(bad.violations.some((v) => /missing: break-glass.image-policy.k8s.io\/approver/.test(v.message)));
  const good = evaluateImagePolicies(p, req(["nginx:1"], "ns", { ...BG, "break-glass.image-policy.k8s.io/approver": "alice" }), {});
  assert.equal(good.allowed, true);
});

test("unrelated annotations never trigger an override", () => {
  const d = evaluateImagePolicies(trusted, req(["docker.io/evil:1"], "team-a", { "scanner.image-policy.k8s.io/verified": "true" }), {});
  assert.equal(d.allowed, false);
});

// Compiling: the kind's schema check and the semantic checks, each problem named by its field path.
const compileDoc = (spec: Record<string, unknown>, name = "p") =>
  imagePolicyKind.compile({ apiVersion: "imprimatur.dev/v1alpha1", kind: "ImagePolicy", metadata: { name }, spec }, { source: { origin: "p.yaml" } });
const issues = (spec: Record<string, unknown>) => compileDoc(spec).issues.map((i) => `${JSON.stringify(i.path)} ${i.message}`);

test("schema errors name the field: unknown, missing, not one of the allowed values, a constant, anything else", () => {
  const doc = (extra: Record<string, unknown>) =>
    imagePolicyKind.compile(
      { apiVersion: "imprimatur.dev/v1alpha1", kind: "ImagePolicy", metadata: { name: "p" }, spec: { rules: [] }, ...extra },
      {
        source: { origin: "p.yaml" },
      },
    );
  assert.deepEqual(doc({ spec: { rules: [{ action: "allow", images: ["a/*"], colour: "red" }] } }).issues, [
    { path: ["spec", "rules", 0, "colour"], message: 'unknown field "colour"' },
  ]);
  assert.deepEqual(doc({ spec: {} }).issues, [{ path: ["spec"], message: 'missing required field "rules"' }]);
  assert.deepEqual(doc({ spec: { rules: [{ action: "maybe", images: ["a/*"] }] } }).issues, [
    { path: ["spec", "rules", 0, "action"], message: 'must be one of "allow", "deny", got "maybe"' },
  ]);
  assert.deepEqual(doc({ kind: "ImagePolicies" }).issues, [{ path: ["kind"], message: 'must be "ImagePolicy", got "ImagePolicies"' }]);
  const typed = doc({ spec: { rules: "all" } }).issues;
  assert.deepEqual(typed, [{ path: ["spec", "rules"], message: 'must be a list of mappings, got "all"' }]);
  // A key with "/" and "~" in it comes back unescaped from the JSON pointer.
  assert.deepEqual(doc({ metadata: { name: "p", labels: { "a/b~c": 1 } } }).issues, [
    { path: ["metadata", "labels", "a/b~c"], message: "must be a string, got 1" },
  ]);
});

const KEYLESS = [{ entries: [{ keyless: { subject: "https://github.com/acme/*", issuer: "https://token.actions.githubusercontent.com" } }] }];

test("semantic mistakes are load errors naming the field", () => {
  assert.deepEqual(
    issues({
      namespaceSelector: {
        matchExpressions: [
          { key: "a", operator: "In", values: [] },
          { key: "b", operator: "NotIn" },
          { key: "c", operator: "Exists", values: ["x"] },
          { key: "d", operator: "In", values: ["x"] },
          { key: "e", operator: "DoesNotExist" },
        ],
      },
      rules: [
        { action: "allow", images: ["a.example/*", "Bad Pattern"], imageReferences: ["b.example/*", "Bad:::"] },
        { action: "allow" },
        { action: "deny", images: ["c.example/*"], digestVerify: true },
        { action: "deny", images: ["c.example/*"], mutateDigest: true },
        { action: "allow", images: ["d.example/*"], digestVerify: true, verifyDigest: false },
        { action: "allow", images: ["d.example/*"], digestMutate: false, mutateDigest: true },
        { action: "deny", images: ["e.example/*"], validate: { cel: "true" } },
        { action: "allow", images: ["f.example/*"], repository: "registry.example.com/sigs:v1", attestors: KEYLESS },
        { action: "allow", images: ["f.example/*"], repository: "registry.example.com/sigs@sha256:" + "a".repeat(64), attestors: KEYLESS },
        { action: "allow", images: ["f.example/*"], repository: "Not A Repository" },
        { action: "allow", images: ["f.example/*"], repository: "registry.example.com/sigs" },
        { action: "allow", images: ["g.example/*"], attestations: [{ predicateType: "https://slsa.dev/provenance/v1" }] },
        {
          action: "allow",
          images: ["g.example/*"],
          attestors: KEYLESS,
          attestations: [
            { predicateType: "https://slsa.dev/provenance/v1", cel: "predicate.(" },
            { predicateType: "https://slsa.dev/provenance/v1", cel: "predicate.builder == 1", statementsMustPass: "any" },
            { predicateType: "https://slsa.dev/provenance/v1", conditions: [{ all: [{ key: "{{ a }}", operator: "Nonsense", value: 1 }] }] },
            { predicateType: "https://slsa.dev/provenance/v1", attestors: [{ count: 2, entries: [{ keyless: { subject: "s", issuer: "i" } }] }] },
          ],
        },
        { action: "allow", images: ["h.example/*"], attestors: KEYLESS, validate: { cel: "image.(", message: "m" } },
      ],
      imagePaths: [{ kinds: ["Task"], path: "spec.steps" }],
      breakGlass: { requiredAnnotations: ["break-glass.image-policy.k8s.io/approver", "example.com/approver"], ticketPattern: "(" },
    }),
    [
      '["spec","rules",0,"images",1] invalid image pattern "Bad Pattern": must not contain whitespace or control characters',
      '["spec","rules",0,"imageReferences",1] invalid image pattern "Bad:::": contains more than one ":" after the registry; a tag is written once, after the repository',
      '["spec","rules",1] missing required field "images" (or its alias "imageReferences")',
      '["spec","rules",2] digestVerify and digestMutate apply to images a rule allows; a deny rule cannot use them',
      '["spec","rules",3] digestVerify and digestMutate apply to images a rule allows; a deny rule cannot use them',
      '["spec","rules",4,"verifyDigest"] verifyDigest is another name for digestVerify, which says true: give one of them',
      '["spec","rules",5,"mutateDigest"] mutateDigest is another name for digestMutate, which says false: give one of them',
      '["spec","rules",6,"validate"] attestors say who must have signed an image a rule allows; a deny rule cannot use them',
      '["spec","rules",7,"repository"] "registry.example.com/sigs:v1" is not a repository (registry/path, without tag or digest)',
      `["spec","rules",8,"repository"] "registry.example.com/sigs@sha256:${"a".repeat(64)}" is not a repository (registry/path, without tag or digest)`,
      '["spec","rules",9,"repository"] "Not A Repository" is not a repository (registry/path, without tag or digest): invalid image reference "Not A Repository": must not contain whitespace or control characters',
      '["spec","rules",10,"repository"] repository says where signatures live; it needs attestors',
      `["spec","rules",11,"attestations",0] an attestation needs attestors: its own, or the rule's`,
      '["spec","rules",12,"attestations",0,"cel"] invalid CEL "predicate.(": <input>:1:10: found . but expecting end of input',
      '["spec","rules",12,"attestations",2,"conditions",0,"all",0,"operator"] unknown operator "Nonsense"; use one of Equals, NotEquals, In, AnyIn, AllIn, NotIn, AnyNotIn, AllNotIn, GreaterThan, GreaterThanOrEquals, LessThan, LessThanOrEquals',
      '["spec","rules",12,"attestations",3,"attestors",0,"count"] count 2 is more than the 1 entries of this set',
      '["spec","rules",13,"validate","cel"] invalid CEL "image.(": <input>:1:6: found . but expecting end of input',
      '["spec","namespaceSelector","matchExpressions",0,"values"] operator In needs at least one value',
      '["spec","namespaceSelector","matchExpressions",1,"values"] operator NotIn needs at least one value',
      '["spec","namespaceSelector","matchExpressions",2,"values"] operator Exists takes no values',
      '["spec","imagePaths",0,"path"] write the path as a JMESPath expression in {{ }}, e.g. "{{ spec.steps[*] }}"',
      '["spec","breakGlass","requiredAnnotations",1] "example.com/approver" is not of the form <name>.image-policy.k8s.io/<key>, so backends would never receive it',
      '["spec","breakGlass","ticketPattern"] invalid regular expression (RE2 syntax): missing closing ): `(`',
    ],
  );
  assert.equal(compileDoc({ rules: [{ action: "allow" }] }).policy, undefined);
});

test("a deny rule with attestors, attestations or validate is refused for that alone: what they say is not compiled", () => {
  assert.deepEqual(
    issues({
      rules: [
        { action: "deny", images: ["a.example/*"], attestors: [{ entries: [{ staticKey: { key: "not a key" } }] }] },
        { action: "deny", images: ["b.example/*"], attestations: [{ predicateType: "https://slsa.dev/provenance/v1" }] },
        { action: "deny", images: ["c.example/*"], validate: { cel: "image.(" } },
      ],
    }),
    [
      '["spec","rules",0,"attestors"] attestors say who must have signed an image a rule allows; a deny rule cannot use them',
      '["spec","rules",1,"attestations"] attestors say who must have signed an image a rule allows; a deny rule cannot use them',
      '["spec","rules",2,"validate"] attestors say who must have signed an image a rule allows; a deny rule cannot use them',
    ],
  );
});

test("namespaceSelector: an unknown operator is the schema's error, a key that is no label key the compiler's, each at its field", () => {
  assert.deepEqual(issues({ rules: [], namespaceSelector: { matchExpressions: [{ key: "team", operator: "in", values: ["a"] }] } }), [
    '["spec","namespaceSelector","matchExpressions",0,"operator"] must be one of "In", "NotIn", "Exists", "DoesNotExist", got "in"',
  ]);
  assert.deepEqual(issues({ rules: [], namespaceSelector: { matchLabels: { "-team": "a" } } }), [
    `["spec","namespaceSelector","matchLabels","-team"] "-team" is not a label key: its name must be at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit`,
  ]);
});

test("compiling fills the defaults a policy leaves out and keeps what it says", () => {
  const bare = compileDoc({ rules: [{ action: "allow", images: ["a.example/*"] }] });
  assert.deepEqual(bare.issues, []);
  const p = bare.policy!;
  assert.equal(p.name, "p");
  assert.deepEqual(p.source, { origin: "p.yaml" });
  assert.equal(p.default, "deny");
  assert.deepEqual(p.breakGlass, { allowed: false, requiredAnnotations: ["break-glass.image-policy.k8s.io/reason", "break-glass.image-policy.k8s.io/ticket"] });
  for (const absent of ["namespaces", "namespaceSelector", "clusters", "imagePaths", "defaultMessage"]) assert.ok(!(absent in p), absent);
  assert.deepEqual({ ...p.rules[0], images: p.rules[0]!.images.map((i) => i.source) }, { index: 0, action: "allow", images: ["a.example/*"] });

  const full = compileDoc({
    namespaces: ["shop"],
    namespaceSelector: { matchLabels: { env: "prod" } },
    clusters: ["east"],
    imagePaths: [{ kinds: ["Task"], path: "{{ spec.steps[*] }}" }],
    default: "allow",
    defaultMessage: "nothing matched",
    breakGlass: {
      allowed: true,
      requiredAnnotations: ["break-glass.image-policy.k8s.io/ticket", "break-glass.image-policy.k8s.io/approver"],
      ticketPattern: "^INC-",
    },
    rules: [
      { action: "deny", images: ["a.example/*"], message: "no a" },
      { action: "allow", images: ["b.example/*"], verifyDigest: true, mutateDigest: true },
      { action: "allow", images: ["c.example/*"], attestors: KEYLESS, repository: "registry.example.com/sigs" },
      { action: "allow", images: ["d.example/*"], attestors: KEYLESS, digestVerify: false, digestMutate: false },
      {
        action: "allow",
        images: ["e.example/*"],
        attestors: KEYLESS,
        attestations: [
          { predicateType: "https://slsa.dev/provenance/v1" },
          {
            predicateType: "https://example.com/vuln/v1",
            attestors: [{ entries: [{ keyless: { subject: "s", issuer: "i" } }] }],
            statementsMustPass: "any",
            cel: "true",
          },
        ],
        validate: { cel: "true", message: "why" },
      },
      { action: "allow", images: ["f.example/*"], validate: { cel: "true" } },
    ],
  });
  assert.deepEqual(full.issues, []);
  const q = full.policy!;
  assert.deepEqual(q.namespaces, ["shop"]);
  assert.deepEqual(q.namespaceSelector, { matchLabels: { env: "prod" } });
  assert.deepEqual(q.clusters, ["east"]);
  assert.equal(q.imagePaths?.length, 1);
  assert.equal(q.default, "allow");
  assert.equal(q.defaultMessage, "nothing matched");
  assert.equal(q.breakGlass.allowed, true);
  assert.deepEqual(q.breakGlass.requiredAnnotations, [
    "break-glass.image-policy.k8s.io/reason",
    "break-glass.image-policy.k8s.io/ticket",
    "break-glass.image-policy.k8s.io/approver",
  ]);
  assert.equal(q.breakGlass.ticketPattern?.source, "^INC-");
  assert.deepEqual(
    ["INC-1", "x INC-1"].map((t) => q.breakGlass.ticketPattern?.test(t)),
    [true, false],
  );
  const [deny, pinned, elsewhere, unpinned, attested, validated] = q.rules;
  assert.equal(deny!.message, "no a");
  assert.ok(!("digestVerify" in deny!) && !("digestMutate" in deny!));
  assert.equal(pinned!.digestVerify, true);
  assert.equal(pinned!.digestMutate, true);
  // A rule that verifies signatures requires and pins the digest unless it says otherwise.
  assert.equal(elsewhere!.digestVerify, true);
  assert.equal(elsewhere!.digestMutate, true);
  assert.deepEqual(elsewhere!.signatureRepository, { registry: "registry.example.com", repository: "sigs" });
  assert.ok(!("digestVerify" in unpinned!) && !("digestMutate" in unpinned!));
  assert.equal(unpinned!.attestors?.length, 1);
  assert.equal(validated!.digestVerify, true);
  assert.ok(!("message" in validated!.validate!));
  assert.equal(attested!.validate?.message, "why");
  const [slsa, vuln] = attested!.attestations!;
  assert.deepEqual([slsa!.index, slsa!.predicateType, slsa!.statementsMustPass], [0, "https://slsa.dev/provenance/v1", "all"]);
  assert.equal(slsa!.attestors, attested!.attestors);
  assert.equal(slsa!.cel, undefined);
  assert.deepEqual([vuln!.index, vuln!.statementsMustPass], [1, "any"]);
  assert.equal(vuln!.attestors[0]!.entries[0]!.path, "attestors[0].entries[0]");
  assert.notEqual(vuln!.attestors, attested!.attestors);
  assert.ok(vuln!.cel);
});

// The kind's evaluation of a subject: one decision per pod, each with its own annotations.
const subject = (pods: Array<{ annotations?: Record<string, string>; images: string[] }>, extra: Partial<AdmissionSubject> = {}): AdmissionSubject => ({
  origin: "object",
  namespace: "team-a",
  object: { apiVersion: "apps/v1", kind: "Deployment", name: "web" },
  pods: pods.map((p, i) => ({
    metadata: { value: {}, field: `pods[${i}].metadata` },
    spec: { value: {}, field: `pods[${i}].spec` },
    isTemplate: false,
    annotations: p.annotations ?? {},
  })),
  images: pods.flatMap((p, pod) => p.images.map((image, i) => ({ image, field: `pods[${pod}].containers[${i}].image`, pod }))),
  judgePods: true,
  request: { uid: "", operation: "CREATE", namespace: "team-a" },
  ...extra,
});

test("a subject's pods are judged one by one, each with its own break-glass annotations", () => {
  assert.equal(evaluateSubjectImages(trusted, subject([]), {}), undefined);
  const one = evaluateSubjectImages(trusted, subject([{ images: ["docker.io/evil:1"] }]), {})!;
  assert.deepEqual(
    one.violations.map((v) => [v.rule, v.field]),
    [["default", "pods[0].containers[0].image"]],
  );
  const two = evaluateSubjectImages(
    trusted,
    subject([{ images: ["docker.io/evil:1"], annotations: { ...BG, unrelated: "x" } }, { images: ["docker.io/evil:2"] }]),
    {},
  )!;
  assert.equal(two.allowed, false);
  // The first pod's break-glass set its denial aside; the second pod has none.
  assert.deepEqual(
    two.violations.map((v) => v.image),
    ["docker.io/evil:2"],
  );
  assert.equal(two.auditAnnotations["break-glass"], "used");
  assert.equal(imagePolicyKind.evaluate!(trusted, subject([{ images: ["registry.example.com/app:1"] }]), {})!.allowed, true);
});

test("an ImageReview's denials name the image only, and its tags cannot be pinned", () => {
  const pinning = imagePolicies(`
apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: pinned}
spec:
  rules: [{action: allow, images: ["registry.example.com/*"], digestVerify: true, digestMutate: true}]
`);
  const review = subjectOfImageReview({ containers: [{ image: "registry.example.com/app:1" }], namespace: "team-a" });
  const d = evaluateSubjectImages(pinning, review, {})!;
  assert.deepEqual(d.violations, [
    {
      policy: "pinned",
      rule: "rules[0].digestVerify",
      image: "registry.example.com/app:1",
      message:
        'this policy requires a digest, and the image has only a tag; the ImagePolicyWebhook cannot change the pod to pin it: pin it as registry.example.com/app:1@sha256:<digest> ("imprimatur resolve registry.example.com/app:1" prints it)',
    },
  ]);
  const object = evaluateSubjectImages(pinning, subject([{ images: ["registry.example.com/app:1"] }]), {})!;
  assert.equal(object.violations[0]!.field, "pods[0].containers[0].image");
  assert.equal(
    object.violations[0]!.message,
    'this policy requires a digest, and the image has only a tag: pin it as registry.example.com/app:1@sha256:<digest> ("imprimatur resolve registry.example.com/app:1" prints it), or install the mutating webhook (/mutate), which pins it on admission',
  );
});

test("an image imagePaths select but cannot locate denies the subject", () => {
  const errors = [{ policy: "tasks", message: "imagePaths (spec.steps[*]) cannot locate the image" }];
  const d = evaluateSubjectImages(trusted, subject([{ images: ["registry.example.com/app:1"] }], { extractionErrors: errors }), {})!;
  assert.equal(d.allowed, false);
  assert.deepEqual(d.violations, [{ policy: "tasks", rule: "imagePaths", message: "imagePaths (spec.steps[*]) cannot locate the image" }]);
  const alone = evaluateSubjectImages(trusted, subject([], { extractionErrors: errors }), {})!;
  assert.equal(alone.allowed, false);
  assert.equal(evaluateSubjectImages(trusted, subject([{ images: ["registry.example.com/app:1"] }], { extractionErrors: [] }), {})!.allowed, true);
});

test("the kind reports whether its policies need namespace labels, and prepares nothing", () => {
  assert.equal(imagePolicyKind.usesNamespaceLabels(trusted), false);
  assert.equal(imagePolicyKind.usesNamespaceLabels([...trusted, ...selected]), true);
  assert.equal(imagePolicyKind.prepare(trusted), trusted);
  assert.equal(imagePolicyKind.kind, "ImagePolicy");
  assert.deepEqual(imagePolicyKind.apiVersions, ["imprimatur.dev/v1alpha1"]);
});

// Attestations: the verifier hands back the statements each check's attestors signed; the core judges them.
const SLSA = "https://slsa.dev/provenance/v1";
const VULN = "https://example.com/vuln/v1";
const SIGNED = `registry.example.com/app@sha256:${"c".repeat(64)}`;
const attested = imagePolicies(`
apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: attested}
spec:
  rules:
    - action: allow
      images: ["registry.example.com/*"]
      attestors: [{entries: [{keyless: {subject: "https://github.com/acme/*", issuer: https://token.actions.githubusercontent.com}}]}]
      attestations:
        - predicateType: ${SLSA}
          conditions: [{all: [{key: "{{ builder }}", operator: Equals, value: good}]}]
        - predicateType: ${VULN}
          statementsMustPass: any
          attestors:
            - count: 2
              entries:
                - keyless: {subject: "https://github.com/acme/*", issuer: https://token.actions.githubusercontent.com}
                - keyless: {subject: "https://github.com/acme/scanner/*", issuer: https://token.actions.githubusercontent.com}
          cel: "predicate.critical == 0 && image.repository == 'app' && image.registry == 'registry.example.com' && image.tag == '' && image.digest == statement.subject"
      validate:
        cel: "'image signer' in signers && 'builder' in signers && size(attestations['${SLSA}']) == 1 && image.digest.startsWith('sha256:')"
        message: "the image and its attestations must come from acme"
`);
const signedBy = (signer: string, entries: number[]) =>
  entries.map((i) => ({ entry: `attestors[0].entries[${i}]`, attestor: `e${i}`, signer, format: "sigstore-bundle" }));
const slsaBy = (builder: string, signer = "builder") => ({ statement: { predicateType: SLSA, predicate: { builder } }, signers: signedBy(signer, [0]) });
const scanBy = (critical: number, signer: string, entries = [0, 1]) => ({
  statement: { predicateType: VULN, subject: `sha256:${"c".repeat(64)}`, predicate: { critical } },
  signers: signedBy(signer, entries),
});
function judgeAttested(slsa: unknown[], scans: unknown[], failures: { slsa?: string[] } = {}, withVuln = true) {
  const result = {
    status: "verified",
    digest: `sha256:${"c".repeat(64)}`,
    evidence: signedBy("image signer", [0]),
    attestations: [
      { index: 0, predicateType: SLSA, statements: slsa, failures: failures.slsa ?? [] },
      ...(withVuln ? [{ index: 1, predicateType: VULN, statements: scans, failures: [] }] : []),
    ],
  } as ImageVerification;
  return evaluateImagePolicies(
    attested,
    { namespace: "shop", annotations: {}, images: [{ image: SIGNED }] },
    { verifications: new Map([[verificationKey("attested", 0, SIGNED), result]]) },
  );
}
const deniedWith = (d: ReturnType<typeof judgeAttested>) => (d.allowed ? "allowed" : d.violations.map((v) => v.message).join("\n"));

test("attestations that pass their conditions and CEL, signed by enough distinct signers, and a passing validate: allowed", () => {
  assert.equal(deniedWith(judgeAttested([slsaBy("good")], [scanBy(0, "scanner"), scanBy(0, "other")])), "allowed");
  // Two signers of passing scans, one of them for the second entry only: both entries are met.
  assert.equal(deniedWith(judgeAttested([slsaBy("good")], [scanBy(0, "scanner", [1]), scanBy(0, "other", [0])])), "allowed");
});

test("attestation denials name the check, the failure and, with several statements, which one", () => {
  const at0 = `attestations[0] (${SLSA})`;
  const at1 = `attestations[1] (${VULN})`;
  assert.equal(
    deniedWith(judgeAttested([], [scanBy(0, "s")], { slsa: ["no attestation of this type", "a bad signature"] })),
    `${at0}: no verified attestation: no attestation of this type; a bad signature`,
  );
  assert.equal(deniedWith(judgeAttested([slsaBy("good")], [], {}, false)), `${at1}: no verified attestation: not looked up`);
  assert.equal(deniedWith(judgeAttested([slsaBy("evil")], [scanBy(0, "s")])), `${at0}: conditions[0].all[0]: "evil" is not Equals "good"`);
  // statementsMustPass: all (the default): one failing statement denies, naming it.
  assert.equal(
    deniedWith(judgeAttested([slsaBy("good"), slsaBy("evil")], [scanBy(0, "s")])),
    `${at0}: conditions[0].all[0]: "evil" is not Equals "good" (statement 2 of 2 verified statements; statementsMustPass: all)`,
  );
  // any: the first failure is given when none passes.
  const cel = attested[0]!.rules[0]!.attestations![1]!.cel!;
  assert.equal(deniedWith(judgeAttested([slsaBy("good")], [scanBy(3, "s")])), `${at1}: CEL ${JSON.stringify(cel.source)} is false`);
  assert.equal(
    deniedWith(judgeAttested([slsaBy("good")], [scanBy(3, "s"), scanBy(4, "t")])),
    `${at1}: CEL ${JSON.stringify(cel.source)} is false (none of 2 verified statements passes)`,
  );
});

test("count 2 of an attestation's attestors needs two signers whose statements pass", () => {
  // One signer for both entries.
  const one = deniedWith(judgeAttested([slsaBy("good")], [scanBy(0, "scanner"), scanBy(0, "scanner")]));
  assert.match(one, /^attestations\[1\] \(https:\/\/example\.com\/vuln\/v1\): attestors\[0\] needs all 2: .*1 distinct signer$/);
  // The second signer's statement fails its CEL: the entry it alone meets says so.
  const failing = deniedWith(judgeAttested([slsaBy("good")], [scanBy(0, "scanner", [0]), scanBy(5, "other", [1])]));
  assert.match(failing, /keyless https:\/\/github\.com\/acme\/scanner\/\*: no statement it verified passes its conditions/);
  // Nobody signed for the second entry at all.
  const unsigned = deniedWith(judgeAttested([slsaBy("good")], [scanBy(0, "scanner", [0])]));
  assert.match(unsigned, /keyless https:\/\/github\.com\/acme\/scanner\/\*: no statement of this type is signed by it/);
});

test("validate sees the image, every signer and the statements by type; its message replaces CEL's", () => {
  const d = judgeAttested([slsaBy("good"), slsaBy("good")], [scanBy(0, "scanner"), scanBy(0, "other")]);
  assert.equal(deniedWith(d), "validate: the image and its attestations must come from acme");
  assert.equal(d.violations[0]!.rule, "rules[0]");
});

test("conditions measure time to the admission's time; validate without a message says which CEL failed", () => {
  const aged = imagePolicies(`
apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: aged}
spec:
  rules:
    - action: allow
      images: ["registry.example.com/*"]
      attestors: [{entries: [{keyless: {subject: "https://github.com/acme/*", issuer: https://token.actions.githubusercontent.com}}]}]
      attestations:
        - predicateType: ${VULN}
          conditions: [{all: [{key: "{{ time_since('', scannedOn, '') }}", operator: LessThan, value: 24h}]}]
      validate: {cel: "size(signers) == 2"}
`);
  const now = Date.parse("2026-06-01T12:00:00Z");
  const judge = (scannedOn: string, signers: string[]) =>
    evaluateImagePolicies(
      aged,
      { namespace: "shop", annotations: {}, images: [{ image: SIGNED }] },
      {
        now,
        verifications: new Map([
          [
            verificationKey("aged", 0, SIGNED),
            {
              status: "verified",
              digest: `sha256:${"c".repeat(64)}`,
              evidence: signers.flatMap((s) => signedBy(s, [0])),
              attestations: [
                { index: 0, predicateType: VULN, statements: [{ statement: { predicate: { scannedOn } }, signers: signedBy("scanner", [0]) }], failures: [] },
              ],
            } as ImageVerification,
          ],
        ]),
      },
    );
  assert.equal(deniedWith(judge("2026-06-01T10:00:00Z", ["a"])), "allowed");
  assert.equal(deniedWith(judge("2026-05-30T12:00:00Z", ["a"])), `attestations[0] (${VULN}): conditions[0].all[0]: "48h0m0s" is not LessThan "24h"`);
  assert.equal(deniedWith(judge("2026-06-01T10:00:00Z", ["a", "b"])), 'validate: CEL "size(signers) == 2" is false');
});

test("a rule that verifies signatures: offline it warns what went unchecked; a tag is denied saying why a digest is needed", () => {
  const tagged = "registry.example.com/app:1";
  const offline = evaluateImagePolicies(attested, { namespace: "shop", annotations: {}, images: [{ image: SIGNED }] }, {});
  assert.equal(offline.allowed, true);
  assert.deepEqual(offline.warnings, [
    `image ${JSON.stringify(SIGNED)}: signatures and attestations required by policy attested rules[0] were not checked (offline)`,
  ]);
  const keysOnly = imagePolicies(`
apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: keys}
spec:
  rules:
    - action: allow
      images: ["registry.example.com/*"]
      attestors: [{entries: [{keyless: {subject: "https://github.com/acme/*", issuer: https://token.actions.githubusercontent.com}}]}]
`);
  assert.deepEqual(evaluateImagePolicies(keysOnly, { namespace: "shop", annotations: {}, images: [{ image: SIGNED }] }, {}).warnings, [
    `image ${JSON.stringify(SIGNED)}: signatures required by policy keys rules[0] were not checked (offline)`,
  ]);
  const d = evaluateImagePolicies(keysOnly, { namespace: "shop", annotations: {}, images: [{ image: tagged, field: "spec.containers[0].image" }] }, {});
  assert.deepEqual(d.violations, [
    {
      policy: "keys",
      rule: "rules[0].digestVerify",
      image: tagged,
      field: "spec.containers[0].image",
      message: `this rule verifies signatures on a digest, and a tag may point to another digest by the time the node pulls it, and the image has only a tag: pin it as ${tagged}@sha256:<digest> ("imprimatur resolve ${tagged}" prints it), or install the mutating webhook (/mutate), which pins it on admission`,
    },
  ]);
  // Without digestMutate there is no webhook to suggest.
  const verifyOnly = imagePolicies(`
apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: verify-only}
spec:
  rules: [{action: allow, images: ["registry.example.com/*"], digestVerify: true}]
`);
  assert.equal(
    evaluateImagePolicies(verifyOnly, { namespace: "shop", annotations: {}, images: [{ image: tagged }] }, {}).violations[0]!.message,
    `this policy requires a digest, and the image has only a tag: pin it as ${tagged}@sha256:<digest> ("imprimatur resolve ${tagged}" prints it)`,
  );
  assert.equal(evaluateImagePolicies(verifyOnly, { namespace: "shop", annotations: {}, images: [{ image: SIGNED }] }, {}).allowed, true);
});

test("policiesMutate: only a rule that pins (digestMutate) or verifies (attestors, attestations, validate) needs the mutating webhook", () => {
  const policy = (rule: string) =>
    imagePolicies(`apiVersion: imprimatur.dev/v1alpha1\nkind: ImagePolicy\nmetadata: {name: p}\nspec:\n  rules:\n    - ${rule}\n  default: allow\n`);
  assert.equal(policiesMutate([]), false);
  assert.equal(policiesMutate(policy(`{action: allow, images: ["a.example/*"]}`)), false);
  assert.equal(policiesMutate(policy(`{action: deny, images: ["a.example/*"]}`)), false);
  assert.equal(policiesMutate(policy(`{action: allow, images: ["a.example/*"], digestVerify: true}`)), false, "verifying a digest is present changes nothing");
  assert.equal(policiesMutate(policy(`{action: allow, images: ["a.example/*"], digestMutate: true}`)), true);
  assert.equal(policiesMutate(policy(`{action: allow, images: ["a.example/*"], attestors: ${JSON.stringify(KEYLESS)}}`)), true);
  const two = [...policy(`{action: allow, images: ["a.example/*"]}`), ...policy(`{action: allow, images: ["b.example/*"], digestMutate: true}`)];
  assert.equal(policiesMutate(two), true, "any policy of the set");
  const oneOfTwoRules = policy(`{action: deny, images: ["c.example/*"]}\n    - {action: allow, images: ["*"], digestMutate: true}`);
  assert.equal(oneOfTwoRules[0]!.rules.length, 2);
  assert.equal(policiesMutate(oneOfTwoRules), true, "any rule of a policy");
});
