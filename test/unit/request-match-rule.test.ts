// The one resource-rule matcher (ruleCovers in src/core/request-match/request-match.ts): what a request's
// operation, group, version, resource and subresource must be for a rule to cover it, and what a webhook rule's
// resource (mayMatchResource's question: any operation, a version of "*" for any) may be covered by.
import assert from "node:assert/strict";
import { test } from "node:test";
import { listCovers, resourcePatternCovers, ruleCovers, type ResourceRule, type RuleResource } from "../../src/core/request-match/request-match.ts";

const rule: ResourceRule = { apiGroups: ["apps"], apiVersions: ["v1"], resources: ["deployments", "*/scale"], operations: ["UPDATE"] };
const request = (extra: Partial<RuleResource> = {}): RuleResource => ({
  group: "apps",
  version: "v1",
  resource: "deployments",
  subResource: "",
  operation: "UPDATE",
  ...extra,
});

test("a request is covered when every part is: its operation, group, version and resource", () => {
  assert.equal(ruleCovers(rule, request()), true);
  assert.equal(ruleCovers(rule, request({ operation: "CREATE" })), false);
  assert.equal(ruleCovers(rule, request({ group: "" })), false);
  assert.equal(ruleCovers(rule, request({ version: "v1beta1" })), false);
  assert.equal(ruleCovers(rule, request({ resource: "statefulsets" })), false);
  assert.equal(ruleCovers(rule, request({ resource: "statefulsets", subResource: "scale" })), true);
  assert.equal(ruleCovers(rule, request({ subResource: "status" })), false);
  const any: ResourceRule = { apiGroups: ["*"], apiVersions: ["*"], resources: ["*"], operations: ["*"] };
  assert.equal(ruleCovers(any, request({ group: "batch", version: "v2", resource: "jobs", operation: "CREATE" })), true);
  assert.equal(ruleCovers(any, request({ subResource: "scale" })), false, '"*" is every resource but no subresource');
});

test("a webhook rule's resource: no operation covers any, a version of * any version", () => {
  const webhookResource = { group: "apps", version: "*", resource: "deployments", subResource: "" };
  assert.equal(ruleCovers(rule, webhookResource), true);
  assert.equal(ruleCovers({ ...rule, operations: ["CREATE"] }, webhookResource), true);
  assert.equal(ruleCovers(rule, { ...webhookResource, group: "batch" }), false);
  assert.equal(ruleCovers(rule, { ...webhookResource, resource: "replicasets" }), false);
});

test("the parts a rule is made of: a list covers its values or anything with *, a resource pattern by VAP's meaning", () => {
  assert.equal(listCovers(["CREATE", "UPDATE"], "UPDATE"), true);
  assert.equal(listCovers(["CREATE"], "UPDATE"), false);
  assert.equal(listCovers(["*"], ""), true);
  // [pattern, resource, subresource, covered]
  const cases: Array<[string, string, string, boolean]> = [
    ["pods", "pods", "", true],
    ["pods", "pods", "status", false],
    ["*", "pods", "", true],
    ["*", "pods", "status", false],
    ["pods/status", "pods", "status", true],
    ["pods/*", "pods", "status", true],
    ["pods/*", "pods", "", false],
    ["*/status", "services", "status", true],
    ["*/*", "pods", "log", true],
    ["*/*", "pods", "", false],
  ];
  for (const [pattern, resource, subResource, covered] of cases) {
    assert.equal(resourcePatternCovers(pattern, resource, subResource), covered, `${pattern} for ${resource}/${subResource}`);
  }
});
