// CollectionRestriction, StringListRestriction and StringMapRestriction
// (src/core/pod-restriction/restrictions/{collection,string-list,string-map}-restriction.ts), and sysctls
// restricted as a map name → value.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { compilePodRestriction, podRestrictionFindings } from "../../../src/core/pod-restriction/pod-restriction.ts";
import { checkCollection, compileCollectionRule, isEmptyCollection } from "../../../src/core/pod-restriction/restrictions/collection-restriction.ts";
import {
  CompileContext,
  type CompileIssue,
  type EvalContext,
  type Finding,
  type RawPath,
} from "../../../src/core/pod-restriction/restrictions/restriction-support.ts";
import { compileStringListRestriction } from "../../../src/core/pod-restriction/restrictions/string-list-restriction.ts";
import { compileStringMapRestriction } from "../../../src/core/pod-restriction/restrictions/string-map-restriction.ts";
import { podsInObject } from "../../../src/core/workload-templates.ts";

const ecx: EvalContext = { podSpec: { value: {}, field: "spec" }, isTemplate: false, onlyContainers: false };

function has(findings: Finding[], expected: { field: string; message: string }): void {
  assert.ok(
    findings.some((f) => f.field === expected.field && f.message.includes(expected.message)),
    `expected a finding at ${expected.field} containing ${JSON.stringify(expected.message)}, got ${JSON.stringify(findings, null, 1)}`,
  );
}

describe("CollectionRestriction", () => {
  const PATH: RawPath = ["spec", "x"];
  it("forbidEmpty and requireEmpty together are a compile issue", () => {
    const cx = new CompileContext();
    compileCollectionRule({ forbidEmpty: true, requireEmpty: true }, PATH, cx);
    assert.deepEqual(cx.issues, [{ path: ["spec", "x", "requireEmpty"], message: "contradicts forbidEmpty" }]);
  });

  it("the rules must be booleans", () => {
    const cx = new CompileContext();
    compileCollectionRule({ forbidEmpty: "yes" }, PATH, cx);
    assert.deepEqual(
      cx.issues.map((i) => i.path),
      [["spec", "x", "forbidEmpty"]],
    );
  });

  const emptiness: Array<{ value: unknown; empty: boolean }> = [
    { value: undefined, empty: true },
    { value: null, empty: true },
    { value: [], empty: true },
    { value: {}, empty: true },
    { value: [""], empty: false },
    { value: { a: "" }, empty: false },
    { value: "", empty: false },
  ];
  for (const c of emptiness) {
    it(`${JSON.stringify(c.value) ?? "undefined"} is ${c.empty ? "" : "not "}empty (an absent list counts as empty)`, () => {
      assert.equal(isEmptyCollection(c.value), c.empty);
    });
  }

  const cases: Array<{ rule: { forbidEmpty: boolean; requireEmpty: boolean }; size: number; message?: string }> = [
    { rule: { forbidEmpty: true, requireEmpty: false }, size: 0, message: "is empty; must have at least one of things" },
    { rule: { forbidEmpty: true, requireEmpty: false }, size: 1 },
    { rule: { forbidEmpty: false, requireEmpty: true }, size: 0 },
    { rule: { forbidEmpty: false, requireEmpty: true }, size: 2, message: "has 2 things; must be empty" },
    { rule: { forbidEmpty: false, requireEmpty: false }, size: 0 },
  ];
  for (const c of cases) {
    it(`${JSON.stringify(c.rule)} with ${c.size} elements ${c.message ? "fails" : "passes"}`, () => {
      const out: Finding[] = [];
      checkCollection(c.rule, { value: [], field: "spec.x" }, c.size, "r", "things", out);
      if (!c.message) assert.deepEqual(out, []);
      else assert.deepEqual(out, [{ field: "spec.x", rule: "r", message: c.message }]);
    });
  }
});

describe("StringListRestriction", () => {
  const PATH: RawPath = ["spec", "caps"];
  const FIELD = "spec.containers[0].securityContext.capabilities.drop";
  function compile(raw: unknown): { check: ((value: unknown) => Finding[]) | undefined; issues: CompileIssue[] } {
    const cx = new CompileContext();
    const compiled = compileStringListRestriction(raw, PATH, cx, "R");
    const check = compiled
      ? (value: unknown) => {
          const out: Finding[] = [];
          compiled.check({ value, field: FIELD }, ecx, out);
          return out;
        }
      : undefined;
    return { check, issues: cx.issues };
  }
  function run(raw: unknown, value: unknown): Finding[] {
    const { check, issues } = compile(raw);
    assert.deepEqual(issues, []);
    return check!(value);
  }

  const cases: Array<{ name: string; raw: unknown; value: unknown; expect: Array<{ field: string; message: string }> }> = [
    { name: "values: every element allowed", raw: { values: { allowed: ["ALL", "NET_*"] } }, value: ["ALL", "NET_RAW"], expect: [] },
    {
      name: "values: each element not allowed is reported at its index",
      raw: { values: { allowed: ["ALL"] } },
      value: ["SYS_ADMIN", "ALL", "NET_RAW"],
      expect: [
        { field: `${FIELD}[0]`, message: 'is "SYS_ADMIN"; allowed: "ALL"' },
        { field: `${FIELD}[2]`, message: 'is "NET_RAW"; allowed: "ALL"' },
      ],
    },
    {
      name: "values (seed spelling whitelist)",
      raw: { values: { whitelist: ["ALL"] } },
      value: ["KILL"],
      expect: [{ field: `${FIELD}[0]`, message: 'is "KILL"; allowed: "ALL"' }],
    },
    { name: "shorthand allowed", raw: { allowed: ["ALL"] }, value: ["KILL"], expect: [{ field: `${FIELD}[0]`, message: 'is "KILL"; allowed: "ALL"' }] },
    {
      name: "shorthand whitelist (the seed's volumeType form)",
      raw: { whitelist: ["configMap", "secret"] },
      value: ["secret", "hostPath"],
      expect: [{ field: `${FIELD}[1]`, message: 'is "hostPath"; allowed: "configMap", "secret"' }],
    },
    { name: "shorthand blacklist", raw: { blacklist: ["SYS_*"] }, value: ["SYS_ADMIN"], expect: [{ field: `${FIELD}[0]`, message: "which is forbidden" }] },
    { name: "shorthand regex", raw: { regex: "[A-Z_]+" }, value: ["ok", "OK"], expect: [{ field: `${FIELD}[0]`, message: "must match" }] },
    { name: "values: an empty or absent list passes", raw: { allowed: ["ALL"] }, value: undefined, expect: [] },
    { name: "requiredValues present", raw: { requiredValues: ["ALL"] }, value: ["NET_RAW", "ALL"], expect: [] },
    {
      name: "requiredValues missing",
      raw: { requiredValues: ["ALL"] },
      value: ["NET_RAW"],
      expect: [{ field: FIELD, message: 'is ["NET_RAW"]; must include "ALL"' }],
    },
    {
      name: "requiredValues on an absent list",
      raw: { requiredValues: ["ALL"] },
      value: undefined,
      expect: [{ field: FIELD, message: 'is []; must include "ALL"' }],
    },
    {
      name: "each missing required value is reported",
      raw: { requiredValues: ["A", "B"] },
      value: [],
      expect: [
        { field: FIELD, message: 'must include "A"' },
        { field: FIELD, message: 'must include "B"' },
      ],
    },
    { name: "requireEmpty passes an absent list", raw: { requireEmpty: true }, value: undefined, expect: [] },
    {
      name: "requireEmpty fails a non-empty list",
      raw: { requireEmpty: true },
      value: ["NET_RAW"],
      expect: [{ field: FIELD, message: "has 1 values; must be empty" }],
    },
    {
      name: "forbidEmpty fails an absent list",
      raw: { forbidEmpty: true },
      value: undefined,
      expect: [{ field: FIELD, message: "is empty; must have at least one of values" }],
    },
    { name: "forbidEmpty fails an empty list", raw: { forbidEmpty: true }, value: [], expect: [{ field: FIELD, message: "is empty" }] },
    { name: "not a list", raw: { allowed: ["a"] }, value: "ALL", expect: [{ field: FIELD, message: 'must be a list, got "ALL"' }] },
    { name: "a non-string element", raw: { allowed: ["a"] }, value: [7], expect: [{ field: `${FIELD}[0]`, message: "must be a string, got 7" }] },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const findings = run(c.raw, c.value);
      assert.equal(findings.length, c.expect.length, JSON.stringify(findings));
      for (const e of c.expect) has(findings, e);
      for (const f of findings) assert.equal(f.rule, "R");
    });
  }

  it("element rules both under values and directly are a compile issue", () => {
    const { issues } = compile({ values: { allowed: ["a"] }, allowed: ["b"] });
    assert.equal(issues.length, 1);
    assert.deepEqual(issues[0]!.path, [...PATH, "allowed"]);
    assert.ok(issues[0]!.message.includes("either under values or directly, not both"));
  });

  it("whitelist next to values is the same compile issue", () => {
    const { issues } = compile({ values: { allowed: ["a"] }, whitelist: ["b"] });
    assert.equal(issues.length, 1);
    assert.ok(issues[0]!.message.includes("not both"));
  });

  it("pointer rules are not list keys", () => {
    const { issues } = compile({ allowNil: true });
    assert.equal(issues.length, 1);
    assert.deepEqual(issues[0]!.path, [...PATH, "allowNil"]);
    assert.ok(issues[0]!.message.includes('unknown field "allowNil"'));
  });

  it("the element restriction inside values rejects pointer rules (elements are never unset)", () => {
    const { issues } = compile({ values: { forbidNil: true } });
    assert.deepEqual(
      issues.map((i) => i.path),
      [[...PATH, "values", "forbidNil"]],
    );
  });

  it("requiredValues must be a list of strings", () => {
    const { issues } = compile({ requiredValues: "ALL" });
    assert.deepEqual(
      issues.map((i) => i.path),
      [[...PATH, "requiredValues"]],
    );
  });

  it("exposes the element restriction (used to select volume types)", () => {
    const cx = new CompileContext();
    const compiled = compileStringListRestriction({ whitelist: ["configMap"] }, PATH, cx, "R");
    assert.equal(compiled?.values?.accepts("configMap"), true);
    assert.equal(compiled?.values?.accepts("hostPath"), false);
    assert.equal(compileStringListRestriction({ requiredValues: ["x"] }, PATH, cx, "R")?.values, undefined);
  });
});

describe("StringMapRestriction", () => {
  const PATH: RawPath = ["spec", "metadata", "labels"];
  const FIELD = "metadata.labels";
  function compile(raw: unknown): { run: ((value: unknown) => Finding[]) | undefined; issues: CompileIssue[] } {
    const cx = new CompileContext();
    const check = compileStringMapRestriction(raw, PATH, cx, "R");
    const run = check
      ? (value: unknown) => {
          const out: Finding[] = [];
          check({ value, field: FIELD }, ecx, out);
          return out;
        }
      : undefined;
    return { run, issues: cx.issues };
  }
  function run(raw: unknown, value: unknown): Finding[] {
    const c = compile(raw);
    assert.deepEqual(c.issues, []);
    return c.run!(value);
  }

  const cases: Array<{ name: string; raw: unknown; value: unknown; expect: Array<{ field: string; message: string }> }> = [
    // Allowed and forbidden keys.
    { name: "allowedKeys: all keys allowed", raw: { allowedKeys: ["app", "team-*"] }, value: { app: "x", "team-a": "y" }, expect: [] },
    {
      name: "allowedKeys: other keys reported at the entry",
      raw: { allowedKeys: ["app", "team-*"] },
      value: { app: "x", owner: "y" },
      expect: [{ field: `${FIELD}[owner]`, message: 'key "owner" is not allowed (allowed: "app", "team-*")' }],
    },
    {
      name: "keyWhitelist (seed spelling)",
      raw: { keyWhitelist: ["app"] },
      value: { env: "x" },
      expect: [{ field: `${FIELD}[env]`, message: 'key "env" is not allowed' }],
    },
    {
      name: "forbiddenKeys",
      raw: { forbiddenKeys: ["kubernetes.io/*"] },
      value: { "kubernetes.io/x": "1", app: "a" },
      expect: [{ field: `${FIELD}[kubernetes.io/x]`, message: 'key "kubernetes.io/x" is forbidden' }],
    },
    {
      name: "keyBlacklist (seed spelling)",
      raw: { keyBlacklist: ["debug"] },
      value: { debug: "1" },
      expect: [{ field: `${FIELD}[debug]`, message: 'key "debug" is forbidden' }],
    },
    { name: "forbiddenKeys on an absent map", raw: { forbiddenKeys: ["debug"] }, value: undefined, expect: [] },
    // Required keys.
    { name: "requiredKeys present", raw: { requiredKeys: ["app"] }, value: { app: "" }, expect: [] },
    {
      name: "requiredKeys missing",
      raw: { requiredKeys: ["app", "team"] },
      value: { app: "a" },
      expect: [{ field: FIELD, message: 'must have the key "team"' }],
    },
    { name: "requiredKeys on an absent map", raw: { requiredKeys: ["app"] }, value: undefined, expect: [{ field: FIELD, message: 'must have the key "app"' }] },
    { name: "requireKeys (seed spelling)", raw: { requireKeys: ["app"] }, value: {}, expect: [{ field: FIELD, message: 'must have the key "app"' }] },
    { name: "{key: value} item satisfied", raw: { requiredKeys: [{ tier: "web" }] }, value: { tier: "web" }, expect: [] },
    {
      name: "{key: value} item with another value",
      raw: { requiredKeys: [{ tier: "web" }] },
      value: { tier: "db" },
      expect: [{ field: `${FIELD}[tier]`, message: 'is "db"; must be "web"' }],
    },
    {
      name: "{key: value} item missing",
      raw: { requiredKeys: [{ tier: "web" }] },
      value: {},
      expect: [{ field: FIELD, message: 'must have the key "tier" = "web"' }],
    },
    {
      name: "plain and {key: value} items mixed (the seed's kube-system example)",
      raw: { requireKeys: ["k8s-app", { "addonmanager.kubernetes.io/mode": "Reconcile" }] },
      value: { "k8s-app": "dns", "addonmanager.kubernetes.io/mode": "Reconcile" },
      expect: [],
    },
    // Value restrictions.
    { name: "values: exact key passes", raw: { values: { env: { allowed: ["prod", "dev"] } } }, value: { env: "dev" }, expect: [] },
    {
      name: "values: exact key fails at the entry",
      raw: { values: { env: { allowed: ["prod", "dev"] } } },
      value: { env: "test" },
      expect: [{ field: `${FIELD}[env]`, message: 'is "test"; allowed: "prod", "dev"' }],
    },
    {
      name: "valueRestrictions (seed spelling)",
      raw: { valueRestrictions: { env: { whitelist: ["prod"] } } },
      value: { env: "dev" },
      expect: [{ field: `${FIELD}[env]`, message: 'is "dev"; allowed: "prod"' }],
    },
    {
      name: "values: a glob key applies to every matching key",
      raw: { values: { "team.example.com/*": { regex: "[a-z]+" } } },
      value: { "team.example.com/owner": "alice", "team.example.com/cost": "C42", other: "C42" },
      expect: [{ field: `${FIELD}[team.example.com/cost]`, message: 'is "C42"; must match' }],
    },
    {
      name: "values: exact and glob rules both apply to a key",
      raw: { values: { "a*": { forbidden: ["x"] }, ab: { allowed: ["y"] } } },
      value: { ab: "x" },
      expect: [
        { field: `${FIELD}[ab]`, message: "forbidden" },
        { field: `${FIELD}[ab]`, message: 'allowed: "y"' },
      ],
    },
    // An absent key is not checked by values (even though `allowed` would fail an unset value)...
    { name: "values: absent key not checked", raw: { values: { env: { allowed: ["prod"] } } }, value: { app: "a" }, expect: [] },
    { name: "values: absent map not checked", raw: { values: { env: { allowed: ["prod"] } } }, value: undefined, expect: [] },
    // ...unless its restriction says so.
    {
      name: "values: forbidNil makes an absent key fail",
      raw: { values: { env: { forbidNil: true, allowed: ["prod"] } } },
      value: {},
      expect: [{ field: `${FIELD}[env]`, message: "is unset; must be set" }],
    },
    {
      name: "values: allowNil false makes an absent key fail",
      raw: { values: { env: { allowNil: false } } },
      value: undefined,
      expect: [{ field: `${FIELD}[env]`, message: "is unset; must be set" }],
    },
    {
      name: "values: forbidNil with the key present checks the value",
      raw: { values: { env: { forbidNil: true, allowed: ["prod"] } } },
      value: { env: "dev" },
      expect: [{ field: `${FIELD}[env]`, message: 'is "dev"; allowed: "prod"' }],
    },
    {
      name: "values: requireNil forbids the key",
      raw: { values: { debug: { requireNil: true } } },
      value: { debug: "1" },
      expect: [{ field: `${FIELD}[debug]`, message: 'is set to "1"; must be unset' }],
    },
    // Collection rules.
    {
      name: "forbidEmpty on an absent map",
      raw: { forbidEmpty: true },
      value: undefined,
      expect: [{ field: FIELD, message: "is empty; must have at least one of keys" }],
    },
    {
      name: "requireEmpty with keys",
      raw: { requireEmpty: true },
      value: { a: "1", b: "2" },
      expect: [{ field: FIELD, message: "has 2 keys; must be empty" }],
    },
    { name: "requireEmpty on an empty map", raw: { requireEmpty: true }, value: {}, expect: [] },
    // Not a map.
    { name: "a list is not a map", raw: { allowedKeys: ["a"] }, value: ["a"], expect: [{ field: FIELD, message: 'must be a map, got ["a"]' }] },
    {
      name: "a non-string value fails a value restriction",
      raw: { values: { a: { allowed: ["1"] } } },
      value: { a: 1 },
      expect: [{ field: `${FIELD}[a]`, message: "must be a string, got 1" }],
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const findings = run(c.raw, c.value);
      assert.equal(findings.length, c.expect.length, JSON.stringify(findings));
      for (const e of c.expect) has(findings, e);
      for (const f of findings) assert.equal(f.rule, "R");
    });
  }

  const invalid: Array<{ name: string; raw: unknown; path: RawPath; message: string }> = [
    {
      name: "keyWhitelist and allowedKeys together",
      raw: { keyWhitelist: ["a"], allowedKeys: ["b"] },
      path: [...PATH, "allowedKeys"],
      message: "mean the same",
    },
    {
      name: "a glob key requiring presence",
      raw: { values: { "a*": { forbidNil: true } } },
      path: [...PATH, "values", "a*"],
      message: "cannot require its key to be present; use requiredKeys",
    },
    {
      name: "a requiredKeys item with two keys",
      raw: { requiredKeys: [{ a: "1", b: "2" }] },
      path: [...PATH, "requiredKeys", 0],
      message: "must be a key, or a single {key: value} mapping",
    },
    {
      name: "a requiredKeys item with a non-string value",
      raw: { requiredKeys: [{ a: 1 }] },
      path: [...PATH, "requiredKeys", 0],
      message: "must be a key, or a single {key: value} mapping",
    },
    { name: "requiredKeys not a list", raw: { requiredKeys: "app" }, path: [...PATH, "requiredKeys"], message: "must be a list of keys" },
    { name: "values not a mapping", raw: { values: ["a"] }, path: [...PATH, "values"], message: "must be a mapping of key → string restriction" },
    { name: "a bad value restriction", raw: { values: { a: { regex: "(" } } }, path: [...PATH, "values", "a", "regex"], message: "invalid regular expression" },
    {
      name: "an unknown key",
      raw: { keys: ["a"] },
      path: [...PATH, "keys"],
      message: 'unknown field "keys"; known fields: forbidEmpty, requireEmpty, allowedKeys, forbiddenKeys, requiredKeys, values',
    },
  ];
  for (const c of invalid) {
    it(`${c.name} is a compile issue`, () => {
      const { issues } = compile(c.raw);
      assert.equal(issues.length, 1, JSON.stringify(issues));
      assert.deepEqual(issues[0]!.path, c.path);
      assert.ok(issues[0]!.message.includes(c.message), issues[0]!.message);
    });
  }
});

describe("sysctls as a map name → value", () => {
  const policy = (() => {
    const r = compilePodRestriction({
      apiVersion: "imprimatur.dev/v1alpha1",
      kind: "PodRestriction",
      metadata: { name: "sysctls" },
      spec: {
        spec: {
          securityContext: {
            sysctls: {
              allowedKeys: ["kernel.shm*", "net.ipv4.ping_group_range"],
              requiredKeys: ["kernel.shmmni"],
              values: { "kernel.shm*": { regex: "[0-9]+" } },
            },
          },
        },
      },
    });
    assert.deepEqual(r.issues, []);
    return r.policy!;
  })();
  const findings = (sysctls: unknown) =>
    podRestrictionFindings(
      policy,
      podsInObject({
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name: "p" },
        spec: { securityContext: { sysctls }, containers: [{ name: "c", image: "nginx" }] },
      })[0]!,
    );
  const RULE = "spec.spec.securityContext.sysctls";

  it("allowed sysctls with valid values pass", () => {
    assert.deepEqual(
      findings([
        { name: "kernel.shmmni", value: "4096" },
        { name: "net.ipv4.ping_group_range", value: "0 1" },
      ]),
      [],
    );
  });

  it("a sysctl not allowed is reported at spec.securityContext.sysctls[i].name", () => {
    assert.deepEqual(
      findings([
        { name: "kernel.shmmni", value: "1" },
        { name: "net.ipv4.ip_forward", value: "1" },
      ]),
      [
        {
          field: "spec.securityContext.sysctls[1].name",
          rule: RULE,
          message: 'key "net.ipv4.ip_forward" is not allowed (allowed: "kernel.shm*", "net.ipv4.ping_group_range")',
        },
      ],
    );
  });

  it("a value restriction on a sysctl names the sysctl's entry", () => {
    const out = findings([
      { name: "kernel.shmall", value: "lots" },
      { name: "kernel.shmmni", value: "1" },
    ]);
    assert.equal(out.length, 1, JSON.stringify(out));
    assert.equal(out[0]!.field.startsWith("spec.securityContext.sysctls[0]"), true, out[0]!.field);
    assert.equal(out[0]!.rule, RULE);
    assert.ok(out[0]!.message.includes('is "lots"; must match'), out[0]!.message);
  });

  it("a required sysctl that is missing is reported at the list", () => {
    assert.deepEqual(findings([{ name: "kernel.shmall", value: "1" }]), [
      { field: "spec.securityContext.sysctls", rule: RULE, message: 'must have the key "kernel.shmmni"' },
    ]);
    assert.deepEqual(findings(undefined), [{ field: "spec.securityContext.sysctls", rule: RULE, message: 'must have the key "kernel.shmmni"' }]);
  });
});
