// The report objects of both formats, built from one scan. The two differ only in their API group and kinds,
// and in openreports' report-level `source`; everything else (metadata, scope, summary, results) is shared.
import { reportMetadata, reportScope, type ReportMetadata, type ScopeReference } from "./report-metadata.ts";
import { REPORT_APIS, type ReportFormat } from "./report-formats.ts";
import { REPORT_SOURCE, reportResults, reportSummary, type ReportResultEntry, type ReportSummary } from "./report-results.ts";
import { isNamespaced, type ResourceScan } from "./resource-scan.ts";
import { validateResourceScan } from "./validate-resource-scan.ts";

interface ReportBody {
  metadata: ReportMetadata;
  scope: ScopeReference;
  summary: ReportSummary;
  results: ReportResultEntry[];
}

/** wgpolicyk8s.io/v1alpha2 PolicyReport (namespaced resource) or ClusterPolicyReport (cluster-scoped resource). */
export interface WgPolicyReport extends ReportBody {
  apiVersion: "wgpolicyk8s.io/v1alpha2";
  kind: "PolicyReport" | "ClusterPolicyReport";
}

/** openreports.io/v1alpha1 Report (namespaced resource) or ClusterReport (cluster-scoped resource). */
export interface OpenReport extends ReportBody {
  apiVersion: "openreports.io/v1alpha1";
  kind: "Report" | "ClusterReport";
  /** The engine that produced every result (each result says so too). */
  source: string;
}

export type PolicyReportObject = WgPolicyReport | OpenReport;

export function buildWgPolicyReport(scan: ResourceScan): WgPolicyReport {
  const apis = REPORT_APIS.wgpolicyk8s;
  const kind = isNamespaced(scan.resource) ? apis.namespaced.kind : apis.cluster.kind;
  return { apiVersion: "wgpolicyk8s.io/v1alpha2", kind, ...reportBody(scan) };
}

export function buildOpenReport(scan: ResourceScan): OpenReport {
  const apis = REPORT_APIS.openreports;
  const kind = isNamespaced(scan.resource) ? apis.namespaced.kind : apis.cluster.kind;
  const { metadata, scope, summary, results } = reportBody(scan);
  return { apiVersion: "openreports.io/v1alpha1", kind, metadata, source: REPORT_SOURCE, scope, summary, results };
}

export function buildPolicyReport(format: ReportFormat, scan: ResourceScan): PolicyReportObject {
  return format === "wgpolicyk8s" ? buildWgPolicyReport(scan) : buildOpenReport(scan);
}

function reportBody(scan: ResourceScan): ReportBody {
  validateResourceScan(scan);
  const results = reportResults(scan.results);
  return { metadata: reportMetadata(scan.resource), scope: reportScope(scan.resource), summary: reportSummary(results), results };
}
