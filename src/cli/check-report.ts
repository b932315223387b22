// What `check` and `imprimatur test` make of one manifest object — the engine's verdict (the same pipeline as
// the webhooks), the reason an object was skipped, unknown fields — and the report formats: text (one line per
// finding and a summary), json, yaml and junit.
import { stringify } from "yaml";
import { renderViolation, type Violation } from "../core/decision.ts";
import { asObject } from "../core/json-shapes.ts";
import type { Engine } from "../engine/engine.ts";
import { unknownPodFields } from "../kube/known-fields.ts";
import type { ManifestObject } from "./manifests.ts";

export type Verdict = "allowed" | "denied" | "skipped" | "error";

export interface ObjectResult {
  file: string;
  apiVersion: string;
  kind: string;
  name: string;
  namespace: string;
  result: Verdict;
  /** Why it was skipped, or what is wrong with it (result "error"). */
  reason?: string;
  violations: Violation[];
  warnings: string[];
}

export interface CheckOptions {
  /** Unknown fields are errors rather than warnings. */
  strict: boolean;
}

/** A generous deadline: offline checks wait for nothing remote. */
const CHECK_DEADLINE_MS = 60_000;

export async function checkObject(engine: Engine, m: ManifestObject, opts: CheckOptions): Promise<ObjectResult> {
  const meta = asObject(m.object.metadata);
  const base = {
    file: m.file,
    apiVersion: typeof m.object.apiVersion === "string" ? m.object.apiVersion : "",
    kind: typeof m.object.kind === "string" ? m.object.kind : "",
    name: typeof meta?.name === "string" ? meta.name : typeof meta?.generateName === "string" ? meta.generateName : "",
    namespace: typeof meta?.namespace === "string" ? meta.namespace : "default",
    violations: [] as Violation[],
    warnings: [] as string[],
  };
  if (!base.apiVersion || !base.kind) return { ...base, result: "error", reason: "not a Kubernetes object: apiVersion and kind are required" };
  const plan = engine.subjectOfObject(m.object);
  if (!plan.review)
    return { ...base, result: "skipped", reason: `${plan.why} (not a Pod, a built-in workload, a registered custom resource or a kind named in imagePaths)` };

  const unknown = plan.subject.pods
    .filter((p) => !p.pathImages)
    .flatMap(unknownPodFields)
    .map((u) => `${u.field}: unknown field (not in ${u.model})`);
  if (unknown.length > 0 && opts.strict) return { ...base, result: "error", reason: unknown.join("; ") };

  const decision = await engine.validate(plan.subject, { endpoint: "check", deadline: Date.now() + CHECK_DEADLINE_MS, dryRun: true });
  return { ...base, result: decision.allowed ? "allowed" : "denied", violations: decision.violations, warnings: [...unknown, ...decision.warnings] };
}

export interface Summary {
  objects: number;
  allowed: number;
  denied: number;
  skipped: number;
  errors: number;
}

export function summarize(results: readonly ObjectResult[]): Summary {
  const n = (v: Verdict) => results.filter((r) => r.result === v).length;
  return { objects: results.length, allowed: n("allowed"), denied: n("denied"), skipped: n("skipped"), errors: n("error") };
}

export function summaryLine(s: Summary): string {
  return `${s.objects} object${s.objects === 1 ? "" : "s"}: ${s.allowed} allowed, ${s.denied} denied, ${s.skipped} skipped${s.errors > 0 ? `, ${s.errors} with errors` : ""}`;
}

/** One line per finding: a verdict line for objects without findings, a line per violation, warning and error. */
export function renderText(results: readonly ObjectResult[]): string {
  const lines: string[] = [];
  for (const r of results) {
    const who = `${r.file} ${r.kind}/${r.name}`;
    if (r.result === "denied") for (const v of r.violations) lines.push(`${who}: denied: ${renderViolation(v)}`);
    else if (r.result === "skipped" || r.result === "error") lines.push(`${who}: ${r.result}: ${r.reason}`);
    else lines.push(`${who}: allowed`);
    for (const w of r.warnings) lines.push(`${who}: warning: ${w}`);
  }
  lines.push(summaryLine(summarize(results)));
  return `${lines.join("\n")}\n`;
}

export function reportObject(results: readonly ObjectResult[], problems: readonly string[]) {
  return { results: results.map(structured), summary: summarize(results), ...(problems.length > 0 ? { problems } : {}) };
}

export function renderJson(results: readonly ObjectResult[], problems: readonly string[]): string {
  return `${JSON.stringify(reportObject(results, problems), null, 2)}\n`;
}

export function renderYaml(results: readonly ObjectResult[], problems: readonly string[]): string {
  return stringify(reportObject(results, problems));
}

/** JUnit XML, which CI systems show as a test report: one test case per object, a failure per denial. */
export function renderJunit(results: readonly ObjectResult[], problems: readonly string[], suite = "imprimatur check"): string {
  const s = summarize(results);
  const cases = results.map((r) => {
    const open = `    <testcase classname="${xml(r.file)}" name="${xml(`${r.kind}/${r.name}`)}">`;
    if (r.result === "denied") {
      const text = r.violations.map(renderViolation).join("\n");
      return `${open}\n      <failure message="${xml(`denied: ${r.violations.length} violation(s)`)}" type="denied">${xml(text)}</failure>\n    </testcase>`;
    }
    if (r.result === "error") return `${open}\n      <error message="${xml(r.reason ?? "")}" type="error"/>\n    </testcase>`;
    if (r.result === "skipped") return `${open}\n      <skipped message="${xml(r.reason ?? "")}"/>\n    </testcase>`;
    return `${open}</testcase>`;
  });
  const errors = s.errors + problems.length;
  const problemCases = problems.map(
    (p) =>
      `    <testcase classname="manifests" name="${xml(p.split(":")[0] ?? "manifest")}">\n      <error message="${xml(p)}" type="error"/>\n    </testcase>`,
  );
  return [
    '<?xml version="1.0" encoding="UTF-8"?>',
    `<testsuites tests="${s.objects + problems.length}" failures="${s.denied}" errors="${errors}" skipped="${s.skipped}">`,
    `  <testsuite name="${xml(suite)}" tests="${s.objects + problems.length}" failures="${s.denied}" errors="${errors}" skipped="${s.skipped}">`,
    ...cases,
    ...problemCases,
    "  </testsuite>",
    "</testsuites>",
    "",
  ].join("\n");
}

function structured(r: ObjectResult) {
  return {
    file: r.file,
    apiVersion: r.apiVersion,
    kind: r.kind,
    name: r.name,
    namespace: r.namespace,
    result: r.result,
    ...(r.reason !== undefined ? { reason: r.reason } : {}),
    violations: r.violations.map(structuredViolation),
    warnings: r.warnings,
  };
}

/** A violation as the json and yaml reports give it: the policy's kind as policyKind. */
export function structuredViolation(v: Violation) {
  return {
    policy: v.policy,
    ...(v.kind ? { policyKind: v.kind } : {}),
    rule: v.rule,
    ...(v.image !== undefined ? { image: v.image } : {}),
    ...(v.field !== undefined ? { field: v.field } : {}),
    message: v.message,
  };
}

function xml(s: string): string {
  return s
    .replace(/&/g, "&amp;")
    .replace(/</g, "&lt;")
    .replace(/>/g, "&gt;")
    .replace(/"/g, "&quot;")
    .replace(/[\u0000-\u0008\u000b\u000c\u000e-\u001f]/g, "");
}
