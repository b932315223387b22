// The two policy-report APIs Imprimatur writes, where each lives, and the flag value that picks them.
import { PolicyReportError } from "./policy-report-error.ts";

/**
 * wgpolicyk8s: wgpolicyk8s.io/v1alpha2 PolicyReport/ClusterPolicyReport, the Policy WG's API that Kyverno writes by
 * default and that most dashboards (Policy Reporter, Kyverno's UI, the OCM and Backstage plugins) read today.
 * openreports: openreports.io/v1alpha1 Report/ClusterReport, its successor (Kubewarden's default).
 */
export const REPORT_FORMATS = ["wgpolicyk8s", "openreports"] as const;
export type ReportFormat = (typeof REPORT_FORMATS)[number];

/** What dashboards read today. */
export const DEFAULT_REPORT_FORMATS: readonly ReportFormat[] = ["wgpolicyk8s"];

/** Where one kind of report lives in the API. */
export interface ReportApi {
  group: string;
  version: string;
  kind: string;
  plural: string;
  namespaced: boolean;
}

export const REPORT_APIS = {
  wgpolicyk8s: {
    namespaced: { group: "wgpolicyk8s.io", version: "v1alpha2", kind: "PolicyReport", plural: "policyreports", namespaced: true },
    cluster: { group: "wgpolicyk8s.io", version: "v1alpha2", kind: "ClusterPolicyReport", plural: "clusterpolicyreports", namespaced: false },
  },
  openreports: {
    namespaced: { group: "openreports.io", version: "v1alpha1", kind: "Report", plural: "reports", namespaced: true },
    cluster: { group: "openreports.io", version: "v1alpha1", kind: "ClusterReport", plural: "clusterreports", namespaced: false },
  },
} as const satisfies Record<ReportFormat, { namespaced: ReportApi; cluster: ReportApi }>;

/** The API of a format's report about a namespaced or a cluster-scoped resource. */
export function reportApi(format: ReportFormat, namespaced: boolean): ReportApi {
  return namespaced ? REPORT_APIS[format].namespaced : REPORT_APIS[format].cluster;
}

/**
 * Reads a flag value: "wgpolicyk8s", "openreports", "both", or a comma-separated list of format names.
 * The result has no duplicates and keeps the order of REPORT_FORMATS.
 */
export function parseReportFormats(value: string): ReportFormat[] {
  const names = value
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "");
  if (names.length === 0) throw new PolicyReportError("invalid-format", `no report format given: use ${REPORT_FORMATS.join(", ")} or both`);
  const chosen = new Set<ReportFormat>();
  for (const name of names) {
    if (name === "both") REPORT_FORMATS.forEach((f) => chosen.add(f));
    else if ((REPORT_FORMATS as readonly string[]).includes(name)) chosen.add(name as ReportFormat);
    else throw new PolicyReportError("invalid-format", `unknown report format "${name}": use ${REPORT_FORMATS.join(", ")} or both`);
  }
  return REPORT_FORMATS.filter((f) => chosen.has(f));
}
