// What to do with a report that may already exist: create it, replace it, reclaim it, or leave it alone. Pure, so
// the writer's idempotence is tested without an apiserver: a rescan that finds the same results (a resync, or a new
// leader scanning again) writes nothing, and the time a result was first found survives rescans.
import type { PolicyReportObject } from "./policy-report-objects.ts";
import { squattedReport, type SquattedReport } from "./report-ownership.ts";
import { resultIdentity, type ReportResultEntry } from "./report-results.ts";

/** A report as read from the API: whatever is there, checked field by field. */
export type StoredReport = Record<string, unknown> & { metadata?: Record<string, unknown> };

export type ReportWritePlan =
  | { action: "create"; body: PolicyReportObject }
  | { action: "replace"; body: PolicyReportObject }
  /** A report at Imprimatur's name that is not Imprimatur's: replaced whole with Imprimatur's (src/core/policy-reports/report-ownership.ts). */
  | { action: "reclaim"; body: PolicyReportObject; squatter: SquattedReport }
  | { action: "unchanged" };

/**
 * Compares the report Imprimatur wants with the one stored (undefined: none). The fields Imprimatur owns are
 * `scope`, `summary`, `results` (and openreports' `source`), its label and the owner reference; labels,
 * annotations and finalizers others added to Imprimatur's report are kept. A stored report that is not
 * Imprimatur's (its label and an owner reference to the resource, both) is reclaimed: nothing of it is kept, not
 * its results, labels, annotations or finalizers (a squatter's finalizer would keep the report past its pod), only
 * its resourceVersion, so that a concurrent change is still seen.
 */
export function planReportWrite(desired: PolicyReportObject, stored: StoredReport | undefined): ReportWritePlan {
  if (stored === undefined) return { action: "create", body: desired };
  const metadata = stored.metadata ?? {};
  const squatter = squattedReport(metadata, desired.scope.uid);
  if (squatter) {
    const resourceVersion = typeof metadata.resourceVersion === "string" ? { resourceVersion: metadata.resourceVersion } : {};
    return { action: "reclaim", body: { ...desired, metadata: { ...desired.metadata, ...resourceVersion } }, squatter };
  }
  const labels = stringMap(metadata.labels);
  const results = withStoredTimestamps(desired.results, stored.results);
  const body: PolicyReportObject = {
    ...desired,
    metadata: {
      ...desired.metadata,
      labels: { ...labels, ...desired.metadata.labels },
      ...(isStringMap(metadata.annotations) ? { annotations: metadata.annotations } : {}),
      ...(Array.isArray(metadata.finalizers) ? { finalizers: metadata.finalizers as string[] } : {}),
      ...(typeof metadata.resourceVersion === "string" ? { resourceVersion: metadata.resourceVersion } : {}),
    },
    results,
  };
  const same =
    canonicalJson(body.metadata.labels) === canonicalJson(labels) &&
    canonicalJson(body.metadata.ownerReferences) === canonicalJson(metadata.ownerReferences) &&
    ownedFields(body).every(([field, value]) => canonicalJson(value) === canonicalJson(stored[field]));
  return same ? { action: "unchanged" } : { action: "replace", body };
}

/** The top-level fields Imprimatur owns in this report, with the values it wants. */
function ownedFields(report: PolicyReportObject): Array<[string, unknown]> {
  const fields: Array<[string, unknown]> = [
    ["scope", report.scope],
    ["summary", report.summary],
    ["results", report.results],
  ];
  if ("source" in report) fields.push(["source", report.source]);
  return fields;
}

/** A result found again keeps the timestamp of when it was first found. */
function withStoredTimestamps(desired: ReportResultEntry[], stored: unknown): ReportResultEntry[] {
  if (!Array.isArray(stored)) return desired;
  const firstFound = new Map<string, ReportResultEntry["timestamp"]>();
  for (const entry of stored as ReportResultEntry[]) {
    if (typeof entry !== "object" || entry === null || typeof entry.timestamp !== "object" || entry.timestamp === null) continue;
    const key = resultIdentity(entry);
    if (!firstFound.has(key)) firstFound.set(key, { seconds: entry.timestamp.seconds, nanos: entry.timestamp.nanos });
  }
  return desired.map((entry) => {
    const timestamp = firstFound.get(resultIdentity(entry));
    return timestamp ? { ...entry, timestamp } : entry;
  });
}

/** JSON with object keys sorted, so two values compare equal whatever order the apiserver returned keys in. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) =>
    typeof v === "object" && v !== null && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : v,
  );
}

function isStringMap(value: unknown): value is Record<string, string> {
  return typeof value === "object" && value !== null && !Array.isArray(value) && Object.values(value).every((v) => typeof v === "string");
}

function stringMap(value: unknown): Record<string, string> {
  return isStringMap(value) ? value : {};
}
