// StringRestriction (src/core/pod-restriction/restrictions/string-restriction.ts): allowed/forbidden values
// (and the seed's whitelist/blacklist), "*" globs, an anchored regex, the pointer rules, and host-path
// prefixes matched on whole path segments.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { compilePodRestriction, podRestrictionFindings } from "../../../src/core/pod-restriction/pod-restriction.ts";
import { CompileContext, type EvalContext, type Finding } from "../../../src/core/pod-restriction/restrictions/restriction-support.ts";
import { compileStringRestriction, type StringRestrictionOptions } from "../../../src/core/pod-restriction/restrictions/string-restriction.ts";
import { podsInObject } from "../../../src/core/workload-templates.ts";

const PATH = ["spec", "spec", "restartPolicy"];
const RULE = "spec.spec.restartPolicy";
const FIELD = "spec.restartPolicy";
const ecx: EvalContext = { podSpec: { value: {}, field: "spec" }, isTemplate: false, onlyContainers: false };

function compile(raw: unknown, opts: StringRestrictionOptions = { pointer: true }) {
  const cx = new CompileContext();
  const compiled = compileStringRestriction(raw, PATH, cx, opts, RULE);
  return { compiled, issues: cx.issues };
}

function compileOk(raw: unknown, opts?: StringRestrictionOptions) {
  const { compiled, issues } = compile(raw, opts);
  assert.deepEqual(issues, []);
  assert.ok(compiled);
  return compiled;
}

function run(raw: unknown, value: unknown, opts?: StringRestrictionOptions): Finding[] {
  const out: Finding[] = [];
  compileOk(raw, opts).check({ value, field: FIELD }, ecx, out);
  return out;
}

/** Asserts exactly one finding, at FIELD with RULE, whose message contains `part`. */
function assertOneFinding(findings: Finding[], part: string): void {
  assert.equal(findings.length, 1, JSON.stringify(findings));
  assert.equal(findings[0]!.field, FIELD);
  assert.equal(findings[0]!.rule, RULE);
  assert.ok(findings[0]!.message.includes(part), `${JSON.stringify(findings[0]!.message)} should contain ${JSON.stringify(part)}`);
}

describe("StringRestriction: allowed and forbidden values", () => {
  const cases: Array<{ name: string; raw: unknown; value: string; pass: boolean; message?: string }> = [
    { name: "allowed value", raw: { allowed: ["Always", "OnFailure"] }, value: "OnFailure", pass: true },
    {
      name: "value not allowed",
      raw: { allowed: ["Always", "OnFailure"] },
      value: "Never",
      pass: false,
      message: 'is "Never"; allowed: "Always", "OnFailure"',
    },
    { name: "whitelist (seed spelling) allows", raw: { whitelist: ["Always"] }, value: "Always", pass: true },
    { name: "whitelist (seed spelling) denies", raw: { whitelist: ["Always"] }, value: "Never", pass: false, message: 'is "Never"; allowed: "Always"' },
    { name: "forbidden value", raw: { forbidden: ["Never"] }, value: "Never", pass: false, message: 'is "Never", which is forbidden' },
    { name: "value not forbidden", raw: { forbidden: ["Never"] }, value: "Always", pass: true },
    { name: "blacklist (seed spelling) denies", raw: { blacklist: ["Never"] }, value: "Never", pass: false, message: "which is forbidden" },
    { name: "blacklist (seed spelling) passes others", raw: { blacklist: ["Never"] }, value: "Always", pass: true },
    { name: "matching is case-sensitive", raw: { allowed: ["Always"] }, value: "always", pass: false, message: 'is "always"' },
    { name: "allowed and forbidden both apply: allowed, not forbidden", raw: { allowed: ["a*"], forbidden: ["ab"] }, value: "ac", pass: true },
    {
      name: "allowed and forbidden both apply: allowed but forbidden",
      raw: { allowed: ["a*"], forbidden: ["ab"] },
      value: "ab",
      pass: false,
      message: "which is forbidden",
    },
    { name: "empty allowed list allows nothing", raw: { allowed: [] }, value: "x", pass: false, message: 'is "x"; allowed: ' },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const findings = run(c.raw, c.value);
      if (c.pass) assert.deepEqual(findings, []);
      else assertOneFinding(findings, c.message!);
    });
  }

  it("reports both a forbidden and a not-allowed value", () => {
    const findings = run({ allowed: ["a"], forbidden: ["b"] }, "b");
    assert.equal(findings.length, 2);
    assert.ok(findings.some((f) => f.message.includes("allowed:")));
    assert.ok(findings.some((f) => f.message.includes("forbidden")));
  });

  it("accepts() agrees with check for set values", () => {
    const compiled = compileOk({ allowed: ["x*"], forbidden: ["xy"], regex: "[a-z]+" });
    assert.equal(compiled.accepts("xa"), true);
    assert.equal(compiled.accepts("xy"), false);
    assert.equal(compiled.accepts("ya"), false);
    assert.equal(compiled.accepts("x1"), false);
  });

  it("giving both whitelist and allowed is a compile issue", () => {
    const { issues } = compile({ whitelist: ["a"], allowed: ["b"] });
    assert.equal(issues.length, 1);
    assert.ok(issues[0]!.message.includes("mean the same"), issues[0]!.message);
    assert.deepEqual(issues[0]!.path.slice(0, PATH.length), PATH);
  });

  it("unknown keys are compile issues naming the known fields", () => {
    const { issues } = compile({ allowd: ["a"] });
    assert.equal(issues.length, 1);
    assert.deepEqual(issues[0]!.path, [...PATH, "allowd"]);
    assert.ok(issues[0]!.message.includes('unknown field "allowd"'), issues[0]!.message);
    for (const known of ["allowed", "forbidden", "regex", "allowNil", "forbidNil", "requireNil"]) assert.ok(issues[0]!.message.includes(known));
  });

  it("a list entry that is not a string is a compile issue with its index", () => {
    const { issues } = compile({ allowed: ["a", 3] });
    assert.deepEqual(
      issues.map((i) => i.path),
      [[...PATH, "allowed", 1]],
    );
    assert.ok(issues[0]!.message.includes("must be a string"));
  });

  it("a restriction that is not a mapping is a compile issue", () => {
    const { compiled, issues } = compile(["Always"]);
    assert.equal(compiled, undefined);
    assert.deepEqual(
      issues.map((i) => i.path),
      [PATH],
    );
    assert.ok(issues[0]!.message.includes("must be a mapping"));
  });
});

describe("StringRestriction: * globs", () => {
  const cases: Array<{ pattern: string; value: string; pass: boolean }> = [
    { pattern: "*", value: "", pass: true },
    { pattern: "*", value: "anything/at all", pass: true },
    { pattern: "app-*", value: "app-web", pass: true },
    { pattern: "app-*", value: "app-", pass: true },
    { pattern: "app-*", value: "my-app-web", pass: false },
    { pattern: "*-web", value: "app-web", pass: true },
    { pattern: "*-web", value: "app-web-2", pass: false },
    { pattern: "a*z", value: "abcz", pass: true },
    { pattern: "a*z", value: "az", pass: true },
    { pattern: "a*z", value: "abc", pass: false },
    { pattern: "a*b*c", value: "a-b-c", pass: true },
    // Regular-expression characters in a glob are literal.
    { pattern: "v1.*", value: "v1.2", pass: true },
    { pattern: "v1.*", value: "v1x2", pass: false },
    { pattern: "(a|b)*", value: "(a|b)x", pass: true },
    { pattern: "(a|b)*", value: "ax", pass: false },
    { pattern: "[ab]*", value: "ax", pass: false },
    { pattern: "[ab]*", value: "[ab]x", pass: true },
    // Globs match across newlines too (no partial match).
    { pattern: "a*", value: "a\nb", pass: true },
  ];
  for (const c of cases) {
    it(`${JSON.stringify(c.pattern)} ${c.pass ? "matches" : "does not match"} ${JSON.stringify(c.value)}`, () => {
      const allowed = run({ allowed: [c.pattern] }, c.value);
      const forbidden = run({ forbidden: [c.pattern] }, c.value);
      if (c.pass) {
        assert.deepEqual(allowed, []);
        assertOneFinding(forbidden, "which is forbidden");
      } else {
        assertOneFinding(allowed, `allowed: ${JSON.stringify(c.pattern)}`);
        assert.deepEqual(forbidden, []);
      }
    });
  }

  it("exact entries and globs mix in one list", () => {
    const raw = { allowed: ["exact", "pre-*"] };
    assert.deepEqual(run(raw, "exact"), []);
    assert.deepEqual(run(raw, "pre-x"), []);
    assertOneFinding(run(raw, "exactly"), 'allowed: "exact", "pre-*"');
  });
});

describe("StringRestriction: regex", () => {
  const cases: Array<{ regex: string; value: string; pass: boolean }> = [
    { regex: "ab+", value: "abbb", pass: true },
    { regex: "ab+", value: "xabb", pass: false },
    { regex: "ab+", value: "abbx", pass: false },
    { regex: "ab+", value: "", pass: false },
    // Anchoring covers the whole alternation, not just its ends.
    { regex: "a|b", value: "a", pass: true },
    { regex: "a|b", value: "b", pass: true },
    { regex: "a|b", value: "ab", pass: false },
    { regex: "a|b", value: "xa", pass: false },
    // Explicit anchors are harmless.
    { regex: "^[a-z0-9-]+$", value: "web-1", pass: true },
    { regex: "^[a-z0-9-]+$", value: "Web-1", pass: false },
    { regex: ".*", value: "", pass: true },
  ];
  for (const c of cases) {
    it(`/${c.regex}/ ${c.pass ? "matches" : "does not match"} ${JSON.stringify(c.value)}`, () => {
      const findings = run({ regex: c.regex }, c.value);
      if (c.pass) assert.deepEqual(findings, []);
      else assertOneFinding(findings, `is ${JSON.stringify(c.value)}; must match `);
    });
  }

  it("the message shows the anchored expression", () => {
    assertOneFinding(run({ regex: "ab+" }, "x"), "must match ^(?:ab+)$");
  });

  it("regex, allowed and forbidden all apply", () => {
    const raw = { regex: "[a-z]+", forbidden: ["bad"] };
    assert.deepEqual(run(raw, "good"), []);
    assertOneFinding(run(raw, "bad"), "forbidden");
    assertOneFinding(run(raw, "Good"), "must match");
  });

  const invalid: Array<{ regex: unknown; message: string }> = [
    { regex: "(", message: "invalid regular expression" },
    { regex: "[a-", message: "invalid regular expression" },
    { regex: "a{2,1}", message: "invalid regular expression" },
    { regex: 42, message: "must be a string, got 42" },
    { regex: ["a"], message: "must be a string" },
  ];
  for (const c of invalid) {
    it(`regex ${JSON.stringify(c.regex)} is a compile issue at its path`, () => {
      const { issues } = compile({ regex: c.regex });
      assert.equal(issues.length, 1, JSON.stringify(issues));
      assert.deepEqual(issues[0]!.path, [...PATH, "regex"]);
      assert.ok(issues[0]!.message.includes(c.message), issues[0]!.message);
    });
  }

  it("an invalid regex in a policy fails compilePodRestriction with the policy path", () => {
    const r = compilePodRestriction({
      apiVersion: "imprimatur.dev/v1alpha1",
      kind: "PodRestriction",
      metadata: { name: "p" },
      spec: { spec: { containers: [{ name: { regex: "web-(" } }] } },
    });
    assert.equal(r.policy, undefined);
    assert.equal(r.issues.length, 1);
    assert.deepEqual(r.issues[0]!.path, ["spec", "spec", "containers", 0, "name", "regex"]);
    assert.ok(r.issues[0]!.message.startsWith("invalid regular expression"), r.issues[0]!.message);
  });
});

describe("StringRestriction: pointer rules", () => {
  // value: undefined and null both mean unset.
  const cases: Array<{ name: string; raw: Record<string, unknown>; value: unknown; pass: boolean; message?: string }> = [
    // Default: unset fails only when the restriction requires something of the value.
    { name: "no rules: unset passes", raw: {}, value: undefined, pass: true },
    { name: "forbidden only: unset passes", raw: { forbidden: ["x"] }, value: undefined, pass: true },
    { name: "allowed: unset fails", raw: { allowed: ["a", "b"] }, value: undefined, pass: false, message: 'is unset; must be set (one of "a", "b")' },
    { name: "regex: unset fails", raw: { regex: "a+" }, value: undefined, pass: false, message: "is unset; must be set (matching ^(?:a+)$)" },
    { name: "allowed: null counts as unset", raw: { allowed: ["a"] }, value: null, pass: false, message: "is unset; must be set" },
    // allowNil
    { name: "allowNil true: unset passes despite allowed", raw: { allowNil: true, allowed: ["a"] }, value: undefined, pass: true },
    { name: "allowNil true: set values still checked", raw: { allowNil: true, allowed: ["a"] }, value: "b", pass: false, message: 'is "b"; allowed: "a"' },
    { name: "allowNil false: unset fails without value rules", raw: { allowNil: false }, value: undefined, pass: false, message: "is unset; must be set" },
    {
      name: "allowNil false: unset fails with only forbidden",
      raw: { allowNil: false, forbidden: ["x"] },
      value: null,
      pass: false,
      message: "is unset; must be set",
    },
    { name: "allowNil false: set passes", raw: { allowNil: false }, value: "x", pass: true },
    // forbidNil
    { name: "forbidNil: unset fails", raw: { forbidNil: true }, value: undefined, pass: false, message: "is unset; must be set" },
    { name: "forbidNil: set passes", raw: { forbidNil: true }, value: "", pass: true },
    { name: "forbidNil false: unset passes despite allowed", raw: { forbidNil: false, allowed: ["a"] }, value: undefined, pass: true },
    // requireNil
    { name: "requireNil: unset passes", raw: { requireNil: true }, value: undefined, pass: true },
    { name: "requireNil: set fails", raw: { requireNil: true }, value: "x", pass: false, message: 'is set to "x"; must be unset' },
    { name: "requireNil: even an empty string is set", raw: { requireNil: true }, value: "", pass: false, message: 'is set to ""; must be unset' },
    { name: "requireNil with allowed: unset passes", raw: { requireNil: true, allowed: ["a"] }, value: undefined, pass: true },
    { name: "allowNil true and forbidNil false agree", raw: { allowNil: true, forbidNil: false, allowed: ["a"] }, value: undefined, pass: true },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const findings = run(c.raw, c.value);
      if (c.pass) assert.deepEqual(findings, []);
      else assertOneFinding(findings, c.message!);
    });
  }

  const contradictions: Array<{ raw: Record<string, unknown>; at: string; message: string }> = [
    { raw: { allowNil: true, forbidNil: true }, at: "forbidNil", message: "contradicts allowNil" },
    { raw: { allowNil: false, forbidNil: false }, at: "forbidNil", message: "contradicts allowNil" },
    { raw: { requireNil: true, forbidNil: true }, at: "requireNil", message: "contradicts forbidNil/allowNil: false" },
    { raw: { requireNil: true, allowNil: false }, at: "requireNil", message: "contradicts forbidNil/allowNil: false" },
  ];
  for (const c of contradictions) {
    it(`${JSON.stringify(c.raw)} is a compile issue`, () => {
      const { issues } = compile(c.raw);
      assert.equal(issues.length, 1, JSON.stringify(issues));
      assert.deepEqual(issues[0]!.path, [...PATH, c.at]);
      assert.ok(issues[0]!.message.includes(c.message), issues[0]!.message);
    });
  }

  it("pointer rules must be booleans", () => {
    const { issues } = compile({ forbidNil: "yes" });
    assert.deepEqual(
      issues.map((i) => i.path),
      [[...PATH, "forbidNil"]],
    );
    assert.ok(issues[0]!.message.includes('must be true or false, got "yes"'));
  });

  it("a non-pointer field rejects the pointer rules, each with its path", () => {
    const { issues } = compile({ allowNil: true, forbidNil: false, requireNil: false, allowed: ["a"] }, { pointer: false });
    assert.deepEqual(
      issues.map((i) => i.path),
      ["allowNil", "forbidNil", "requireNil"].map((k) => [...PATH, k]),
    );
    for (const i of issues) assert.ok(i.message.includes("not a pointer in the Pod API"), i.message);
  });

  it("a non-pointer field has no nil rule: unset (inside an absent struct) passes", () => {
    assert.deepEqual(run({ allowed: ["a"] }, undefined, { pointer: false }), []);
    assertOneFinding(run({ allowed: ["a"] }, "", { pointer: false }), 'is ""; allowed: "a"');
  });
});

describe("StringRestriction: non-string values", () => {
  for (const value of [42, true, ["a"], { a: "b" }]) {
    it(`${JSON.stringify(value)} fails with "must be a string"`, () => {
      assertOneFinding(run({ allowed: ["a"] }, value), `must be a string, got ${JSON.stringify(value)}`);
      assertOneFinding(run({}, value), "must be a string");
    });
  }
});

describe("StringRestriction: host-path prefixes (pathPrefix)", () => {
  const opts: StringRestrictionOptions = { pointer: false, match: "pathPrefix" };
  const cases: Array<{ allowed: string[]; value: string; pass: boolean }> = [
    { allowed: ["/var/log"], value: "/var/log", pass: true },
    { allowed: ["/var/log"], value: "/var/log/", pass: true },
    { allowed: ["/var/log"], value: "/var/log/app", pass: true },
    { allowed: ["/var/log"], value: "/var/log/app/x.log", pass: true },
    // Segment boundaries: a longer name is not under the prefix.
    { allowed: ["/var/log"], value: "/var/logs", pass: false },
    { allowed: ["/var/log"], value: "/var/log2/app", pass: false },
    { allowed: ["/var/log"], value: "/var", pass: false },
    { allowed: ["/var/log"], value: "/", pass: false },
    // "../" cannot walk out of the prefix; "." and "//" are normalised.
    { allowed: ["/var/log"], value: "/var/log/../../etc", pass: false },
    { allowed: ["/var/log"], value: "/var/log/../lib", pass: false },
    { allowed: ["/var/log"], value: "/var/log/..", pass: false },
    { allowed: ["/var/log"], value: "/var/log/app/../other", pass: true },
    { allowed: ["/var/log"], value: "/var/lib/../log/app", pass: true },
    { allowed: ["/var/log"], value: "/var/./log//app", pass: true },
    // A prefix written with a trailing slash or unnormalised means the same.
    { allowed: ["/var/log/"], value: "/var/log", pass: true },
    { allowed: ["/var/log/"], value: "/var/logs", pass: false },
    { allowed: ["/var/x/../log"], value: "/var/log/a", pass: true },
    // "/" covers every absolute path.
    { allowed: ["/"], value: "/etc/shadow", pass: true },
    // Several prefixes.
    { allowed: ["/data", "/var/log"], value: "/data/db", pass: true },
    { allowed: ["/data", "/var/log"], value: "/database", pass: false },
  ];
  for (const c of cases) {
    it(`allowed ${JSON.stringify(c.allowed)} ${c.pass ? "covers" : "does not cover"} ${JSON.stringify(c.value)}`, () => {
      const findings = run({ allowed: c.allowed }, c.value, opts);
      if (c.pass) assert.deepEqual(findings, []);
      else assertOneFinding(findings, `is ${JSON.stringify(c.value)}; allowed: `);
    });
  }

  const forbiddenCases: Array<{ value: string; pass: boolean }> = [
    { value: "/etc", pass: false },
    { value: "/etc/", pass: false },
    { value: "/etc/kubernetes/admin.conf", pass: false },
    { value: "/var/../etc/shadow", pass: false },
    { value: "/etcd/data", pass: true },
    { value: "/data/etc", pass: true },
  ];
  for (const c of forbiddenCases) {
    it(`forbidden ["/etc"] ${c.pass ? "passes" : "denies"} ${JSON.stringify(c.value)}`, () => {
      const findings = run({ forbidden: ["/etc"] }, c.value, opts);
      if (c.pass) assert.deepEqual(findings, []);
      else assertOneFinding(findings, `is ${JSON.stringify(c.value)}, which is forbidden`);
    });
  }

  it("applies to hostPath.path of a volume entry in a policy", () => {
    const r = compilePodRestriction({
      apiVersion: "imprimatur.dev/v1alpha1",
      kind: "PodRestriction",
      metadata: { name: "host-logs" },
      spec: { spec: { volumes: [{ hostPath: { path: { allowed: ["/var/log"] } } }] } },
    });
    assert.deepEqual(r.issues, []);
    const pod = (path: string) =>
      podsInObject({
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name: "p" },
        spec: { containers: [{ name: "c", image: "nginx" }], volumes: [{ name: "logs", hostPath: { path } }] },
      })[0]!;
    assert.deepEqual(podRestrictionFindings(r.policy!, pod("/var/log/pods")), []);
    for (const bad of ["/var/logs", "/var/log/../../etc"]) {
      const findings = podRestrictionFindings(r.policy!, pod(bad));
      assert.equal(findings.length, 1, JSON.stringify(findings));
      assert.equal(findings[0]!.field, "spec.volumes[0].hostPath.path");
      assert.equal(findings[0]!.rule, "spec.spec.volumes[0].hostPath.path");
      assert.ok(findings[0]!.message.includes(`is ${JSON.stringify(bad)}; allowed: "/var/log"`), findings[0]!.message);
    }
  });
});
