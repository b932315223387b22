import { test } from "node:test";
import { tempFolder } from "../support/temp-folders.ts";
import assert from "node:assert/strict";
import { writeFile, mkdir } from "node:fs/promises";
import { join } from "node:path";
import { policyCount, preparePolicies } from "../../src/core/policy-set/policy-kinds.ts";
import { loadPolicies, parsePolicyText } from "../../src/policy/load-policies.ts";
import { PolicyLoadError, renderPolicyError } from "../../src/policy/policy-error.ts";
import { EMBEDDED_POLICIES } from "../../src/cli/args.ts";

test("the embedded default policy loads", async () => {
  const set = await loadPolicies(EMBEDDED_POLICIES);
  assert.deepEqual(
    set.policies.ImagePolicy.map((p) => p.name),
    ["pinned-versions"],
  );
});

test("schema errors name file, document, line and field path", () => {
  const text = `apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: ok}
spec:
  rules: []
---
apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: broken}
spec:
  rules:
    - action: permit
      images: ["nginx"]
  colour: blue
`;
  const {
    errors,
    policies: { ImagePolicy: imagePolicies },
  } = parsePolicyText(text, "p.yaml");
  assert.deepEqual(
    imagePolicies.map((p) => p.name),
    ["ok"],
  );
  const rendered = errors.map(renderPolicyError);
  assert.ok(rendered.includes('p.yaml:12 (document 2, spec.rules[0].action): must be one of "allow", "deny", got "permit"'), rendered.join("\n"));
  assert.ok(rendered.includes('p.yaml:14 (document 2, spec.colour): unknown field "colour"'), rendered.join("\n"));
});

test("invalid image patterns and regexes are load errors with their path", () => {
  const { errors } = parsePolicyText(
    `apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: {name: p}
spec:
  rules:
    - action: allow
      images: ["ok/image", "Bad Image"]
  breakGlass: {allowed: true, ticketPattern: "([", requiredAnnotations: [reason]}
`,
    "p.yaml",
  );
  const paths = errors.map((e) => e.path);
  assert.deepEqual(paths.sort(), ["spec.breakGlass.requiredAnnotations[0]", "spec.breakGlass.ticketPattern", "spec.rules[0].images[1]"].sort());
  assert.equal(errors.find((e) => e.path === "spec.rules[0].images[1]")?.line, 7);
});

test("YAML syntax errors, wrong apiVersion and unknown kinds are reported", () => {
  const bad = parsePolicyText("apiVersion: imprimatur.dev/v1alpha1\nkind: [unclosed\n", "s.yaml");
  assert.equal(bad.errors.length > 0, true);
  assert.match(renderPolicyError(bad.errors[0]!), /^s\.yaml:\d+ \(document 1\): YAML: /);
  const wrongVersion = parsePolicyText("apiVersion: v1\nkind: ImagePolicy\n", "v.yaml");
  assert.equal(renderPolicyError(wrongVersion.errors[0]!), 'v.yaml:1 (document 1, apiVersion): must be "imprimatur.dev/v1alpha1", got "v1"');
  const unknownKind = parsePolicyText("apiVersion: imprimatur.dev/v1alpha1\nkind: Mystery\n", "k.yaml");
  assert.match(renderPolicyError(unknownKind.errors[0]!), /k\.yaml:2 \(document 1, kind\): unknown kind "Mystery"/);
  const scalar = parsePolicyText("just a string\n", "x.yaml");
  assert.match(scalar.errors[0]!.message, /must be a mapping/);
});

test("empty documents are ignored; duplicate names across files are an error", async () => {
  const dir = await tempFolder("imprimatur-policies-");
  const doc = (name: string) => `---\n---\napiVersion: imprimatur.dev/v1alpha1\nkind: ImagePolicy\nmetadata: {name: ${name}}\nspec: {rules: []}\n`;
  await writeFile(join(dir, "a.yaml"), doc("same"));
  await mkdir(join(dir, "sub"));
  await writeFile(join(dir, "sub", "b.yml"), doc("same"));
  await writeFile(join(dir, "notes.txt"), "not a policy");
  await assert.rejects(loadPolicies(dir), (e: unknown) => {
    assert.ok(e instanceof PolicyLoadError);
    assert.match(e.message, /\): ImagePolicy "same" is already defined/);
    return true;
  });
});

test("a missing policy folder is a load error, not a crash", async () => {
  await assert.rejects(loadPolicies("/nonexistent/imprimatur"), PolicyLoadError);
});

test("a loaded set counts its policies of every kind but exceptions, and needs namespace labels only when some policy selects namespaces by them", () => {
  const image = (name: string, extra = "") =>
    `apiVersion: imprimatur.dev/v1alpha1\nkind: ImagePolicy\nmetadata: {name: ${name}}\nspec:\n${extra}  rules: [{action: allow, images: ["*"]}]\n`;
  const pods = (name: string, extra = "") =>
    `apiVersion: imprimatur.dev/v1alpha1\nkind: PodRestriction\nmetadata: {name: ${name}}\nspec:${extra ? `\n${extra}` : " {}\n"}`;
  const bySelector = "  matchConstraints: {namespaceSelector: {matchLabels: {env: prod}}}\n";
  const prepared = (...documents: string[]) => {
    const parsed = parsePolicyText(documents.join("---\n"), "p.yaml");
    assert.deepEqual(parsed.errors.map(renderPolicyError), []);
    return preparePolicies(parsed.policies);
  };
  const exception = `apiVersion: imprimatur.dev/v1alpha1\nkind: PolicyException\nmetadata: {name: e, namespace: ops}\nspec:\n  exceptions: [{policyName: a}]\n  match: {any: [{resources: {kinds: [Pod]}}]}\n`;
  const plain = prepared(image("a"), image("b"), pods("c"));
  assert.equal(policyCount(plain.set), 3);
  assert.equal(policyCount(prepared().set), 0);
  // An exception only sets decisions aside: alone it puts nothing in force, and it adds nothing to a count.
  const withException = prepared(image("a"), exception);
  assert.equal(withException.set.PolicyException.length, 1);
  assert.equal(policyCount(withException.set), 1);
  assert.equal(policyCount(prepared(exception).set), 0);
  assert.equal(plain.usesNamespaceLabels, false);
  assert.equal(prepared(image("a"), image("b", "  namespaceSelector: {matchLabels: {env: prod}}\n")).usesNamespaceLabels, true, "spec.namespaceSelector");
  assert.equal(prepared(image("a"), image("b", bySelector)).usesNamespaceLabels, true, "one ImagePolicy's matchConstraints");
  assert.equal(prepared(image("a"), pods("c", bySelector)).usesNamespaceLabels, true, "a PodRestriction's matchConstraints");
});
