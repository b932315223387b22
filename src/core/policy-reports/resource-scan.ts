// What the background scanner found about one resource: the resource, and one result per policy rule that
// judged it. The input of both report formats (wgpolicyk8s.io/v1alpha2 and openreports.io/v1alpha1), which
// share these result fields, their enums and their timestamp shape.

/** The outcome of one rule, as both report formats spell it. */
export const RESULT_OUTCOMES = ["pass", "fail", "warn", "error", "skip"] as const;
export type ResultOutcome = (typeof RESULT_OUTCOMES)[number];

/** How much a result matters, as both report formats spell it. */
export const RESULT_SEVERITIES = ["critical", "high", "medium", "low", "info"] as const;
export type ResultSeverity = (typeof RESULT_SEVERITIES)[number];

/** A protobuf Timestamp (metav1.Timestamp), the shape both formats give `results[].timestamp`. */
export interface ResultTimestamp {
  /** Seconds since the Unix epoch (UTC). */
  seconds: number;
  /** Fractions of a second, 0 to 999,999,999. */
  nanos: number;
}

/** The resource a report is about: what its `scope` and `ownerReferences` name. */
export interface ReportedResource {
  apiVersion: string;
  kind: string;
  name: string;
  /** Absent (or empty) for a cluster-scoped resource: its report is then a cluster report. */
  namespace?: string;
  /** The report's name, and what the owner reference checks. */
  uid: string;
}

export interface ScanResult {
  /** The policy's name (for a namespaced policy, NAMESPACE/NAME). */
  policy: string;
  /** The rule within the policy; empty when the policy has one verdict. */
  rule?: string;
  result: ResultOutcome;
  severity?: ResultSeverity;
  category?: string;
  message: string;
  /** When the result was found. */
  timestamp: ResultTimestamp;
  /** Details dashboards show beside the result, e.g. image, digest, field. */
  properties?: Record<string, string>;
}

/** One scan of one resource. No results: nothing to report (the resource is fixed), so its report goes. */
export interface ResourceScan {
  resource: ReportedResource;
  results: readonly ScanResult[];
}

/** The Timestamp of a Date (milliseconds precision, which is what a Date has). */
export function timestampOf(date: Date): ResultTimestamp {
  const ms = date.getTime();
  const seconds = Math.floor(ms / 1000);
  return { seconds, nanos: (ms - seconds * 1000) * 1_000_000 };
}

/** True when the resource lives in a namespace (its report is a namespaced PolicyReport / Report). */
export function isNamespaced(resource: ReportedResource): resource is ReportedResource & { namespace: string } {
  return typeof resource.namespace === "string" && resource.namespace !== "";
}
