// BoolRestriction and NumericRestriction (src/core/pod-restriction/restrictions/{bool,numeric}-restriction.ts):
// `require`, inclusive ranges with open ends, and the pointer rules they share with every restriction.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { compilePodRestriction, podRestrictionFindings } from "../../../src/core/pod-restriction/pod-restriction.ts";
import { compileBoolRestriction } from "../../../src/core/pod-restriction/restrictions/bool-restriction.ts";
import { compileNumericRestriction } from "../../../src/core/pod-restriction/restrictions/numeric-restriction.ts";
import {
  CompileContext,
  type Check,
  type CompileIssue,
  type EvalContext,
  type Finding,
  type RawPath,
} from "../../../src/core/pod-restriction/restrictions/restriction-support.ts";
import { podsInObject } from "../../../src/core/workload-templates.ts";

const ecx: EvalContext = { podSpec: { value: {}, field: "spec" }, isTemplate: false, onlyContainers: false };
const FIELD = "spec.containers[0].securityContext.x";
const RULE = "spec.spec.containers[0].securityContext.x";
const PATH: RawPath = ["spec", "spec", "containers", 0, "securityContext", "x"];

type Compiler = (raw: unknown, path: RawPath, cx: CompileContext, opts: { pointer: boolean }, rule: string) => Check | undefined;

function compile(fn: Compiler, raw: unknown, pointer = true): { check: Check | undefined; issues: CompileIssue[] } {
  const cx = new CompileContext();
  const check = fn(raw, PATH, cx, { pointer }, RULE);
  return { check, issues: cx.issues };
}

function run(fn: Compiler, raw: unknown, value: unknown, pointer = true): Finding[] {
  const { check, issues } = compile(fn, raw, pointer);
  assert.deepEqual(issues, []);
  assert.ok(check);
  const out: Finding[] = [];
  check({ value, field: FIELD }, ecx, out);
  return out;
}

function assertOutcome(findings: Finding[], pass: boolean, message?: string): void {
  if (pass) {
    assert.deepEqual(findings, []);
    return;
  }
  assert.equal(findings.length, 1, JSON.stringify(findings));
  assert.equal(findings[0]!.field, FIELD);
  assert.equal(findings[0]!.rule, RULE);
  assert.ok(findings[0]!.message.includes(message!), `${JSON.stringify(findings[0]!.message)} should contain ${JSON.stringify(message)}`);
}

function policyFindings(spec: unknown, pod: Record<string, unknown>): Finding[] {
  const r = compilePodRestriction({ apiVersion: "imprimatur.dev/v1alpha1", kind: "PodRestriction", metadata: { name: "p" }, spec });
  assert.deepEqual(r.issues, []);
  return podRestrictionFindings(r.policy!, podsInObject({ apiVersion: "v1", kind: "Pod", metadata: { name: "pod" }, ...pod })[0]!);
}

describe("BoolRestriction", () => {
  const cases: Array<{ name: string; raw: Record<string, unknown>; value: unknown; pass: boolean; message?: string }> = [
    { name: "require true: true passes", raw: { require: true }, value: true, pass: true },
    { name: "require true: false fails", raw: { require: true }, value: false, pass: false, message: "is false; must be true" },
    { name: "require false: false passes", raw: { require: false }, value: false, pass: true },
    { name: "require false: true fails", raw: { require: false }, value: true, pass: false, message: "is true; must be false" },
    // Unset: a restriction that requires a value is not met by leaving it unset, unless allowNil.
    { name: "require true: unset fails", raw: { require: true }, value: undefined, pass: false, message: "is unset; must be set (to true)" },
    { name: "require false: unset fails", raw: { require: false }, value: undefined, pass: false, message: "is unset; must be set (to false)" },
    { name: "require false: null fails as unset", raw: { require: false }, value: null, pass: false, message: "is unset; must be set (to false)" },
    { name: "require false + allowNil: unset passes", raw: { require: false, allowNil: true }, value: undefined, pass: true },
    {
      name: "require false + allowNil: true still fails",
      raw: { require: false, allowNil: true },
      value: true,
      pass: false,
      message: "is true; must be false",
    },
    { name: "no require: anything boolean passes", raw: {}, value: true, pass: true },
    { name: "no require: unset passes", raw: {}, value: undefined, pass: true },
    { name: "forbidNil: unset fails", raw: { forbidNil: true }, value: undefined, pass: false, message: "is unset; must be set" },
    { name: "forbidNil: false passes", raw: { forbidNil: true }, value: false, pass: true },
    { name: "requireNil: unset passes", raw: { requireNil: true }, value: undefined, pass: true },
    { name: "requireNil: false is set", raw: { requireNil: true }, value: false, pass: false, message: "is set to false; must be unset" },
    // Not a boolean.
    { name: "string 'true' is not a boolean", raw: { require: true }, value: "true", pass: false, message: 'must be true or false, got "true"' },
    { name: "1 is not a boolean", raw: {}, value: 1, pass: false, message: "must be true or false, got 1" },
  ];
  for (const c of cases) it(c.name, () => assertOutcome(run(compileBoolRestriction, c.raw, c.value), c.pass, c.message));

  it("require must be a boolean", () => {
    const { issues } = compile(compileBoolRestriction, { require: "false" });
    assert.deepEqual(
      issues.map((i) => i.path),
      [[...PATH, "require"]],
    );
    assert.ok(issues[0]!.message.includes('must be true or false, got "false"'));
  });

  it("unknown keys are compile issues", () => {
    const { issues } = compile(compileBoolRestriction, { required: true });
    assert.deepEqual(
      issues.map((i) => i.path),
      [[...PATH, "required"]],
    );
    assert.ok(issues[0]!.message.includes("known fields: allowNil, forbidNil, requireNil, require"), issues[0]!.message);
  });

  it("a non-pointer field reads as false when absent from a present struct (hostNetwork)", () => {
    const spec = { spec: { securityContext: { hostNetwork: { require: false } } } };
    assert.deepEqual(policyFindings(spec, { spec: { containers: [{ name: "c", image: "nginx" }] } }), []);
    const findings = policyFindings(spec, { spec: { hostNetwork: true, containers: [{ name: "c", image: "nginx" }] } });
    assert.deepEqual(findings, [{ field: "spec.hostNetwork", rule: "spec.spec.securityContext.hostNetwork", message: "is true; must be false" }]);
  });

  it("a non-pointer field read as false fails require: true", () => {
    const findings = policyFindings({ spec: { securityContext: { hostPID: { require: true } } } }, { spec: { containers: [{ name: "c", image: "nginx" }] } });
    assert.deepEqual(findings, [{ field: "spec.hostPID", rule: "spec.spec.securityContext.hostPID", message: "is false; must be true" }]);
  });
});

describe("NumericRestriction", () => {
  const cases: Array<{ name: string; ranges: unknown[]; value: unknown; pass: boolean; message?: string }> = [
    // Inclusive bounds.
    { name: "at min", ranges: [{ min: 1, max: 10 }], value: 1, pass: true },
    { name: "at max", ranges: [{ min: 1, max: 10 }], value: 10, pass: true },
    { name: "inside", ranges: [{ min: 1, max: 10 }], value: 5, pass: true },
    { name: "below min", ranges: [{ min: 1, max: 10 }], value: 0, pass: false, message: "is 0; must be from 1 to 10" },
    { name: "above max", ranges: [{ min: 1, max: 10 }], value: 11, pass: false, message: "is 11; must be from 1 to 10" },
    { name: "single value range", ranges: [{ min: 0, max: 0 }], value: 0, pass: true },
    { name: "single value range, other", ranges: [{ min: 0, max: 0 }], value: 80, pass: false, message: "is 80; must be 0" },
    // Open ends.
    { name: "min only: large value", ranges: [{ min: 1 }], value: 2 ** 31, pass: true },
    { name: "min only: below", ranges: [{ min: 1 }], value: 0, pass: false, message: "is 0; must be at least 1" },
    { name: "max only: negative", ranges: [{ max: 10 }], value: -5, pass: true },
    { name: "max only: above", ranges: [{ max: 10 }], value: 11, pass: false, message: "is 11; must be at most 10" },
    { name: "neither end: any number", ranges: [{}], value: -1, pass: true },
    // Several ranges: any one suffices.
    { name: "several: first", ranges: [{ max: 0 }, { min: 100, max: 200 }], value: 0, pass: true },
    { name: "several: second", ranges: [{ max: 0 }, { min: 100, max: 200 }], value: 150, pass: true },
    { name: "several: between", ranges: [{ max: 0 }, { min: 100, max: 200 }], value: 50, pass: false, message: "is 50; must be at most 0, or from 100 to 200" },
    {
      name: "several: above all",
      ranges: [{ max: 0 }, { min: 100, max: 200 }],
      value: 201,
      pass: false,
      message: "is 201; must be at most 0, or from 100 to 200",
    },
    { name: "no ranges: any number", ranges: [], value: 123, pass: true },
    // Non-numbers.
    { name: "numeric string", ranges: [{ min: 1 }], value: "5", pass: false, message: 'must be a number, got "5"' },
    { name: "boolean", ranges: [{ min: 1 }], value: true, pass: false, message: "must be a number, got true" },
    { name: "infinity", ranges: [], value: Infinity, pass: false, message: "must be a number" },
    { name: "NaN", ranges: [], value: Number.NaN, pass: false, message: "must be a number" },
    { name: "list", ranges: [], value: [1], pass: false, message: "must be a number, got [1]" },
  ];
  for (const c of cases) it(c.name, () => assertOutcome(run(compileNumericRestriction, { ranges: c.ranges }, c.value), c.pass, c.message));

  const nilCases: Array<{ name: string; raw: Record<string, unknown>; value: unknown; pass: boolean; message?: string }> = [
    { name: "ranges: unset fails", raw: { ranges: [{ min: 1 }] }, value: undefined, pass: false, message: "is unset; must be set (at least 1)" },
    { name: "ranges + allowNil: unset passes", raw: { allowNil: true, ranges: [{ min: 1 }] }, value: undefined, pass: true },
    {
      name: "ranges + allowNil false: unset fails",
      raw: { allowNil: false, ranges: [{ min: 1 }] },
      value: null,
      pass: false,
      message: "is unset; must be set",
    },
    { name: "no ranges: unset passes", raw: {}, value: undefined, pass: true },
    { name: "empty ranges: unset passes", raw: { ranges: [] }, value: undefined, pass: true },
    { name: "forbidNil without ranges: unset fails", raw: { forbidNil: true }, value: undefined, pass: false, message: "is unset; must be set" },
    { name: "requireNil: set fails", raw: { requireNil: true }, value: 0, pass: false, message: "is set to 0; must be unset" },
  ];
  for (const c of nilCases) it(c.name, () => assertOutcome(run(compileNumericRestriction, c.raw, c.value), c.pass, c.message));

  it("a non-pointer field has no nil rule and rejects allowNil", () => {
    assert.deepEqual(run(compileNumericRestriction, { ranges: [{ min: 1 }] }, undefined, false), []);
    const { issues } = compile(compileNumericRestriction, { allowNil: true, ranges: [{ min: 1 }] }, false);
    assert.deepEqual(
      issues.map((i) => i.path),
      [[...PATH, "allowNil"]],
    );
    assert.ok(issues[0]!.message.includes("not a pointer"));
  });

  const invalid: Array<{ name: string; raw: unknown; path: RawPath; message: string }> = [
    { name: "min greater than max", raw: { ranges: [{ min: 10, max: 1 }] }, path: [...PATH, "ranges", 0], message: "min 10 is greater than max 1" },
    {
      name: "min greater than max in the second range",
      raw: { ranges: [{ min: 1 }, { min: 5, max: 4 }] },
      path: [...PATH, "ranges", 1],
      message: "min 5 is greater than max 4",
    },
    { name: "fractional min", raw: { ranges: [{ min: 1.5 }] }, path: [...PATH, "ranges", 0, "min"], message: "must be an integer, got 1.5" },
    { name: "string max", raw: { ranges: [{ max: "10" }] }, path: [...PATH, "ranges", 0, "max"], message: 'must be an integer, got "10"' },
    { name: "null min", raw: { ranges: [{ min: null }] }, path: [...PATH, "ranges", 0, "min"], message: "must be an integer, got null" },
    { name: "ranges not a list", raw: { ranges: { min: 1 } }, path: [...PATH, "ranges"], message: "must be a list of {min, max} ranges" },
    { name: "range not a mapping", raw: { ranges: [5] }, path: [...PATH, "ranges", 0], message: "must be a mapping, got 5" },
    {
      name: "unknown range key",
      raw: { ranges: [{ minimum: 1 }] },
      path: [...PATH, "ranges", 0, "minimum"],
      message: 'unknown field "minimum"; known fields: min, max',
    },
  ];
  for (const c of invalid) {
    it(`${c.name} is a compile issue`, () => {
      const { issues } = compile(compileNumericRestriction, c.raw);
      assert.equal(issues.length, 1, JSON.stringify(issues));
      assert.deepEqual(issues[0]!.path, c.path);
      assert.ok(issues[0]!.message.includes(c.message), issues[0]!.message);
    });
  }

  it("min equal to max is fine", () => {
    assert.deepEqual(compile(compileNumericRestriction, { ranges: [{ min: 3, max: 3 }] }).issues, []);
  });

  it("applies to runAsUser in a policy, with the field path and the policy rule", () => {
    const spec = { spec: { containers: [{ securityContext: { runAsUser: { ranges: [{ min: 1000, max: 1999 }] } } }] } };
    assert.deepEqual(policyFindings(spec, { spec: { containers: [{ name: "c", image: "nginx", securityContext: { runAsUser: 1000 } }] } }), []);
    assert.deepEqual(policyFindings(spec, { spec: { containers: [{ name: "c", image: "nginx", securityContext: { runAsUser: 0 } }] } }), [
      {
        field: "spec.containers[0].securityContext.runAsUser",
        rule: "spec.spec.containers[0].securityContext.runAsUser",
        message: "is 0; must be from 1000 to 1999",
      },
    ]);
  });

  it("applies to every element of supplementalGroups", () => {
    const spec = { spec: { securityContext: { supplementalGroups: { ranges: [{ min: 1 }] } } } };
    const findings = policyFindings(spec, { spec: { securityContext: { supplementalGroups: [5, 0, 7, 0] }, containers: [{ name: "c", image: "nginx" }] } });
    assert.deepEqual(
      findings.map((f) => f.field),
      ["spec.securityContext.supplementalGroups[1]", "spec.securityContext.supplementalGroups[3]"],
    );
    assert.ok(findings.every((f) => f.message === "is 0; must be at least 1"));
    assert.deepEqual(policyFindings(spec, { spec: { containers: [{ name: "c", image: "nginx" }] } }), []);
  });
});
