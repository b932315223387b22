// What `check` and `imprimatur test` make of one manifest object — the engine's verdict (the same pipeline as
// the webhooks), the reason an object was skipped, signatures that could not be verified offline, unknown
// fields — and the report formats: text (one line per finding and a summary), json, yaml and junit.
import { stringify } from "yaml";
import { renderViolation, type Violation } from "../core/decision.ts";
import { actionsOf, renderAdvisory } from "../core/validation-actions.ts";
import { verificationsNeeded } from "../core/image-policy/image-verification.ts";
import { asObject } from "../core/primitives/json-shapes.ts";
import type { AdmissionSubject, RequestUser } from "../core/admission-subject.ts";
import type { ImagePolicy } from "../core/image-policy/image-policy.ts";
import type { NamespaceLabelSource } from "../core/namespace-labels.ts";
import type { Engine } from "../engine/engine.ts";
import { unknownPodFields } from "../kube/known-fields.ts";
import type { ManifestObject } from "./manifests.ts";

/**
 * "unverified": allowed by every policy, except that a rule with attestors admits an image only once its
 * signatures are verified, which offline (no registry) cannot be done. Not a pass unless --allow-unverified.
 */
export type Verdict = "allowed" | "denied" | "unverified" | "skipped" | "error";

/** A signature check offline could not make: which image, under which policy and rule, and why. */
export interface UnverifiedImage {
  policy: string;
  rule: string;
  image: string;
  field?: string;
  reason: string;
}

export interface ObjectResult {
  file: string;
  apiVersion: string;
  kind: string;
  name: string;
  namespace: string;
  result: Verdict;
  /** Why it was skipped or unverified, or what is wrong with it (result "error"). */
  reason?: string;
  violations: Violation[];
  /** Failures of policies or rules set to Warn or Audit only: the object is admitted all the same. */
  advisories?: Violation[];
  /** Result "unverified": each image whose signatures were not verified. */
  unverified?: UnverifiedImage[];
  warnings: string[];
}

/** What judges one object: the engine, the namespace labels it uses, and the namespace of objects that name none (-n). */
export interface ObjectJudge {
  engine: Engine;
  namespaces: NamespaceLabelSource;
  namespace: string;
  /** Who creates the objects (--as, --as-group; a PolicyTest's userInfo): what policies' subjects match. */
  user?: RequestUser;
}

export interface CheckOptions {
  /** Unknown fields are errors rather than warnings. */
  strict: boolean;
}

/** A generous deadline: offline checks wait for nothing remote. */
const CHECK_DEADLINE_MS = 60_000;

export async function checkObject(judge: ObjectJudge, m: ManifestObject, opts: CheckOptions): Promise<ObjectResult> {
  const { engine } = judge;
  const meta = asObject(m.object.metadata);
  const named = typeof meta?.namespace === "string" && meta.namespace !== "" ? meta.namespace : undefined;
  const base = {
    file: m.file,
    apiVersion: typeof m.object.apiVersion === "string" ? m.object.apiVersion : "",
    kind: typeof m.object.kind === "string" ? m.object.kind : "",
    name: typeof meta?.name === "string" ? meta.name : typeof meta?.generateName === "string" ? meta.generateName : "",
    namespace: named ?? judge.namespace,
    violations: [] as Violation[],
    warnings: [] as string[],
  };
  if (!base.apiVersion || !base.kind) return { ...base, result: "error", reason: "not a Kubernetes object: apiVersion and kind are required" };
  // As kubectl sends it: an object that names no namespace is created in the one given with -n. The apiserver
  // fills metadata.namespace in, so the webhooks see it set; so do the policies here.
  const object = named !== undefined ? m.object : { ...m.object, metadata: { ...(meta ?? {}), namespace: judge.namespace } };
  const reviewed = await engine.review(
    { kind: "object", object, namespace: judge.namespace, user: judge.user },
    { endpoint: "check", deadline: Date.now() + CHECK_DEADLINE_MS, dryRun: true },
  );
  if (!reviewed.subject || !reviewed.decision)
    return {
      ...base,
      result: "skipped",
      reason: `${reviewed.skipped ?? "nothing to review"} (not a Pod, a built-in workload, a registered custom resource or a kind named in imagePaths)`,
    };
  const { subject, decision } = reviewed;

  const unknown = subject.pods
    .filter((p) => !p.pathImages)
    .flatMap(unknownPodFields)
    .map((u) => `${u.field}: unknown field (not in ${u.model})`);
  if (unknown.length > 0 && opts.strict) return { ...base, result: "error", reason: unknown.join("; ") };

  // Warn failures are reported once, as advisories, not again among the engine's warnings.
  const advisories = decision.advisories ?? [];
  const advised = new Set(advisories.map(renderAdvisory));
  const engineWarnings = advised.size > 0 ? decision.warnings.filter((w) => !advised.has(w)) : decision.warnings;
  const withAdvisories = { ...base, ...(advisories.length > 0 ? { advisories } : {}) };
  if (!decision.allowed) return { ...withAdvisories, result: "denied", violations: decision.violations, warnings: [...unknown, ...engineWarnings] };
  const unverified = engine.verifier ? [] : unverifiedImages(judge, subject, reviewed.policies?.ImagePolicy ?? []);
  if (unverified.length === 0) return { ...withAdvisories, result: "allowed", violations: [], warnings: [...unknown, ...engineWarnings] };
  // The engine's "not checked (offline)" warnings say what `unverified` says: the result carries it once.
  const said = (w: string) =>
    unverified.some((u) => w.startsWith(`image ${JSON.stringify(u.image)}: `) && w.includes(` policy ${u.policy} ${u.rule} were not checked`));
  return {
    ...withAdvisories,
    result: "unverified",
    reason: `${plural(new Set(unverified.map((u) => u.image)).size, "image")} allowed only with verified signatures, which cannot be checked offline ("imprimatur verify IMAGE" checks them against the registry)`,
    violations: [],
    unverified,
    warnings: [...unknown, ...engineWarnings.filter((w) => !said(w))],
  };
}

/**
 * The images an allowed subject holds under an allow rule with attestors: offline, their signatures go unchecked.
 * `policies`: the image policies the subject was judged by (one whose matchConstraints leave it out verifies nothing).
 */
function unverifiedImages(judge: ObjectJudge, subject: AdmissionSubject, policies: readonly ImagePolicy[]): UnverifiedImage[] {
  const labels = judge.namespaces.labels(subject.namespace);
  const needs = verificationsNeeded(policies, subject.namespace, subject.images, labels === undefined ? {} : { namespaceLabels: labels });
  const seen = new Set<string>();
  const out: UnverifiedImage[] = [];
  for (const n of needs) {
    const rule = `rules[${n.rule.index}]`;
    const key = `${n.policy.name}\u0000${rule}\u0000${n.image}`;
    if (seen.has(key)) continue;
    seen.add(key);
    const what = n.rule.attestations || n.rule.validate ? "signatures and attestations" : "signatures";
    out.push({
      policy: n.policy.name,
      rule,
      image: n.image,
      ...(n.field ? { field: n.field } : {}),
      reason: `${what} required by this rule cannot be verified offline (no registry is asked)`,
    });
  }
  return out;
}

function plural(n: number, noun: string): string {
  return `${n} ${noun}${n === 1 ? "" : "s"}`;
}

export interface Summary {
  objects: number;
  allowed: number;
  denied: number;
  unverified: number;
  skipped: number;
  errors: number;
  /** Objects with a failure set to Warn, and with one set to Audit (counted apart from the verdicts). */
  warned: number;
  audited: number;
  /** The kinds skipped, with how many of each ("ConfigMap": 2), when some were. */
  skippedKinds?: Record<string, number>;
}

export function summarize(results: readonly ObjectResult[]): Summary {
  const n = (v: Verdict) => results.filter((r) => r.result === v).length;
  const skippedKinds: Record<string, number> = {};
  for (const r of results) if (r.result === "skipped") skippedKinds[r.kind] = (skippedKinds[r.kind] ?? 0) + 1;
  return {
    objects: results.length,
    allowed: n("allowed"),
    denied: n("denied"),
    unverified: n("unverified"),
    skipped: n("skipped"),
    errors: n("error"),
    warned: results.filter((r) => failuresOf(r).some((v) => actionsOf(v).includes("Warn"))).length,
    audited: results.filter((r) => failuresOf(r).some((v) => actionsOf(v).includes("Audit"))).length,
    ...(Object.keys(skippedKinds).length > 0 ? { skippedKinds } : {}),
  };
}

function failuresOf(r: ObjectResult): Violation[] {
  return [...r.violations, ...(r.advisories ?? [])];
}

/** "4 objects: 2 allowed, 1 denied, 1 skipped (ConfigMap)"; unverified, errors, warned and audited only when there are some. */
export function summaryLine(s: Summary): string {
  const kinds = Object.entries(s.skippedKinds ?? {}).map(([kind, n]) => (n === 1 ? kind : `${n} ${kind}`));
  return (
    `${plural(s.objects, "object")}: ${s.allowed} allowed, ${s.denied} denied` +
    `${s.unverified > 0 ? `, ${s.unverified} unverified` : ""}, ${s.skipped} skipped${kinds.length > 0 ? ` (${kinds.join(", ")})` : ""}` +
    `${s.errors > 0 ? `, ${s.errors} with errors` : ""}` +
    `${s.warned > 0 ? `; ${s.warned} warned` : ""}${s.audited > 0 ? `${s.warned > 0 ? "," : ";"} ${s.audited} audited` : ""}`
  );
}

/** One line per finding: a verdict line for objects without findings, a line per violation, warning and error. */
export function renderText(results: readonly ObjectResult[]): string {
  const lines: string[] = [];
  for (const r of results) {
    // NAMESPACE/KIND/NAME, as the policy CLIs print it, so that Pod/web of two namespaces are two lines; an object
    // skipped (it runs no pods) is judged in no namespace.
    const who = `${r.file} ${r.result === "skipped" ? "" : `${r.namespace}/`}${r.kind}/${r.name}`;
    if (r.result === "denied") for (const v of r.violations) lines.push(`${who}: denied: ${renderViolation(v)}`);
    else if (r.result === "unverified") for (const u of r.unverified ?? []) lines.push(`${who}: unverified: ${renderUnverified(u)}`);
    else if (r.result === "skipped" || r.result === "error") lines.push(`${who}: ${r.result}: ${r.reason}`);
    else lines.push(`${who}: allowed`);
    for (const a of r.advisories ?? []) lines.push(`${who}: ${actionsOf(a).join(", ").toLowerCase()}: ${renderAdvisory(a)}`);
    for (const w of r.warnings) lines.push(`${who}: warning: ${w}`);
  }
  lines.push(summaryLine(summarize(results)));
  return `${lines.join("\n")}\n`;
}

export function renderUnverified(u: UnverifiedImage): string {
  return `image ${JSON.stringify(u.image)}${u.field ? ` (${u.field})` : ""} under policy ${u.policy} ${u.rule}: ${u.reason}`;
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
export function renderJunit(results: readonly ObjectResult[], problems: readonly string[], suite = "imprimatur check", allowUnverified = false): string {
  const s = summarize(results);
  const failures = s.denied + (allowUnverified ? 0 : s.unverified);
  const cases = results.map((r) => {
    const open = `    <testcase classname="${xml(r.file)}" name="${xml(`${r.kind}/${r.name}`)}">`;
    if (r.result === "denied") {
      const text = r.violations.map((v) => renderViolation(v)).join("\n");
      return `${open}\n      <failure message="${xml(`denied: ${r.violations.length} violation(s)`)}" type="denied">${xml(text)}</failure>\n    </testcase>`;
    }
    if (r.result === "unverified" && !allowUnverified) {
      const text = (r.unverified ?? []).map(renderUnverified).join("\n");
      return `${open}\n      <failure message="${xml(`unverified: ${r.reason ?? ""}`)}" type="unverified">${xml(text)}</failure>\n    </testcase>`;
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
    `<testsuites tests="${s.objects + problems.length}" failures="${failures}" errors="${errors}" skipped="${s.skipped}">`,
    `  <testsuite name="${xml(suite)}" tests="${s.objects + problems.length}" failures="${failures}" errors="${errors}" skipped="${s.skipped}">`,
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
    ...(r.advisories !== undefined ? { advisories: r.advisories.map(structuredViolation) } : {}),
    ...(r.unverified !== undefined ? { unverified: r.unverified } : {}),
    warnings: r.warnings,
  };
}

/** A violation as the json and yaml reports give it: the policy's kind as policyKind, and what its failure does. */
export function structuredViolation(v: Violation) {
  return {
    policy: v.policy,
    ...(v.kind ? { policyKind: v.kind } : {}),
    rule: v.rule,
    ...(v.image !== undefined ? { image: v.image } : {}),
    ...(v.field !== undefined ? { field: v.field } : {}),
    message: v.message,
    validationActions: actionsOf(v),
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
