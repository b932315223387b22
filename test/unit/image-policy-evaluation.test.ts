// ImagePolicy evaluation in detail (src/core/image-policy/): what an admitted or denied decision records (passes,
// audit annotations, warnings, fail-open), the messages of default and deny rules, which rules need verified
// signatures and which (image, pod, policy) the edge is asked to verify, and the verified-images record. Also
// compile details: both digest spellings agreeing, request scope, schema error paths and suggestions.
import assert from "node:assert/strict";
import { test } from "node:test";
import { imagePolicyKind } from "../../src/core/image-policy/image-policy-kind.ts";
import { compileNamespacedImagePolicy } from "../../src/core/image-policy/namespaced-image-policy.ts";
import { evaluateImagePolicies, type ImagePolicy } from "../../src/core/image-policy/image-policy.ts";
import { verificationsNeeded, verifiedImagesPatches } from "../../src/core/image-policy/image-verification.ts";
import { verificationKey, verifiedImagesRecord, type ImageVerification } from "../../src/core/verification-results.ts";

function compile(spec: Record<string, unknown>, name = "p") {
  return imagePolicyKind.compile({ apiVersion: "imprimatur.dev/v1alpha1", kind: "ImagePolicy", metadata: { name }, spec }, { source: { origin: "p.yaml" } });
}
function policy(spec: Record<string, unknown>, name = "p"): ImagePolicy {
  const compiled = compile(spec, name);
  assert.deepEqual(compiled.issues, []);
  return compiled.policy!;
}
const KEYLESS = [{ entries: [{ keyless: { subject: "https://github.com/acme/*", issuer: "https://token.actions.githubusercontent.com" } }] }];
const DIGEST = `sha256:${"d".repeat(64)}`;
const req = (images: Array<string | { image: string; field?: string }>, namespace = "shop") => ({
  namespace,
  annotations: {},
  images: images.map((i, n) => (typeof i === "string" ? { image: i, field: `spec.containers[${n}].image` } : i)),
});

const open = policy({ rules: [{ action: "deny", images: ["evil.example/*"] }], default: "allow" }, "open");
const listed = policy({ rules: [{ action: "allow", images: ["registry.example.com/*"] }], defaultMessage: "ask the platform team" }, "listed");
const strict = policy({ rules: [{ action: "allow", images: ["registry.example.com/*"] }] }, "strict");

test("an admission records every pass, the policies applied and no evidence or fail-open it did not have", () => {
  const d = evaluateImagePolicies([open, listed], req(["registry.example.com/app:1"]), {});
  assert.equal(d.allowed, true);
  assert.deepEqual(d.auditAnnotations, { decision: "allowed", policies: "open,listed" });
  assert.deepEqual(d.warnings, []);
  assert.deepEqual(d.passes, [
    { kind: "ImagePolicy", policy: "open", rule: "default", image: "registry.example.com/app:1", field: "spec.containers[0].image" },
    { kind: "ImagePolicy", policy: "listed", rule: "rules[0]", image: "registry.example.com/app:1", field: "spec.containers[0].image" },
  ]);
  assert.ok(!("failOpen" in d));
  // No image, no pass: the decision says so by leaving passes out.
  const none = evaluateImagePolicies([open], req([]), {});
  assert.ok(!("passes" in none));
  // An image without a field (an ImageReview's) passes without one.
  assert.deepEqual(evaluateImagePolicies([listed], req([{ image: "registry.example.com/app:1" }]), {}).passes, [
    { kind: "ImagePolicy", policy: "listed", rule: "rules[0]", image: "registry.example.com/app:1" },
  ]);
});

test("a denial keeps the passes of the other images and policies, and says which rule and why", () => {
  const d = evaluateImagePolicies([open, listed], req(["registry.example.com/app:1", "evil.example/x:1", "docker.io/other:1"]), {});
  assert.equal(d.allowed, false);
  assert.deepEqual(d.passes?.length, 3);
  assert.deepEqual(d.violations, [
    {
      policy: "open",
      rule: "rules[0]",
      image: "evil.example/x:1",
      field: "spec.containers[1].image",
      message: 'matches "evil.example/*", which this policy denies',
    },
    { policy: "listed", rule: "default", image: "evil.example/x:1", field: "spec.containers[1].image", message: "ask the platform team" },
    { policy: "listed", rule: "default", image: "docker.io/other:1", field: "spec.containers[2].image", message: "ask the platform team" },
  ]);
  assert.equal(d.auditAnnotations.decision, "denied");
  assert.equal(d.auditAnnotations.policies, "open,listed");
  const plain = evaluateImagePolicies([strict], req(["docker.io/other:1"]), {});
  assert.equal(plain.violations[0]!.message, "no rule of this policy allows this image");
  assert.ok(!("passes" in plain));
});

test("an image that is no reference is denied by imprimatur itself, naming the field", () => {
  const d = evaluateImagePolicies([open], req(["Not An Image"]), {});
  assert.deepEqual(
    d.violations.map((v) => [v.policy, v.rule, v.image, v.field]),
    [["imprimatur", "imageReference", "Not An Image", "spec.containers[0].image"]],
  );
});

test("unknown namespace labels: the denial says what is missing and how to give it", () => {
  const selected = policy({ namespaceSelector: { matchLabels: { env: "prod" } }, rules: [] }, "selected");
  assert.equal(
    evaluateImagePolicies([selected], req(["registry.example.com/app:1"]), {}).violations[0]!.message,
    'the labels of namespace "shop" are unknown, so whether this policy applies (selector env=prod) cannot be decided; give the labels: serve reads them through the Kubernetes API (--kubeconfig, or in a pod) or --namespaces FILE; check and test take --namespaces FILE or --namespace-labels NAMESPACE:KEY=VALUE, verify --namespace-labels',
  );
});

test("rules that verify: attestors, attestations with their own attestors, or validate alone; plain allow rules warn of nothing", () => {
  const attestationsOnly = policy(
    {
      rules: [{ action: "allow", images: ["registry.example.com/*"], attestations: [{ predicateType: "https://slsa.dev/provenance/v1", attestors: KEYLESS }] }],
    },
    "att",
  );
  const validateOnly = policy({ rules: [{ action: "allow", images: ["registry.example.com/*"], validate: { cel: "true" } }] }, "val");
  const image = `registry.example.com/app@${DIGEST}`;
  for (const p of [attestationsOnly, validateOnly])
    assert.deepEqual(evaluateImagePolicies([p], req([image]), {}).warnings, [
      `image ${JSON.stringify(image)}: signatures and attestations required by policy ${p.name} rules[0] were not checked (offline)`,
    ]);
  assert.deepEqual(evaluateImagePolicies([strict], req([image]), {}).warnings, []);
  // Verified: a pass of the rule; validate without attestations in the result sees none.
  const verified: ImageVerification = { status: "verified", digest: DIGEST, evidence: [] };
  const d = evaluateImagePolicies([validateOnly], req([image]), { verifications: new Map([[verificationKey("val", 0, image), verified]]) });
  assert.equal(d.allowed, true);
  assert.deepEqual(d.passes, [{ kind: "ImagePolicy", policy: "val", rule: "rules[0]", image, field: "spec.containers[0].image" }]);
  assert.deepEqual(JSON.parse(d.auditAnnotations["verified-images"]!), { [image]: { digest: DIGEST, signers: [] } });
  // A result without the attestations a rule asks for: none was looked up.
  const missing = evaluateImagePolicies([attestationsOnly], req([image]), { verifications: new Map([[verificationKey("att", 0, image), verified]]) });
  assert.equal(missing.violations[0]!.message, "attestations[0] (https://slsa.dev/provenance/v1): no verified attestation: not looked up");
});

test("validate reads the statements of each type", () => {
  const image = `registry.example.com/app@${DIGEST}`;
  const p = policy(
    { rules: [{ action: "allow", images: ["registry.example.com/*"], attestors: KEYLESS, validate: { cel: "attestations['t'][0].predicate.ok == true" } }] },
    "v",
  );
  const judge = (ok: boolean) =>
    evaluateImagePolicies([p], req([image]), {
      verifications: new Map([
        [
          verificationKey("v", 0, image),
          {
            status: "verified",
            digest: DIGEST,
            evidence: [],
            attestations: [{ index: 0, predicateType: "t", statements: [{ statement: { predicate: { ok } }, signers: [] }], failures: [] }],
          },
        ],
      ]),
    }).allowed;
  assert.equal(judge(true), true);
  assert.equal(judge(false), false);
});

test("fail-open admissions are recorded; more than 20 warnings are cut with a count", () => {
  const p = policy({ rules: [{ action: "allow", images: ["registry.example.com/*"], attestors: KEYLESS }] }, "signed");
  const images = Array.from({ length: 25 }, (_, i) => `registry.example.com/app${i}@${DIGEST}`);
  const offline = evaluateImagePolicies([p], req(images), {});
  assert.equal(offline.warnings.length, 21);
  assert.equal(offline.warnings[20], "… and 5 more warnings");
  const unavailable: ImageVerification = { status: "unavailable", reason: "registry down", registry: "registry.example.com" };
  const d = evaluateImagePolicies([p], req([images[0]!]), {
    failOpen: true,
    verifications: new Map([[verificationKey("signed", 0, images[0]!), unavailable]]),
  });
  assert.equal(d.allowed, true);
  assert.deepEqual(d.failOpen, [{ backend: "registry/registry.example.com", error: `${images[0]}: registry down` }]);
  assert.equal(d.auditAnnotations["fail-open"], "true");
});

test("which images the edge must verify: once per pod, policy and rule; not for unknown scope, invalid images or other rules", () => {
  const a = policy(
    {
      rules: [
        { action: "allow", images: ["registry.example.com/*"], attestors: KEYLESS },
        { action: "allow", images: ["docker.io/*"] },
      ],
    },
    "a",
  );
  const b = policy({ rules: [{ action: "allow", images: ["registry.example.com/*"], attestors: KEYLESS }] }, "b");
  const elsewhere = policy({ namespaces: ["other"], rules: [{ action: "allow", images: ["registry.example.com/*"], attestors: KEYLESS }] }, "elsewhere");
  const selected = policy(
    { namespaceSelector: { matchLabels: { env: "prod" } }, rules: [{ action: "allow", images: ["registry.example.com/*"], attestors: KEYLESS }] },
    "selected",
  );
  const image = `registry.example.com/app@${DIGEST}`;
  const at = (pod: number, n: number, img = image) => ({ image: img, field: `pods[${pod}].containers[${n}].image`, pod });
  const needs = verificationsNeeded(
    [a, b, elsewhere, selected],
    "shop",
    [at(0, 0), at(0, 1), at(1, 0), at(0, 2), at(0, 3, "Not An Image"), at(0, 4, "quay.io/x:1"), at(0, 5, "docker.io/x:1")],
    {},
  );
  assert.deepEqual(
    needs.map((n) => [n.pod, n.policy.name, n.rule.index, n.field]),
    [
      [0, "a", 0, "pods[0].containers[0].image"],
      [0, "b", 0, "pods[0].containers[0].image"],
      [1, "a", 0, "pods[1].containers[0].image"],
      [1, "b", 0, "pods[1].containers[0].image"],
    ],
  );
  // With the namespace's labels known, the selected policy applies too.
  assert.equal(verificationsNeeded([selected], "shop", [at(0, 0)], { namespaceLabels: { env: "prod" } }).length, 1);
  assert.equal(verificationsNeeded([selected], "shop", [at(0, 0)], { namespaceLabels: { env: "dev" } }).length, 0);
  // No verified result, no record on the pod.
  assert.deepEqual(verifiedImagesPatches(needs, new Map(), [{ value: {}, field: "metadata" }], new Set()), []);
});

test("the verified-images record: each image once, at most 20, signers with their log index or signing time", () => {
  const signer = (signer: string, extra: { tlogIndex?: string; signedAt?: string } = {}) => ({
    entry: "attestors[0].entries[0]",
    attestor: "k",
    signer,
    format: "f",
    ...extra,
  });
  const verified = (evidence: ReturnType<typeof signer>[]): ImageVerification => ({ status: "verified", digest: DIGEST, evidence });
  const results = new Map<string, ImageVerification>([
    [verificationKey("a", 0, "x"), verified([signer("s1", { tlogIndex: "7" })])],
    [verificationKey("b", 0, "x"), verified([signer("s2", { signedAt: "2026-01-01T00:00:00Z" }), signer("s3")])],
  ]);
  for (let i = 0; i < 19; i++) results.set(verificationKey("a", 0, `y${i}`), verified([]));
  const record = verifiedImagesRecord(results);
  assert.equal(Object.keys(record).length, 20, "an image verified under two policies is listed once and counted once");
  assert.ok(!("…" in record));
  assert.deepEqual(record.x, { digest: DIGEST, signers: ["s1 (log index 7)", "s2 (signed 2026-01-01T00:00:00Z)", "s3"] });
});

test("compile: both spellings of a digest setting may be given when they agree; a request scope is kept", () => {
  assert.deepEqual(
    compile({ rules: [{ action: "allow", images: ["a/*"], digestVerify: true, verifyDigest: true, digestMutate: false, mutateDigest: false }] }).issues,
    [],
  );
  const scoped = compile({
    matchConstraints: { resourceRules: [{ apiGroups: [""], apiVersions: ["v1"], resources: ["pods"], operations: ["CREATE"] }] },
    rules: [],
  });
  assert.deepEqual(scoped.issues, []);
  assert.ok(scoped.policy?.match);
  assert.ok(!("match" in compile({ rules: [] }).policy!));
  assert.deepEqual(compile({ matchConditions: [{ name: "a", expression: "object.(" }], rules: [] }).issues, [
    { path: ["spec", "matchConditions", 0, "expression"], message: 'invalid CEL "object.(": <input>:1:7: found . but expecting end of input' },
  ]);
});

test("schema errors: all of them, numeric path segments as numbers, and a suggestion for a misspelt field", () => {
  const rules = Array.from({ length: 11 }, () => ({ action: "allow", images: ["a/*"] }));
  rules[10] = { action: "maybe", images: ["a/*"] };
  const issues = imagePolicyKind.compile(
    { apiVersion: "imprimatur.dev/v1alpha1", kind: "ImagePolicy", metadata: { name: "p", labels: { a1: 1, "2b": 2 } }, spec: { rules, namespace: [] } },
    { source: { origin: "p.yaml" } },
  ).issues;
  assert.deepEqual(
    issues.map((i) => [i.path, i.message]),
    [
      [["metadata", "labels", "a1"], "must be a string, got 1"],
      [["metadata", "labels", "2b"], "must be a string, got 2"],
      [["spec", "namespace"], 'unknown field "namespace"; did you mean "namespaces"?'],
      [["spec", "rules", 10, "action"], 'must be one of "allow", "deny", got "maybe"'],
    ],
  );
});

test("Secret references with one-character names", () => {
  const p = policy({ rules: [{ action: "allow", images: ["a/*"], attestors: [{ entries: [{ staticKey: { keyRef: "k8s://n/s" } }] }] }] });
  const entry = p.rules[0]!.attestors![0]!.entries[0]!;
  assert.ok(entry.type === "staticKey" && "secretRef" in entry.key);
  assert.deepEqual(entry.key.secretRef, { namespace: "n", secret: "s", key: "cosign.pub" });
});

test("validationActions: the policy's and each rule's are kept; a bad list is a load error naming its field", () => {
  const p = policy({
    validationActions: ["Warn"],
    rules: [
      { action: "deny", images: ["*:latest"], validationActions: ["Audit"] },
      { action: "allow", images: ["registry.example.com/*"] },
    ],
  });
  assert.deepEqual(p.validationActions, ["Warn"]);
  assert.deepEqual(p.rules[0]!.validationActions, ["Audit"]);
  assert.ok(!("validationActions" in p.rules[1]!));
  assert.ok(!("validationActions" in strict), "a policy without the field says nothing of it");
  const errors = (spec: Record<string, unknown>) => compile(spec).issues.map((i) => [i.path, i.message]);
  assert.deepEqual(errors({ validationActions: ["Deny", "Warn"], rules: [{ action: "allow", images: ["*"] }] }), [
    [["spec", "validationActions"], "cannot hold both Deny and Warn (a denial already tells the user why; ValidatingAdmissionPolicy refuses the pair too)"],
  ]);
  assert.deepEqual(errors({ rules: [{ action: "allow", images: ["*"], validationActions: ["Audit", "Audit"] }] }), [
    [["spec", "rules", 0, "validationActions"], "lists Audit twice"],
  ]);
});

test("validationActions in evaluation: what does not deny is an advisory; a rule's own take the place of the policy's", () => {
  const warned = policy(
    {
      validationActions: ["Warn"],
      rules: [
        { action: "deny", images: ["*:latest"], message: "pin a version", validationActions: ["Deny", "Audit"] },
        { action: "allow", images: ["registry.example.com/*"] },
      ],
    },
    "warned",
  );
  const other = evaluateImagePolicies([warned], req(["docker.io/other:1"]), {});
  assert.equal(other.allowed, true, "the default rule fails with the policy's Warn");
  assert.deepEqual(other.violations, []);
  assert.deepEqual(other.advisories, [
    {
      policy: "warned",
      rule: "default",
      image: "docker.io/other:1",
      field: "spec.containers[0].image",
      message: "no rule of this policy allows this image",
      actions: ["Warn"],
    },
  ]);
  const latest = evaluateImagePolicies([warned], req(["docker.io/other:latest"]), {});
  assert.equal(latest.allowed, false, "rules[0] denies with its own Deny, Audit");
  assert.deepEqual(latest.violations, [
    {
      policy: "warned",
      rule: "rules[0]",
      image: "docker.io/other:latest",
      field: "spec.containers[0].image",
      message: "pin a version",
      actions: ["Deny", "Audit"],
    },
  ]);
  assert.ok(!("advisories" in latest), "no failure was only warned or audited");
  const denied = evaluateImagePolicies([strict], req(["docker.io/other:1"]), {});
  assert.ok(!("advisories" in denied));
  assert.deepEqual(denied.violations[0], {
    policy: "strict",
    rule: "default",
    image: "docker.io/other:1",
    field: "spec.containers[0].image",
    message: "no rule of this policy allows this image",
  });
  assert.ok(!("advisories" in evaluateImagePolicies([strict], req(["registry.example.com/app:1"]), {})));
});

test("a namespaced policy's passes, denials and advisories name its kind; a cluster policy's denials name none", () => {
  const namespaced = (spec: Record<string, unknown>) => {
    const compiled = compileNamespacedImagePolicy(
      { apiVersion: "imprimatur.dev/v1alpha1", kind: "NamespacedImagePolicy", metadata: { name: "own", namespace: "shop" }, spec },
      { source: { origin: "p.yaml" } },
    );
    assert.deepEqual(compiled.issues, []);
    return compiled.policy!;
  };
  const own = namespaced({ rules: [{ action: "allow", images: ["registry.example.com/*"] }] });
  const d = evaluateImagePolicies([own, strict], req(["registry.example.com/app:1", "docker.io/other:1"]), {});
  assert.deepEqual(d.passes, [
    { kind: "NamespacedImagePolicy", policy: "shop/own", rule: "rules[0]", image: "registry.example.com/app:1", field: "spec.containers[0].image" },
    { kind: "ImagePolicy", policy: "strict", rule: "rules[0]", image: "registry.example.com/app:1", field: "spec.containers[0].image" },
  ]);
  assert.deepEqual(
    d.violations.map((v) => [v.policy, v.kind, v.actions]),
    [
      ["shop/own", "NamespacedImagePolicy", undefined],
      ["strict", undefined, undefined],
    ],
  );
  assert.ok(!("kind" in d.violations[1]!));
  const audited = evaluateImagePolicies(
    [namespaced({ validationActions: ["Audit"], rules: [{ action: "allow", images: ["registry.example.com/*"] }] })],
    req(["docker.io/other:1"]),
    {},
  );
  assert.deepEqual(
    audited.advisories?.map((v) => [v.policy, v.kind, v.actions]),
    [["shop/own", "NamespacedImagePolicy", ["Audit"]]],
  );
});

const compileNamespaced = (spec: Record<string, unknown>) =>
  compileNamespacedImagePolicy(
    { apiVersion: "imprimatur.dev/v1alpha1", kind: "NamespacedImagePolicy", metadata: { name: "own", namespace: "shop" }, spec },
    { source: { origin: "p.yaml" } },
  );
const withKeyRef = (keyRef: unknown) => ({
  rules: [{ action: "allow", images: ["registry.example.com/*"], attestors: [{ entries: [{ staticKey: { keyRef } }] }] }],
});

test("a namespaced policy that names another namespace's Secret compiles to no policy at all, only the refusal", () => {
  const compiled = compileNamespaced(withKeyRef("k8s://kube-system/signing"));
  assert.equal(compiled.policy, undefined, "a caller that kept a policy with issues would read a Secret outside the namespace");
  assert.deepEqual(
    compiled.issues.map((i) => i.path),
    [["spec", "rules", 0, "attestors", 0, "entries", 0, "staticKey", "keyRef"]],
  );
});

test("a namespaced policy: only a keyRef names a Secret; a keyRef that is no string is a schema error, not a crash", () => {
  const message = compileNamespaced({
    rules: [{ action: "allow", images: ["registry.example.com/*"] }],
    defaultMessage: "k8s://kube-system/signing holds no key of yours",
  });
  assert.deepEqual(message.issues, []);
  assert.equal(message.policy?.defaultMessage, "k8s://kube-system/signing holds no key of yours");
  // A key file is no Secret: it is refused here only because this policy was not loaded from a file.
  assert.deepEqual(
    compileNamespaced(withKeyRef("keys/cosign.pub")).issues.map((i) => i.message),
    ["key files can only be named by policies loaded from files"],
  );
  const numeric = compileNamespaced(withKeyRef(42));
  assert.equal(numeric.policy, undefined);
  assert.deepEqual(
    numeric.issues.map((i) => i.path),
    [["spec", "rules", 0, "attestors", 0, "entries", 0, "staticKey", "keyRef"]],
  );
});

/**
 * Twelve images of one pod, each verified with one statement of type "t" (signed by the rule's first entry), and
 * judged by policy `p`: only the first eleven fit in the policy's budget when each costs 900 000 units.
 */
function judgedOnOneBudget(p: ImagePolicy, statement: Record<string, unknown>) {
  const signedByTheEntry = { entry: "attestors[0].entries[0]", attestor: "k", signer: "s", format: "sigstore-bundle" };
  const images = Array.from({ length: 12 }, (_, i) => `registry.example.com/app${i}@${DIGEST}`);
  const verifications = new Map(
    images.map((image) => [
      verificationKey(p.name, 0, image),
      {
        status: "verified",
        digest: DIGEST,
        evidence: [],
        attestations: [{ index: 0, predicateType: "t", statements: [{ statement, signers: [signedByTheEntry] }], failures: [] }],
      } satisfies ImageVerification,
    ]),
  );
  const d = evaluateImagePolicies([p], req(images), { verifications });
  assert.equal(d.allowed, false);
  assert.deepEqual(
    d.violations.map((v) => v.image),
    images.slice(11),
  );
  // Another admission has its own budget.
  assert.equal(evaluateImagePolicies([p], req(images.slice(0, 2)), { verifications }).allowed, true);
  return d.violations[0]!.message;
}

test("JMESPath conditions draw on the same budget of one policy per admission: past it, the image is denied with the reason", () => {
  // starts_with counts a tenth of the predicate's 9 million characters: 900 000 units per image, under the
  // million one evaluation may cost; the twelfth image of the pod finds the budget spent.
  const p = policy(
    {
      rules: [
        {
          action: "allow",
          images: ["registry.example.com/*"],
          attestations: [
            { predicateType: "t", attestors: KEYLESS, conditions: [{ all: [{ key: "{{ starts_with(text, 'a') }}", operator: "Equals", value: true }] }] },
          ],
        },
      ],
    },
    "costly",
  );
  assert.match(
    judgedOnOneBudget(p, { predicate: { text: "a".repeat(9_000_000) } }),
    /^attestations\[0\] \(t\): conditions\[0\]\.all\[0\]: JMESPath "starts_with\(text, 'a'\)": running out of cost budget: the conditions of one policy may cost at most 10000000 per request/,
  );
});

test("the CEL of one policy shares 10 million units per admission: past it, the image is denied with the reason", () => {
  // validate.cel costs a tenth of the statement's text (contains): 900 000 for 9 million characters, under the
  // million one evaluation may cost; the twelfth image of the pod finds the budget spent.
  const p = policy(
    {
      rules: [
        { action: "allow", images: ["registry.example.com/*"], attestors: KEYLESS, validate: { cel: "attestations['t'][0].predicate.text.contains('x')" } },
      ],
    },
    "costly",
  );
  assert.match(
    judgedOnOneBudget(p, { predicate: { text: "a".repeat(9_000_000) + "x" } }),
    /^validate: CEL ".*": running out of cost budget: the conditions of one policy may cost at most 10000000 per request/,
  );
});
