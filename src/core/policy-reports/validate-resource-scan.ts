// The checks a scan passes before it becomes a report, so a mistake in the scanner is an error naming the field
// here rather than a 422 from the apiserver (or, worse, a report a dashboard misreads).
import { PolicyReportError } from "./policy-report-error.ts";
import { RESULT_OUTCOMES, RESULT_SEVERITIES, type ResourceScan, type ScanResult } from "./resource-scan.ts";

/** metadata.name must be a DNS subdomain; a UID is one (a lowercase UUID), anything else is not our UID. */
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/;
const MAX_NAME = 253;
/** 9999-12-31T23:59:59Z, the last second a Timestamp may hold. */
const MAX_SECONDS = 253_402_300_799;
const MAX_NANOS = 999_999_999;

/** Throws a PolicyReportError("invalid-scan") naming the first field that is wrong. */
export function validateResourceScan(scan: ResourceScan): void {
  const { resource } = scan;
  const where = `resource ${resource.kind}/${resource.namespace ? `${resource.namespace}/` : ""}${resource.name}`;
  for (const field of ["apiVersion", "kind", "name", "uid"] as const) {
    if (typeof resource[field] !== "string" || resource[field] === "") throw invalid(`${where}: resource.${field} is required`);
  }
  if (resource.namespace !== undefined && typeof resource.namespace !== "string") throw invalid(`${where}: resource.namespace must be a string`);
  if (resource.uid.length > MAX_NAME || !DNS_SUBDOMAIN.test(resource.uid)) throw invalid(`${where}: resource.uid "${resource.uid}" is not a Kubernetes UID`);
  if (!Array.isArray(scan.results)) throw invalid(`${where}: results must be a list`);
  scan.results.forEach((result, i) => validateResult(result, `${where}: results[${i}]`));
}

function validateResult(result: ScanResult, where: string): void {
  if (typeof result.policy !== "string" || result.policy === "") throw invalid(`${where}.policy is required`);
  if (result.rule !== undefined && typeof result.rule !== "string") throw invalid(`${where}.rule must be a string`);
  if (!(RESULT_OUTCOMES as readonly string[]).includes(result.result)) {
    throw invalid(`${where}.result "${String(result.result)}" is not one of ${RESULT_OUTCOMES.join(", ")}`);
  }
  if (result.severity !== undefined && !(RESULT_SEVERITIES as readonly string[]).includes(result.severity)) {
    throw invalid(`${where}.severity "${String(result.severity)}" is not one of ${RESULT_SEVERITIES.join(", ")}`);
  }
  if (result.category !== undefined && typeof result.category !== "string") throw invalid(`${where}.category must be a string`);
  if (typeof result.message !== "string") throw invalid(`${where}.message must be a string`);
  const { seconds, nanos } = result.timestamp ?? {};
  if (!Number.isSafeInteger(seconds) || (seconds as number) < 0 || (seconds as number) > MAX_SECONDS) {
    throw invalid(`${where}.timestamp.seconds must be a whole number of seconds since the epoch`);
  }
  if (!Number.isSafeInteger(nanos) || (nanos as number) < 0 || (nanos as number) > MAX_NANOS) {
    throw invalid(`${where}.timestamp.nanos must be a whole number from 0 to ${MAX_NANOS}`);
  }
  for (const [key, value] of Object.entries(result.properties ?? {})) {
    if (key === "") throw invalid(`${where}.properties has an empty key`);
    if (typeof value !== "string") throw invalid(`${where}.properties.${key} must be a string`);
  }
}

function invalid(message: string): PolicyReportError {
  return new PolicyReportError("invalid-scan", message);
}
