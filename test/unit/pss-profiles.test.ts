// The shipped baseline and restricted profiles against the Pod Security Standards case table
// (test/fixtures/pss/cases.yaml, one passing and one failing pod at least per control; see
// docs/pod-security-standards.md). Each pod is judged with the profile bound cluster-wide.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { before, describe, it } from "node:test";
import { parse } from "yaml";
import { decidePodRestrictions } from "../../src/core/pod-restriction/pod-restriction-decision.ts";
import { PodRestrictionIndex } from "../../src/core/pod-restriction/restriction-index.ts";
import { podsInObject } from "../../src/core/workload-templates.ts";
import { bindProfileClusterWide, shippedProfiles } from "../../src/policy/profiles.ts";

interface Case {
  name: string;
  control: string;
  baseline: "allow" | "deny";
  restricted: "allow" | "deny";
  field?: string;
  pod: Record<string, unknown>;
}

const cases = parse(readFileSync(new URL("../fixtures/pss/cases.yaml", import.meta.url), "utf8")) as Case[];
const indexes: Record<"baseline" | "restricted", PodRestrictionIndex> = {} as never;
/** Baseline check → the restricted check that takes its place, from the restricted profile's `overrides`. */
const overriddenBy = new Map<string, string>();

before(async () => {
  const profiles = await shippedProfiles();
  for (const level of ["baseline", "restricted"] as const) indexes[level] = new PodRestrictionIndex([bindProfileClusterWide(level, profiles)]);
  const restricted = profiles.get("restricted")!.raw as { spec: { checks: Array<{ name: string; overrides?: string[] }> } };
  for (const check of restricted.spec.checks) for (const o of check.overrides ?? []) overriddenBy.set(o, check.name);
  assert.deepEqual(Object.fromEntries(overriddenBy), {
    hostPathVolumes: "restrictedVolumes",
    seccompProfile_baseline: "seccompProfile_restricted",
    capabilities_baseline: "capabilities_restricted",
    procMount: "procMount",
  });
});

/** A denial names the expected field, or a parent/child of it (a missing struct vs its missing field). */
function mentions(field: string, expected: string): boolean {
  return field === expected || expected.startsWith(`${field}.`) || field.startsWith(`${expected}.`) || field.startsWith(`${expected} `);
}

describe("Pod Security Standards profiles", () => {
  it("cover every control of the table with an allowed and a denied pod", () => {
    const controls = new Set(cases.map((c) => c.control));
    assert.ok(controls.size >= 18, `only ${controls.size} controls in the table`);
    for (const control of controls) {
      const mine = cases.filter((c) => c.control === control);
      const outcomes = new Set(mine.flatMap((c) => [c.baseline, c.restricted]));
      assert.ok(outcomes.has("allow") && outcomes.has("deny"), `control ${control} needs an allowed and a denied case`);
    }
  });

  for (const c of cases) {
    for (const level of ["baseline", "restricted"] as const) {
      it(`${level}: ${c.name} is ${c[level] === "deny" ? "denied" : "allowed"}`, () => {
        const [pod] = podsInObject(c.pod);
        assert.ok(pod);
        const decision = decidePodRestrictions(indexes[level], pod, "default", undefined);
        const reasons = decision.violations.map((v) => `${v.field} ${v.rule}: ${v.message}`).join("\n");
        assert.equal(decision.allowed ? "allow" : "deny", c[level], reasons || "(no violations)");
        // Checks are named by Pod Security Admission's check IDs, and each field is reported once (a restricted
        // check that overrides a baseline one takes its place).
        const fields = decision.violations.map((v) => v.field);
        assert.deepEqual(fields, [...new Set(fields)], `a field reported twice:\n${reasons}`);
        if (c[level] === "deny") {
          // A case filed under a restricted check that overrides a baseline one is denied at baseline by the latter.
          const overrides = new Map([...overriddenBy].map(([base, strict]) => [strict, base]));
          const reportedBy = (level === "restricted" ? overriddenBy.get(c.control) : overrides.get(c.control)) ?? c.control;
          assert.ok(
            decision.violations.some((v) => v.rule === `baseline/${reportedBy}` || v.rule === `restricted/${reportedBy}`),
            `expected a violation of check ${reportedBy}, got:\n${reasons}`,
          );
        }
        if (c[level] === "deny" && c.field) {
          assert.ok(
            decision.violations.some((v) => v.field !== undefined && mentions(v.field, c.field!)),
            `expected a violation at ${c.field}, got:\n${reasons}`,
          );
        }
      });
    }
  }
});
