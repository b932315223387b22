// Attestation policies (pure core): loading `attestations` and `validate`, and judging verified statements on
// every admission — one passing statement suffices, denials name the check, the condition and the value found.
import assert from "node:assert/strict";
import { generateKeyPairSync } from "node:crypto";
import { test } from "node:test";
import { evaluateImagePolicies } from "../../../src/core/image-policy/image-policy.ts";
import { verificationKey, type ImageVerification } from "../../../src/core/image-policy/image-verification.ts";
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
const slsa = (buildType: string) => ({ statement: { predicateType: SLSA, predicate: { buildDefinition: { buildType } } }, signers: [] });
const scan = (score: number, age: number, uri = "pkg:github/aquasecurity/trivy@0.5") => ({
  statement: {
    predicateType: VULN,
    predicate: {
      metadata: { scanFinishedOn: hoursAgo(age) },
      scanner: { uri, result: { Results: [{ Vulnerabilities: [{ CVSS: { nvd: { V3Score: score } } }] }] } },
    },
  },
  signers: [],
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

test("of two statements of one type, one passing suffices; when none passes, the denial says so", () => {
  assert.equal(judge([slsa("https://evil.example/build"), slsa(GOOD_BUILD)], [scan(5, 2)]).allowed, true);
  assert.match(judge([slsa("a"), slsa("b")], [scan(5, 2)]).violations[0]!.message, /\(none of 2 verified statements passes\)$/);
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
  const nested = { statement: { predicateType: VULN, predicate: { deep, scanner: { uri: "pkg:github/aquasecurity/trivy@0.5" } } }, signers: [] };
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
