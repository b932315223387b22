// Every CEL expression the project shows its users (README.md, docs/, examples/, policies/ and the test
// fixtures' policies) loads under kube-apiserver's estimated cost limit: the limit refuses loops nested over the
// request's lists, not the expressions people are told to write.
import assert from "node:assert/strict";
import { test } from "node:test";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { parseAllDocuments } from "yaml";
import { STATIC_ESTIMATED_COST_LIMIT } from "../../../src/core/conditions/cel-cost-limits.ts";
import { compileCel } from "../../../src/core/conditions/cel-expression.ts";
import { ATTESTATION_CEL_VARIABLES, VALIDATE_CEL_VARIABLES } from "../../../src/core/image-policy/compile-image-policy.ts";
import { MATCH_CONDITION_VARIABLES } from "../../../src/core/request-match/compile-request-match.ts";
import { REPO_ROOT } from "../../support/cli-process.ts";
import { docPages, fences, readPage } from "../../support/docs.ts";

interface Found {
  where: string;
  source: string;
  variables: readonly string[];
}

/** The CEL of a policy document (or an excerpt of its spec): its matchConditions, its attestations' `cel` and its rules' `validate.cel`. */
function celOf(doc: unknown, where: string): Found[] {
  if (typeof doc !== "object" || doc === null) return [];
  const spec = (doc as { spec?: Record<string, unknown> }).spec ?? (doc as Record<string, unknown>);
  const found: Found[] = [];
  for (const c of (spec.matchConditions as Array<{ expression?: unknown }> | undefined) ?? [])
    if (typeof c.expression === "string") found.push({ where, source: c.expression, variables: MATCH_CONDITION_VARIABLES });
  for (const rule of (spec.rules as Array<Record<string, unknown>> | undefined) ?? []) {
    for (const a of (rule.attestations as Array<{ cel?: unknown }> | undefined) ?? [])
      if (typeof a.cel === "string") found.push({ where, source: a.cel, variables: ATTESTATION_CEL_VARIABLES });
    const validate = rule.validate as { cel?: unknown } | undefined;
    if (typeof validate?.cel === "string") found.push({ where, source: validate.cel, variables: VALIDATE_CEL_VARIABLES });
  }
  return found;
}

function yamlFiles(folder: string): string[] {
  return readdirSync(folder).flatMap((name) => {
    const path = join(folder, name);
    if (statSync(path).isDirectory()) return yamlFiles(path);
    return /\.ya?ml$/.test(name) ? [path] : [];
  });
}

function shipped(): Found[] {
  const found: Found[] = [];
  const fromYaml = (text: string, where: string) => {
    for (const d of parseAllDocuments(text)) found.push(...celOf(d.toJS(), where));
  };
  for (const page of docPages())
    for (const fence of fences(page, readPage(page))) if (fence.lang === "yaml" && fence.marker !== "invalid") fromYaml(fence.body, `${page}:${fence.line}`);
  for (const folder of ["examples", "policies", "test/fixtures"])
    for (const file of yamlFiles(join(REPO_ROOT, folder))) fromYaml(readFileSync(file, "utf8"), relative(REPO_ROOT, file));
  return found;
}

test("every CEL expression of the docs, examples, shipped policies and fixtures loads under the estimated cost limit", () => {
  const found = shipped();
  // policies.md, policy-scope.md, attestations.md and tekton-tasks.yaml have some: the walk must find them.
  assert.ok(found.length >= 6, `found ${found.length}`);
  for (const { where, source, variables } of found) {
    const compiled = compileCel(source, variables);
    assert.ok(compiled.estimatedCost <= STATIC_ESTIMATED_COST_LIMIT, `${where}: ${source}`);
  }
});
