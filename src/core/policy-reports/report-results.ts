// The `results` list and the `summary` counts, identical in both formats: the same field names (the message goes
// in `message`), the same enums, a Timestamp object. Sorted and deduplicated, so the same findings always make
// the same list, whatever order the scanner found them in: a rewrite that changes nothing is seen as such.
import type { ResultOutcome, ResultSeverity, ResultTimestamp, ScanResult } from "./resource-scan.ts";

/** `source` of every result (and, in openreports, of the report). */
export const REPORT_SOURCE = "imprimatur";

/** One entry of `results`, as written. */
export interface ReportResultEntry {
  source: string;
  policy: string;
  rule?: string;
  result: ResultOutcome;
  /** Kyverno's convention: warn is the "not scored" outcome, everything else counts. */
  scored: boolean;
  severity?: ResultSeverity;
  category?: string;
  message: string;
  timestamp: ResultTimestamp;
  properties?: Record<string, string>;
}

export interface ReportSummary {
  pass: number;
  fail: number;
  warn: number;
  error: number;
  skip: number;
}

/** The entries of the results, sorted and without duplicates (timestamps aside: the first one found stays). */
export function reportResults(results: readonly ScanResult[]): ReportResultEntry[] {
  const byIdentity = new Map<string, ReportResultEntry>();
  for (const r of results) {
    const entry = resultEntry(r);
    const key = resultIdentity(entry);
    const seen = byIdentity.get(key);
    if (!seen || compareTimestamps(entry.timestamp, seen.timestamp) < 0) byIdentity.set(key, entry);
  }
  return [...byIdentity.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, entry]) => entry);
}

/** Counts per outcome. */
export function reportSummary(entries: readonly { result: ResultOutcome }[]): ReportSummary {
  const summary: ReportSummary = { pass: 0, fail: 0, warn: 0, error: 0, skip: 0 };
  for (const e of entries) summary[e.result]++;
  return summary;
}

/**
 * Everything about a result but when it was found, as a string that sorts by policy, then rule, then outcome.
 * Two results with the same identity are the same finding.
 */
export function resultIdentity(entry: Omit<ReportResultEntry, "timestamp"> & { timestamp?: unknown }): string {
  const properties = Object.entries(entry.properties ?? {}).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  // JSON of an array keeps the fields apart whatever characters they hold; its order gives the sort order.
  return JSON.stringify([
    entry.policy,
    entry.rule ?? "",
    entry.result,
    entry.message,
    entry.severity ?? "",
    entry.category ?? "",
    entry.source,
    entry.scored,
    properties,
  ]);
}

function resultEntry(r: ScanResult): ReportResultEntry {
  const entry: ReportResultEntry = {
    source: REPORT_SOURCE,
    policy: r.policy,
    result: r.result,
    scored: r.result !== "warn",
    message: r.message,
    timestamp: { seconds: r.timestamp.seconds, nanos: r.timestamp.nanos },
  };
  // Optional fields are left out when empty, as the formats' Go types omit them, so a read-back compares equal.
  if (r.rule) entry.rule = r.rule;
  if (r.severity) entry.severity = r.severity;
  if (r.category) entry.category = r.category;
  const properties = Object.entries(r.properties ?? {});
  if (properties.length > 0) entry.properties = Object.fromEntries(properties.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
  return entry;
}

function compareTimestamps(a: ResultTimestamp, b: ResultTimestamp): number {
  return a.seconds - b.seconds || a.nanos - b.nanos;
}
