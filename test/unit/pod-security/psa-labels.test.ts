// Pod Security Admission's namespace labels, read as PSA reads them. Expected values are PSA's: ParseLevel,
// ParseVersion and PolicyToEvaluate in k8s.io/pod-security-admission api/helpers.go (invalid enforce level →
// restricted, invalid audit/warn level → privileged, invalid version → latest, each with an error), and the error
// text of its field errors (`metadata.labels[KEY]: Invalid value: "v": must be …`).
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  compareLevels,
  formatLevelVersion,
  goQuote,
  parseLevel,
  parseVersion,
  policyOfLabels,
  PRIVILEGED_POLICY,
  renderLabelErrors,
  sameLevelVersion,
  type PodSecurityPolicy,
} from "../../../src/core/pod-security/psa-labels.ts";

test("levels: the three PSA accepts, nothing else (case matters)", () => {
  assert.equal(parseLevel("privileged"), "privileged");
  assert.equal(parseLevel("baseline"), "baseline");
  assert.equal(parseLevel("restricted"), "restricted");
  for (const bad of ["Restricted", "", " restricted", "restricted ", "strict", "latest"]) assert.equal(parseLevel(bad), undefined, bad);
});

test("versions: latest and v1.MINOR without leading zeros, as PSA's versionRegexp ^v1\\.([0-9]|[1-9][0-9]*)$", () => {
  const accepted: Array<[string, string]> = [
    ["latest", "latest"],
    ["v1.0", "v1.0"],
    ["v1.9", "v1.9"],
    ["v1.25", "v1.25"],
    ["v1.999", "v1.999"],
    ["v1.9223372036854775807", "v1.9223372036854775807"],
  ];
  for (const [text, printed] of accepted) {
    const v = parseVersion(text);
    assert.ok(v, text);
    assert.equal(formatLevelVersion({ level: "baseline", version: v }).slice("baseline:".length), printed);
  }
  // Go's Atoi fails beyond int64, so PSA treats the label as invalid.
  const refused = ["Latest", "1.25", "v1.025", "v1.", "v2.0", "v0.9", "v1.25.0", "v1.-1", "v1.9223372036854775808", "v1.10000000000000000000", " v1.25", ""];
  for (const text of refused) assert.equal(parseVersion(text), undefined, text);
});

test("no labels: the defaults, untouched and without errors", () => {
  const defaults: PodSecurityPolicy = {
    enforce: { level: "baseline", version: { latest: false, minor: 30 } },
    audit: { level: "restricted", version: { latest: true } },
    warn: { level: "restricted", version: { latest: true } },
  };
  const { policy, errors } = policyOfLabels({}, defaults);
  assert.deepEqual(policy, defaults);
  assert.deepEqual(errors, []);
  assert.deepEqual(policyOfLabels(undefined).policy, PRIVILEGED_POLICY);
});

test("each label overrides only its own part of the default", () => {
  const defaults: PodSecurityPolicy = {
    enforce: { level: "baseline", version: { latest: false, minor: 30 } },
    audit: { level: "baseline", version: { latest: true } },
    warn: { level: "baseline", version: { latest: true } },
  };
  const { policy, errors } = policyOfLabels(
    { "pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/warn-version": "v1.25", "other/label": "x" },
    defaults,
  );
  assert.deepEqual(errors, []);
  assert.equal(formatLevelVersion(policy.enforce), "restricted:v1.30");
  assert.equal(formatLevelVersion(policy.audit), "baseline:latest");
  assert.equal(formatLevelVersion(policy.warn), "baseline:v1.25");
});

test("invalid values: enforce fails closed, audit and warn fail open, versions become latest; each is an error", () => {
  const { policy, errors } = policyOfLabels({
    "pod-security.kubernetes.io/enforce": "strict",
    "pod-security.kubernetes.io/enforce-version": "1.25",
    "pod-security.kubernetes.io/audit": "Restricted",
    "pod-security.kubernetes.io/audit-version": "v1.025",
    "pod-security.kubernetes.io/warn": "",
    "pod-security.kubernetes.io/warn-version": "v2.0",
  });
  assert.equal(formatLevelVersion(policy.enforce), "restricted:latest");
  assert.equal(formatLevelVersion(policy.audit), "privileged:latest");
  assert.equal(formatLevelVersion(policy.warn), "privileged:latest");
  assert.deepEqual(
    errors.map((e) => e.label),
    [
      "pod-security.kubernetes.io/enforce",
      "pod-security.kubernetes.io/enforce-version",
      "pod-security.kubernetes.io/audit",
      "pod-security.kubernetes.io/audit-version",
      "pod-security.kubernetes.io/warn",
      "pod-security.kubernetes.io/warn-version",
    ],
  );
});

test("errors read as Kubernetes prints field errors: one alone, several in brackets", () => {
  const one = policyOfLabels({ "pod-security.kubernetes.io/enforce": "strict" }).errors;
  assert.equal(
    renderLabelErrors(one),
    'metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: "strict": must be one of privileged, baseline, restricted',
  );
  const two = policyOfLabels({ "pod-security.kubernetes.io/enforce": "strict", "pod-security.kubernetes.io/warn-version": "1.25" }).errors;
  assert.equal(
    renderLabelErrors(two),
    '[metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: "strict": must be one of privileged, baseline, restricted, ' +
      'metadata.labels[pod-security.kubernetes.io/warn-version]: Invalid value: "1.25": must be "latest" or "v1.x"]',
  );
});

test("a version newer than the profiles know is kept as written", () => {
  const { policy, errors } = policyOfLabels({ "pod-security.kubernetes.io/enforce": "baseline", "pod-security.kubernetes.io/enforce-version": "v1.99" });
  assert.deepEqual(errors, []);
  assert.equal(formatLevelVersion(policy.enforce), "baseline:v1.99");
});

test("levels compare by strictness (PSA's CompareLevels)", () => {
  assert.equal(compareLevels("restricted", "baseline"), 1);
  assert.equal(compareLevels("baseline", "restricted"), -1);
  assert.equal(compareLevels("privileged", "baseline"), -1);
  assert.equal(compareLevels("baseline", "baseline"), 0);
});

test("values are quoted as Go's %q quotes them", () => {
  assert.equal(goQuote('a"b\\c'), '"a\\"b\\\\c"');
  assert.equal(goQuote("a\nb\u0001"), '"a\\nb\\x01"');
  assert.equal(goQuote("héllo"), '"héllo"');
  // Tab and carriage return have their own escapes; other control characters and DEL are \xNN; a space is kept.
  assert.equal(goQuote("a\tb\rc"), '"a\\tb\\rc"');
  assert.equal(goQuote("a b\u001f\u007f~"), '"a b\\x1f\\x7f~"');
});

test("a level and version are the same when both print the same (PSA compares LevelVersions so)", () => {
  const at = (level: "baseline" | "restricted", version: string) => ({ level, version: parseVersion(version)! });
  assert.equal(sameLevelVersion(at("baseline", "v1.25"), at("baseline", "v1.25")), true);
  assert.equal(sameLevelVersion(at("baseline", "latest"), at("baseline", "latest")), true);
  assert.equal(sameLevelVersion(at("baseline", "v1.25"), at("restricted", "v1.25")), false);
  assert.equal(sameLevelVersion(at("baseline", "v1.25"), at("baseline", "v1.26")), false);
  assert.equal(sameLevelVersion(at("baseline", "v1.25"), at("baseline", "latest")), false);
});
