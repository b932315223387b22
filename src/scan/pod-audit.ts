// One running pod judged after creation: the same engine and policies as admission (the one pipeline), applied to
// the pod as it runs (each image at the digest its status reports, src/core/image-policy/running-pods.ts), and turned into the
// results of a policy report. Used by the background scanner and by `imprimatur audit` alike.
import type { Decision, Violation } from "../core/decision.ts";
import { asObject } from "../core/primitives/json-shapes.ts";
import type { ReportedResource, ResourceScan, ScanResult } from "../core/policy-reports/resource-scan.ts";
import { timestampOf } from "../core/policy-reports/resource-scan.ts";
import { digestDrift, podAsRunning, runningImages, type DigestDrift, type RunningImage } from "../core/image-policy/running-pods.ts";
import { actionsOf } from "../core/validation-actions.ts";
import type { Engine } from "../engine/engine.ts";

/** What the audit of one pod found: its report's results, and the counts the metrics and the CLI need. */
export interface PodAudit {
  resource: ReportedResource;
  /** Failures, warnings, errors and failures set aside (skip); passes are not reported (a pod with none has no report). */
  results: ScanResult[];
  /** Failures with Deny among their actions (what admission would refuse now). */
  denials: number;
  drift: DigestDrift[];
}

/** The policy name under which findings of Imprimatur itself are reported (digest drift, unreachable backends). */
export const IMPRIMATUR_POLICY = "imprimatur";

/** How long one pod's judgment may take; a registry that does not answer in time gives an "error" result. */
const POD_DEADLINE_MS = 30_000;

/**
 * `ownCluster`: the pod is the server's own cluster's (the background scan), judged by the policies spec.clusters
 * gives that cluster; otherwise (`imprimatur audit`) by every policy, as `check` is.
 */
export async function auditPod(
  engine: Engine,
  pod: Record<string, unknown>,
  now: () => Date = () => new Date(),
  opts: { ownCluster?: boolean } = {},
): Promise<PodAudit> {
  const meta = asObject(pod.metadata) ?? {};
  const resource: ReportedResource = {
    apiVersion: "v1",
    kind: "Pod",
    name: typeof meta.name === "string" ? meta.name : "",
    namespace: typeof meta.namespace === "string" ? meta.namespace : "",
    uid: typeof meta.uid === "string" ? meta.uid : "",
  };
  const running = runningImages(pod);
  const drift = digestDrift(pod, running);
  const timestamp = timestampOf(now());
  const results: ScanResult[] = drift.map((d) => driftResult(d, timestamp));
  let decision: Decision | undefined;
  try {
    // Judged as a creation by no particular user: a running pod does not say who created it.
    ({ decision } = await engine.review(
      { kind: "object", object: podAsRunning(pod, running), namespace: resource.namespace },
      { endpoint: "audit", deadline: Date.now() + POD_DEADLINE_MS, dryRun: true, ...(opts.ownCluster ? { ownCluster: true } : {}) },
    ));
  } catch (e) {
    results.push({
      policy: IMPRIMATUR_POLICY,
      rule: "evaluation",
      result: "error",
      message: `the pod could not be judged: ${(e as Error).message}`,
      timestamp,
    });
    return { resource, results, denials: drift.length, drift };
  }
  if (!decision) return { resource, results, denials: results.length, drift };
  const digestOf = new Map(running.map((r: RunningImage) => [r.field, r.digest]));
  const result = (v: Violation, outcome: ScanResult["result"], prefix = ""): ScanResult => ({
    policy: v.policy,
    rule: v.rule,
    result: outcome,
    category: v.kind ?? (v.policy === IMPRIMATUR_POLICY ? "Imprimatur" : "ImagePolicy"),
    message: `${prefix}${v.message}`,
    timestamp,
    properties: properties(v, v.field ? digestOf.get(v.field) : undefined),
  });
  for (const v of decision.violations) results.push(result(v, "fail"));
  // A Warn failure is a warning in the report; one set to Audit only is a failure there, as Kyverno reports it.
  for (const v of decision.advisories ?? []) results.push(result(v, actionsOf(v).includes("Warn") ? "warn" : "fail"));
  for (const v of decision.breakGlass?.overridden ?? []) results.push(result(v, "warn", "set aside by break-glass: "));
  // As Kyverno reports a rule a PolicyException covers: skip, naming the exception.
  for (const x of decision.exemptions ?? []) results.push(result(x.violation, "skip", `set aside by PolicyException ${x.exception}: `));
  for (const f of decision.failOpen ?? [])
    results.push({
      policy: IMPRIMATUR_POLICY,
      rule: f.backend,
      result: "error",
      category: "Imprimatur",
      message: `could not be asked, so this pod is not fully judged: ${f.error}`,
      timestamp,
    });
  return { resource, results, denials: drift.length + decision.violations.length, drift };
}

function properties(v: Violation, runningDigest: string | undefined): Record<string, string> {
  return {
    ...(v.image !== undefined ? { image: v.image } : {}),
    ...(v.field !== undefined ? { field: v.field } : {}),
    ...(runningDigest !== undefined ? { digest: runningDigest } : {}),
    validationActions: actionsOf(v).join(","),
  };
}

function driftResult(d: DigestDrift, timestamp: ScanResult["timestamp"]): ScanResult {
  const what =
    d.source === "spec" ? "the digest its spec pins" : d.source === "verified-images" ? "the digest admission verified" : "the digest admission pinned";
  return {
    policy: IMPRIMATUR_POLICY,
    rule: "runningDigest",
    result: "fail",
    category: "Imprimatur",
    message: `runs ${d.running}, not ${what} (${d.expected}): the image changed after admission`,
    timestamp,
    properties: { image: d.image, field: d.field, digest: d.running, expected: d.expected, source: d.source },
  };
}

/** The report input for a pod's audit. */
export function scanOf(audit: PodAudit): ResourceScan {
  return { resource: audit.resource, results: audit.results };
}
