// The background scan's serve flags, checked and turned into the app's options in one place.
import { parseDuration } from "../core/primitives/duration.ts";
import { parseReportFormats, type ReportFormat } from "../core/policy-reports/report-formats.ts";
import { ImprimaturError } from "../errors/imprimatur-error.ts";

export type ScanFlagErrorCode =
  /** A --scan-* flag without --background-scan. */
  | "needs-background-scan"
  /** --scan-rate is not a number of pods per second from 0 to 10000. */
  | "invalid-rate"
  /** --scan-interval or --scan-error-retry is not a duration, or shorter than its least. */
  | "invalid-duration"
  /** --scan-lease is not NAMESPACE/NAME. */
  | "invalid-lease";

/** A background scan flag that cannot be used; the message names the flag. */
export class ScanFlagError extends ImprimaturError<ScanFlagErrorCode> {}

/** What `serve` runs the background scan with (src/scan/audit-scanner.ts). */
export interface BackgroundScanOptions {
  /** Report formats written; empty: no reports (metrics and logs only). */
  reports: readonly ReportFormat[];
  podsPerSecond: number;
  rescanIntervalMs: number;
  /** The Lease that picks the one replica that scans. */
  lease: { namespace: string; name: string };
  /** Namespaces whose pods are left out. */
  excludeNamespaces: readonly string[];
  /** How soon a pod with an error result is judged again. */
  errorRetryMs: number;
}

export interface ScanFlags {
  "background-scan"?: boolean | undefined;
  "scan-reports"?: string | undefined;
  "scan-rate"?: string | undefined;
  "scan-interval"?: string | undefined;
  "scan-lease"?: string | undefined;
  "scan-exclude-namespace"?: string[] | undefined;
  "scan-error-retry"?: string | undefined;
}

export const SCAN_FLAG_USAGE = `  --background-scan    judge running pods after admission too: every pod as it runs (the digests its
                       status reports), when it changes, when policies change and every --scan-interval,
                       and write a policy report per pod that breaks a policy (needs --kubeconfig or a
                       pod's service account; one replica scans, chosen by a Lease; docs/background-scan.md)
  --scan-reports FORMATS
                       wgpolicyk8s (default: wgpolicyk8s.io/v1alpha2 PolicyReports, which most dashboards
                       read), openreports (openreports.io/v1alpha1 Reports), both, or none
  --scan-rate N        pods judged per second at most (default 20)
  --scan-interval DUR  every pod judged again this often (default 1h)
  --scan-error-retry DUR
                       a pod that could not be fully judged (a backend or registry did not answer) is
                       judged again after this long (default 30s)
  --scan-exclude-namespace NS
                       leave this namespace's pods out (repeatable), as the webhooks' namespaceSelector
                       leaves kube-system and Imprimatur's own namespace out
  --scan-lease NS/NAME
                       the Lease that picks the scanning replica (default: the pod's namespace, else
                       default, and imprimatur-scan)
`;

/** Undefined when the scan is off; throws ScanFlagError with the flag's problem. */
export function backgroundScanOptions(flags: ScanFlags, podNamespace: string | undefined): BackgroundScanOptions | undefined {
  const given: string[] = (["scan-reports", "scan-rate", "scan-interval", "scan-lease", "scan-error-retry"] as const).filter((f) => flags[f] !== undefined);
  if ((flags["scan-exclude-namespace"] ?? []).length > 0) given.push("scan-exclude-namespace");
  if (!flags["background-scan"]) {
    if (given.length > 0) throw new ScanFlagError("needs-background-scan", `--${given[0]} needs --background-scan`);
    return undefined;
  }
  const reportsFlag = flags["scan-reports"] ?? "wgpolicyk8s";
  const reports = reportsFlag === "none" ? [] : parseReportFormats(reportsFlag);
  const rate = flags["scan-rate"] === undefined ? 20 : Number(flags["scan-rate"]);
  if (!Number.isFinite(rate) || rate <= 0 || rate > 10_000)
    throw new ScanFlagError("invalid-rate", `--scan-rate must be a number of pods per second from 0 to 10000, got ${flags["scan-rate"]}`);
  const interval = flags["scan-interval"] === undefined ? 3_600_000 : parseDuration(flags["scan-interval"]);
  if (interval === undefined || interval < 60_000)
    throw new ScanFlagError("invalid-duration", `--scan-interval must be a duration of at least 1m, got ${flags["scan-interval"]}`);
  const errorRetry = flags["scan-error-retry"] === undefined ? 30_000 : parseDuration(flags["scan-error-retry"]);
  if (errorRetry === undefined || errorRetry < 1_000)
    throw new ScanFlagError("invalid-duration", `--scan-error-retry must be a duration of at least 1s, got ${flags["scan-error-retry"]}`);
  const lease = flags["scan-lease"];
  let namespace = podNamespace ?? "default";
  let name = "imprimatur-scan";
  if (lease !== undefined) {
    const m = /^([a-z0-9]([-a-z0-9]*[a-z0-9])?)\/([a-z0-9]([-a-z0-9.]*[a-z0-9])?)$/.exec(lease);
    if (!m) throw new ScanFlagError("invalid-lease", `--scan-lease must be NAMESPACE/NAME, got ${lease}`);
    namespace = m[1]!;
    name = m[3]!;
  }
  return {
    reports,
    podsPerSecond: rate,
    rescanIntervalMs: interval,
    lease: { namespace, name },
    excludeNamespaces: flags["scan-exclude-namespace"] ?? [],
    errorRetryMs: errorRetry,
  };
}
