// Attestation policies (pure core): loading `attestations` and `validate`, and judging verified statements on
// every admission — one passing statement suffices, denials name the check, the condition and the value found.
import assert from "node:assert/strict";
import { generateKeyPairSync } from "node:crypto";
import { describe, test } from "node:test";
import { evaluateImagePolicies } from "../../../src/core/image-policy/image-policy.ts";
import { verificationKey, type ImageVerification } from "../../../src/core/verification-results.ts";
import { parsePolicyText } from "../../../src/policy/load-policies.ts";

const pem = JSON.stringify(generateKeyPairSync("ec", { namedCurve: "P-256" }).publicKey.export({ type: "spki", format: "pem" }).toString());
const SLSA = "https://slsa.dev/provenance/v1";
const VULN = "https://cosign.sigstore.dev/attestation/vuln/v1";
const POLICY = `apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: built-and-scanned}
spec:
  rules:
    - action: allow
      images: ["registry.example.com/*"]
      attestors: [{entries: [{staticKey: {ignoreTlog: true, key: ${pem}}}]}]
      attestations:
        - predicateType: ${SLSA}
          conditions:
            - all: [{key: "{{ buildDefinition.buildType }}", operator: Equals, value: "https://actions.github.io/buildtypes/workflow/v1"}]
        - predicateType: ${VULN}
          conditions:
            - all:
                - {key: "{{ time_since('', metadata.scanFinishedOn, '') }}", operator: LessThan, value: 24h}
                - {key: "{{ scanner.result.Results[].Vulnerabilities[?CVSS.nvd.V3Score > \`8.0\`][] | length(@) }}", operator: Equals, value: 0}
          cel: "predicate.scanner.uri.startsWith('pkg:github/aquasecurity/trivy')"
      validate:
        cel: "image.registry == 'registry.example.com' && attestations['${SLSA}'].size() > 0"
        message: provenance is required
  default: deny
`;
const policies = parsePolicyText(POLICY, "p.yaml").policies.ImagePolicy;
const IMAGE = `registry.example.com/app@sha256:${"c".repeat(64)}`;
const key = verificationKey("built-and-scanned", 0, IMAGE);
// The admission's time comes in with the evaluation (the engine gives it; the core reads no clock): fixed here.
const NOW = Date.parse("2025-06-01T12:00:00Z");
const hoursAgo = (h: number) => new Date(NOW - h * 3600e3).toISOString();
// Every statement here is signed by the rule's one key (the entry its signature satisfies, and who signed).
const RELEASE_KEY = [{ entry: "attestors[0].entries[0]", attestor: "key", signer: "key sha256:ab", format: "cosign-signature" }];
const slsa = (buildType: string) => ({ statement: { predicateType: SLSA, predicate: { buildDefinition: { buildType } } }, signers: RELEASE_KEY });
const scan = (score: number, age: number, uri = "pkg:github/aquasecurity/trivy@0.5") => ({
  statement: {
    predicateType: VULN,
    predicate: {
      metadata: { scanFinishedOn: hoursAgo(age) },
      scanner: { uri, result: { Results: [{ Vulnerabilities: [{ CVSS: { nvd: { V3Score: score } } }] }] } },
    },
  },
  signers: RELEASE_KEY,
});
function judge(slsaStatements: unknown[], scans: unknown[]) {
  const result = {
    status: "verified",
    digest: `sha256:${"c".repeat(64)}`,
    evidence: [{ entry: "attestors[0].entries[0]", attestor: "key", signer: "key sha256:ab", format: "cosign-signature" }],
    attestations: [
      { index: 0, predicateType: SLSA, statements: slsaStatements, failures: slsaStatements.length ? [] : ["no attestation of type " + SLSA + " found"] },
      { index: 1, predicateType: VULN, statements: scans, failures: [] },
    ],
  } as ImageVerification;
  return evaluateImagePolicies(
    policies,
    { namespace: "shop", annotations: {}, images: [{ image: IMAGE }] },
    { verifications: new Map([[key, result]]), now: NOW },
  );
}
const GOOD_BUILD = "https://actions.github.io/buildtypes/workflow/v1";

test("the attestation policy loads: checks, conditions and CEL compiled", () => {
  const rule = policies[0]!.rules[0]!;
  assert.equal(rule.attestations?.length, 2);
  assert.equal(rule.attestations?.[1]!.attestors, rule.attestors, "an attestation without attestors uses the rule's");
  assert.ok(rule.validate);
});

test("passing provenance and a fresh clean trivy scan: allowed", () => {
  const d = judge([slsa(GOOD_BUILD)], [scan(5, 2)]);
  assert.equal(d.allowed, true, d.auditAnnotations.reason);
});

test("denials name the attestation, the condition and the value found", () => {
  assert.match(
    judge([slsa("https://evil.example/build")], [scan(5, 2)]).violations[0]!.message,
    new RegExp(`^attestations\\[0\\] \\(${SLSA.replace(/[./]/g, "\\$&")}\\): conditions\\[0\\]\\.all\\[0\\]: "https://evil\\.example/build" is not Equals`),
  );
  assert.match(
    judge([slsa(GOOD_BUILD)], [scan(9.8, 2)]).violations[0]!.message,
    /^attestations\[1\] \(.*vuln\/v1\): conditions\[0\]\.all\[1\]: 1 is not Equals 0$/,
  );
  assert.match(judge([slsa(GOOD_BUILD)], [scan(5, 30)]).violations[0]!.message, /conditions\[0\]\.all\[0\]: "30h0m0s" is not LessThan "24h"/);
  assert.match(judge([slsa(GOOD_BUILD)], [scan(5, 2, "pkg:other/scanner")]).violations[0]!.message, /^attestations\[1\] .*: CEL ".*" is false$/);
  assert.match(judge([], [scan(5, 2)]).violations[0]!.message, /^attestations\[0\] .*: no verified attestation: no attestation of type/);
});

test("by default every verified statement of a type must pass (as Kyverno): one failing statement denies, naming it", () => {
  const d = judge([slsa(GOOD_BUILD), slsa("https://evil.example/build")], [scan(5, 2)]);
  assert.equal(d.allowed, false);
  assert.equal(
    d.violations[0]!.message,
    `attestations[0] (${SLSA}): conditions[0].all[0]: "https://evil.example/build" is not Equals "${GOOD_BUILD}" ` +
      "(statement 2 of 2 verified statements; statementsMustPass: all)",
  );
  assert.equal(judge([slsa(GOOD_BUILD), slsa(GOOD_BUILD)], [scan(5, 2)]).allowed, true);
});

describe("statementsMustPass: any, and signers counted over the statements of a type", () => {
  const A = "key sha256:aa";
  const B = "key sha256:bb";
  const text = (mustPass: string, count = 1) => `apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: built}
spec:
  rules:
    - action: allow
      images: ["registry.example.com/*"]
      attestations:
        - predicateType: ${SLSA}
          ${mustPass}
          attestors:
            - count: ${count}
              entries:
                - keyless: {subject: "https://github.com/acme/*", issuer: https://token.actions.githubusercontent.com}
                - keyless: {subject: "https://github.com/acme/app/*", issuer: https://token.actions.githubusercontent.com}
          conditions:
            - all: [{key: "{{ buildDefinition.buildType }}", operator: Equals, value: "${GOOD_BUILD}"}]
  default: deny
`;
  const load = (mustPass: string, count?: number) => {
    const { policies: p, errors } = parsePolicyText(text(mustPass, count), "p.yaml");
    assert.deepEqual(errors, []);
    return p.ImagePolicy;
  };
  /** A statement and the entries its signature satisfies, by one signer. */
  const by = (signer: string, buildType: string, entries = [0, 1]) => ({
    statement: { predicateType: SLSA, predicate: { buildDefinition: { buildType } } },
    signers: entries.map((i) => ({ entry: `attestors[0].entries[${i}]`, attestor: `e${i}`, signer, format: "sigstore-bundle" })),
  });
  const admit = (p: ReturnType<typeof load>, statements: unknown[]) =>
    evaluateImagePolicies(
      p,
      { namespace: "shop", annotations: {}, images: [{ image: IMAGE }] },
      {
        now: NOW,
        verifications: new Map([
          [
            verificationKey("built", 0, IMAGE),
            {
              status: "verified",
              digest: `sha256:${"c".repeat(64)}`,
              evidence: [],
              attestations: [{ index: 0, predicateType: SLSA, statements, failures: [] }],
            } as ImageVerification,
          ],
        ]),
      },
    );

  test("the option loads; all is the default", () => {
    assert.equal(load("")[0]!.rules[0]!.attestations![0]!.statementsMustPass, "all");
    assert.equal(load("statementsMustPass: any")[0]!.rules[0]!.attestations![0]!.statementsMustPass, "any");
    assert.deepEqual(
      parsePolicyText(text("statementsMustPass: some"), "p.yaml").errors.map((e) => e.path),
      ["spec.rules[0].attestations[0].statementsMustPass"],
    );
  });

  test("any: one passing statement is enough; when none passes, the denial says so", () => {
    const p = load("statementsMustPass: any");
    assert.equal(admit(p, [by(A, "https://evil.example/build"), by(A, GOOD_BUILD)]).allowed, true);
    assert.match(admit(p, [by(A, "a"), by(A, "b")]).violations[0]!.message, /\(none of 2 verified statements passes\)$/);
  });

  test("count 2 needs two signers: one signer's two passing statements do not meet it, two signers' do", () => {
    for (const mustPass of ["", "statementsMustPass: any"]) {
      const p = load(mustPass, 2);
      const one = admit(p, [by(A, GOOD_BUILD), by(A, GOOD_BUILD)]);
      assert.equal(one.allowed, false, mustPass);
      assert.match(
        one.violations[0]!.message,
        /^attestations\[0\] \(.*\): attestors\[0\] needs all 2: .*one signer counts for one entry only, and these entries have 1 distinct signer$/,
      );
      assert.equal(admit(p, [by(A, GOOD_BUILD, [0]), by(B, GOOD_BUILD)]).allowed, true, mustPass);
    }
  });

  test("any, count 2: a signer counts only through a statement that passes", () => {
    const p = load("statementsMustPass: any", 2);
    const d = admit(p, [by(A, GOOD_BUILD, [0]), by(B, "https://evil.example/build")]);
    assert.equal(d.allowed, false);
    assert.match(d.violations[0]!.message, /keyless https:\/\/github\.com\/acme\/app\/\*: no statement it verified passes its conditions/);
  });
});

test("load errors: attestations without attestors, bad CEL and JMESPath, attestations on a deny rule", () => {
  const { errors } = parsePolicyText(
    `apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: p}
spec:
  rules:
    - action: allow
      images: ["*"]
      attestations:
        - predicateType: x
          conditions: [{all: [{key: "{{ a[ }}", operator: Equals, value: 1}]}]
          cel: "predicate +"
      validate: {cel: "image ==="}
    - action: deny
      images: ["*"]
      attestations: [{predicateType: x}]
`,
    "p.yaml",
  );
  assert.deepEqual(
    errors.map((e) => e.path),
    [
      "spec.rules[0].attestations[0]",
      "spec.rules[0].attestations[0].conditions[0].all[0].key",
      "spec.rules[0].attestations[0].cel",
      "spec.rules[0].validate.cel",
      "spec.rules[1].attestations",
    ],
  );
});

test("bad predicates: a missing field is 'not found', a deeply nested or huge predicate is judged without a crash", () => {
  let deep: unknown = "bottom";
  for (let i = 0; i < 100_000; i++) deep = { a: deep };
  const nested = { statement: { predicateType: VULN, predicate: { deep, scanner: { uri: "pkg:github/aquasecurity/trivy@0.5" } } }, signers: RELEASE_KEY };
  const d = judge([slsa(GOOD_BUILD)], [nested]);
  assert.equal(d.allowed, false);
  assert.match(d.violations[0]!.message, /attestations\[1\].*conditions\[0\]\.all\[0\]: .*not found/);
  const huge = scan(1, 1);
  (huge.statement.predicate as Record<string, unknown>).padding = Array.from({ length: 200_000 }, (_, i) => ({ i, note: "x".repeat(10) }));
  assert.equal(judge([slsa(GOOD_BUILD)], [huge]).allowed, true);
});

test("the same cached statements are judged again on every admission (a scan goes stale between two), once per image within one", () => {
  const fresh = scan(1, 24 - 2 / 3600); // 23 h 59 min 58 s old at NOW: stale two seconds later
  const result = {
    status: "verified",
    digest: `sha256:${"c".repeat(64)}`,
    evidence: [],
    attestations: [
      { index: 0, predicateType: SLSA, statements: [slsa(GOOD_BUILD)], failures: [] },
      { index: 1, predicateType: VULN, statements: [fresh], failures: [] },
    ],
  } as unknown as ImageVerification;
  const admit = (now: number) =>
    evaluateImagePolicies(
      policies,
      { namespace: "shop", annotations: {}, images: [0, 1, 2].map((i) => ({ image: IMAGE, field: `spec.containers[${i}].image` })) },
      { verifications: new Map([[key, result]]), now },
    );
  const first = admit(NOW);
  assert.equal(first.allowed, true, JSON.stringify(first.violations));
  const second = admit(NOW + 2_500);
  assert.equal(second.allowed, false);
  assert.deepEqual(
    second.violations.map((v) => v.field),
    ["spec.containers[0].image", "spec.containers[1].image", "spec.containers[2].image"],
  );
  assert.equal(second.violations[0]!.message, `attestations[1] (${VULN}): conditions[0].all[0]: "24h0m0.5s" is not LessThan "24h"`);
});
