// Loading a policy's matchConstraints and matchConditions (compile-request-match.ts): every malformed field is a
// load error that names the field and says why, and an exclusion is a load error exactly when it leaves the policy
// nothing to apply to, with ValidatingAdmissionPolicy's meanings of resources, subresources and "*".
import assert from "node:assert/strict";
import { test } from "node:test";
import { Ajv } from "ajv";
import imagePolicySchema from "../../src/core/image-policy/image-policy.schema.json" with { type: "json" };
import podRestrictionSchema from "../../src/core/pod-restriction/pod-restriction.schema.json" with { type: "json" };
import { compileRequestMatch } from "../../src/core/request-match/compile-request-match.ts";

function issuesOf(spec: Record<string, unknown>): string[] {
  return compileRequestMatch(spec).issues.map((i) => `${i.path.join(".")}: ${i.message}`);
}

const rule = { apiGroups: [""], apiVersions: ["v1"], resources: ["pods"], operations: ["CREATE"] };
const constraints = (c: Record<string, unknown>) => issuesOf({ matchConstraints: c });
const NAME_RULE = "must be a name of letters, digits, '-', '_' and '.', starting and ending alphanumeric, at most 63 characters";
const NOTHING_LEFT = "spec.matchConstraints.excludeResourceRules: excludes every resource that resourceRules match, so the policy would apply to nothing";
const NO_REQUEST_LEFT = "spec.matchConstraints.excludeResourceRules: excludes every request, so the policy would apply to nothing";
const NO_SUBJECT_LEFT = "spec.matchConstraints.excludeSubjects: excludes every subject the policy matches, so the policy would apply to nothing";

test("a spec with load errors yields no match at all, not a partial one", () => {
  assert.deepEqual(compileRequestMatch({ matchConstraints: { resourceRules: [rule], subjects: [{ kind: "Robot", name: "r" }] } }), {
    issues: [{ path: ["spec", "matchConstraints", "subjects", 0, "kind"], message: 'must be one of User, Group, ServiceAccount, got "Robot"' }],
  });
});

test("matchConstraints and its lists must have the right shapes, each error at its field", () => {
  assert.deepEqual(issuesOf({ matchConstraints: ["resourceRules"] }), ["spec.matchConstraints: must be a mapping"]);
  assert.deepEqual(issuesOf({ matchConstraints: "pods" }), ["spec.matchConstraints: must be a mapping"]);
  for (const field of ["resourceRules", "excludeResourceRules", "subjects", "excludeSubjects"]) {
    assert.deepEqual(constraints({ [field]: { kind: "User" } }), [`spec.matchConstraints.${field}: must be a list`]);
  }
  assert.deepEqual(constraints({ resourceRules: ["pods"] }), [
    "spec.matchConstraints.resourceRules.0: must be a mapping with apiGroups, apiVersions, resources and operations",
  ]);
  assert.deepEqual(constraints({ subjects: ["alice"] }), ["spec.matchConstraints.subjects.0: must be a mapping with kind and name"]);
});

test("resource rules: every list required and of strings, no empty version, resources as resource or resource/subresource", () => {
  const { resources: _, ...withoutResources } = rule;
  assert.deepEqual(constraints({ resourceRules: [withoutResources] }), ["spec.matchConstraints.resourceRules.0.resources: is required"]);
  assert.deepEqual(constraints({ excludeResourceRules: [{ ...rule, apiGroups: "apps" }] }), [
    "spec.matchConstraints.excludeResourceRules.0.apiGroups: must be a list of strings",
  ]);
  assert.deepEqual(constraints({ resourceRules: [{ ...rule, apiVersions: ["v1", 1] }] }), [
    "spec.matchConstraints.resourceRules.0.apiVersions: must be a list of strings",
  ]);
  assert.deepEqual(constraints({ resourceRules: [{ ...rule, apiVersions: ["v1", ""] }] }), [
    'spec.matchConstraints.resourceRules.0.apiVersions.1: must be a version ("v1") or "*" for any, not empty',
  ]);
  for (const resource of ["pods/", "/status", "pods//status", "pods/status/x"]) {
    assert.deepEqual(constraints({ resourceRules: [{ ...rule, resources: ["pods", resource] }] }), [
      `spec.matchConstraints.resourceRules.0.resources.1: must be a resource ("pods", "*") or resource/subresource ("pods/ephemeralcontainers", "*/*"), got ${JSON.stringify(resource)}`,
    ]);
  }
  assert.deepEqual(constraints({ resourceRules: [{ ...rule, resources: ["pods", "pods/status", "*", "*/*", "*/status", "pods/*"] }] }), []);
});

test("subjects: a non-empty name, and a namespace for service accounts only", () => {
  assert.deepEqual(constraints({ subjects: [{ kind: "User", name: "" }] }), ['spec.matchConstraints.subjects.0.name: must be a name ("*" matches any)']);
  assert.deepEqual(constraints({ excludeSubjects: [{ kind: "Group", name: 7 }] }), [
    'spec.matchConstraints.excludeSubjects.0.name: must be a name ("*" matches any)',
  ]);
  for (const kind of ["User", "Group"]) {
    assert.deepEqual(constraints({ subjects: [{ kind, name: "a", namespace: "team-a" }] }), [
      `spec.matchConstraints.subjects.0.namespace: applies to ServiceAccount subjects only, not ${kind}`,
    ]);
  }
  for (const namespace of ["", 5]) {
    assert.deepEqual(constraints({ subjects: [{ kind: "ServiceAccount", name: "builder", namespace }] }), [
      "spec.matchConstraints.subjects.0.namespace: must be a namespace name",
    ]);
  }
  assert.deepEqual(compileRequestMatch({ matchConstraints: { subjects: [{ kind: "ServiceAccount", name: "builder", namespace: "ci" }] } }).match, {
    subjects: [{ kind: "ServiceAccount", name: "builder", namespace: "ci" }],
  });
});

test("matchConditions: each a mapping, names as VAP's (alphanumeric ends, at most 63), a non-blank expression, at most 64", () => {
  const at = (name: unknown) => issuesOf({ matchConditions: [{ name, expression: "true" }] });
  assert.deepEqual(issuesOf({ matchConditions: ["true"] }), ["spec.matchConditions.0: must be a mapping with name and expression"]);
  for (const name of [undefined, 123, "", "-leading", "trailing-", "has space", "slash/inside", "a".repeat(64)]) {
    assert.deepEqual(at(name), [`spec.matchConditions.0.name: ${NAME_RULE}`], `name ${JSON.stringify(name)}`);
  }
  for (const name of ["a", "a.b_c-d", "A9", "a".repeat(63)]) assert.deepEqual(at(name), [], `name ${name}`);
  for (const expression of [undefined, 1, "", "   "]) {
    assert.deepEqual(issuesOf({ matchConditions: [{ name: "a", expression }] }), ["spec.matchConditions.0.expression: must be a CEL expression"]);
  }
  const conditions = (n: number) => Array.from({ length: n }, (_, i) => ({ name: `c${i}`, expression: "true" }));
  assert.deepEqual(issuesOf({ matchConditions: conditions(64) }), []);
  assert.deepEqual(issuesOf({ matchConditions: conditions(65) }), ["spec.matchConditions: has 65 conditions; at most 64 are allowed"]);
});

test("an empty resourceRules or subjects is a load error, in the compiler and both kinds' schemas: it would match no request", () => {
  assert.deepEqual(constraints({ resourceRules: [] }), [
    "spec.matchConstraints.resourceRules: is empty, so the policy would apply to nothing; leave it out for every resource",
  ]);
  assert.deepEqual(constraints({ subjects: [] }), ["spec.matchConstraints.subjects: is empty, so the policy would apply to nothing; leave it out for anyone"]);
  assert.deepEqual(constraints({ excludeResourceRules: [], excludeSubjects: [] }), [], "empty exclusions exclude nothing");
  assert.deepEqual(issuesOf({ matchConditions: [] }), []);
  for (const schema of [imagePolicySchema, podRestrictionSchema] as Array<{ $defs: Record<string, unknown> }>) {
    const validate = new Ajv({ strict: false }).compile({ $defs: schema.$defs, $ref: "#/$defs/matchConstraints" });
    assert.equal(validate({ resourceRules: [] }), false);
    assert.equal(validate({ subjects: [] }), false);
    assert.equal(validate({ excludeResourceRules: [], excludeSubjects: [] }), true);
  }
});

test("excluded resources: an error only when every matched rule is excluded", () => {
  const deployments = { apiGroups: ["apps"], apiVersions: ["v1"], resources: ["deployments"], operations: ["CREATE"] };
  assert.deepEqual(constraints({ resourceRules: [rule, deployments], excludeResourceRules: [rule] }), [], "deployments are left");
  assert.deepEqual(constraints({ resourceRules: [rule, deployments], excludeResourceRules: [deployments, rule] }), [NOTHING_LEFT]);
  assert.deepEqual(constraints({ resourceRules: [rule], excludeResourceRules: [deployments, rule] }), [NOTHING_LEFT], "one of several exclusions suffices");
  // Each list of the exclusion must cover the matched one's.
  assert.deepEqual(constraints({ resourceRules: [rule], excludeResourceRules: [{ ...rule, apiGroups: ["apps"] }] }), []);
  assert.deepEqual(constraints({ resourceRules: [{ ...rule, apiGroups: ["", "apps"] }], excludeResourceRules: [rule] }), [], "apps is left");
  assert.deepEqual(constraints({ resourceRules: [{ ...rule, resources: ["pods", "services"] }], excludeResourceRules: [rule] }), [], "services are left");
  assert.deepEqual(constraints({ resourceRules: [{ ...rule, resources: ["services"] }], excludeResourceRules: [rule] }), []);
});

test("excluded resources: subresources apart from their resource, '*' in either part", () => {
  const matching = (resources: string[], excluded: string[]) =>
    constraints({ resourceRules: [{ ...rule, resources }], excludeResourceRules: [{ ...rule, resources: excluded }] });
  // [matched, excluded, whether nothing is left]
  const cases: Array<[string, string, boolean]> = [
    ["pods", "pods", true],
    ["pods", "*", true],
    ["pods", "services", false],
    ["pods/status", "pods", false],
    ["pods", "*/*", false],
    ["pods/status", "pods/status", true],
    ["pods/status", "*/status", true],
    ["pods/status", "pods/*", true],
    ["pods/status", "*/*", true],
    ["pods/log", "pods/status", false],
    ["services/status", "pods/status", false],
    ["services/status", "pods/*", false],
  ];
  for (const [matched, excluded, nothingLeft] of cases) {
    assert.deepEqual(matching([matched], [excluded]), nothingLeft ? [NOTHING_LEFT] : [], `${matched} excluded by ${excluded}`);
  }
});

test("excluded resources without resourceRules: an error only for an exclusion of every group, version, resource, subresource and operation", () => {
  const all = { apiGroups: ["*"], apiVersions: ["*"], resources: ["*", "*/*"], operations: ["*"] };
  assert.deepEqual(constraints({ excludeResourceRules: [all] }), [NO_REQUEST_LEFT]);
  assert.deepEqual(constraints({ excludeResourceRules: [{ ...all, resources: ["*/*", "*"] }] }), [NO_REQUEST_LEFT]);
  for (const narrower of [
    { apiGroups: ["apps"] },
    { apiGroups: [""] },
    { apiVersions: ["v1"] },
    { resources: ["pods"] },
    { resources: ["*"] },
    { resources: ["*/*"] },
    { operations: ["CREATE"] },
  ]) {
    assert.deepEqual(constraints({ excludeResourceRules: [{ ...all, ...narrower }] }), [], JSON.stringify(narrower));
  }
});

test("excluded subjects: an error when every matched subject is excluded, or every user", () => {
  const alice = { kind: "User", name: "alice" };
  assert.deepEqual(constraints({ excludeSubjects: [{ kind: "ServiceAccount", name: "*", namespace: "*" }] }), [], "users are left");
  assert.deepEqual(constraints({ excludeSubjects: [{ kind: "Group", name: "*" }] }), [], "requests without a group are left");
  assert.deepEqual(constraints({ subjects: [alice], excludeSubjects: [{ kind: "User", name: "bob" }] }), []);
  assert.deepEqual(constraints({ subjects: [alice], excludeSubjects: [{ kind: "Group", name: "alice" }] }), [], "a group is no user");
  assert.deepEqual(constraints({ subjects: [alice], excludeSubjects: [alice] }), [NO_SUBJECT_LEFT]);
  assert.deepEqual(constraints({ subjects: [alice], excludeSubjects: [{ kind: "User", name: "*" }] }), [NO_SUBJECT_LEFT]);
  const ci = { kind: "Group", name: "ci" };
  assert.deepEqual(constraints({ subjects: [ci, { kind: "Group", name: "dev" }], excludeSubjects: [ci] }), [], "dev is left");
  const builder = { kind: "ServiceAccount", name: "builder", namespace: "ci" };
  assert.deepEqual(constraints({ subjects: [builder], excludeSubjects: [{ ...builder, namespace: "*" }] }), [NO_SUBJECT_LEFT]);
  assert.deepEqual(constraints({ subjects: [builder], excludeSubjects: [{ ...builder, namespace: "prod" }] }), [], "another namespace's builder");
});
