// Whether a stored report at a resource's report name is Imprimatur's. Anyone who may create reports in a
// namespace (a namespace editor, where a policy tool's aggregated role grants it) can create one under a pod's UID
// before Imprimatur does, with any labels and any owner reference, saying "pass". So a report is Imprimatur's only
// with both marks Imprimatur writes: its managed-by label and an owner reference to the resource (by UID). Neither
// alone is enough: the label is free text, and an owner reference to one's own pod is free too.
//
// Nothing in a report tells a forgery from another tool's report at the same name (Kyverno names its per-resource
// reports by the resource's UID too, with its label and an owner reference: a tenant can write exactly that, and
// the field manager a report records is chosen by the client). So whatever is not Imprimatur's is "squatted" and
// gets overwritten; beside Kyverno, Imprimatur writes the report API Kyverno does not (docs/policy-reports.md).
import { MANAGED_BY, MANAGED_BY_LABEL } from "./report-metadata.ts";

/** What a report at Imprimatur's name that is not Imprimatur's claims to be. */
export interface SquattedReport {
  /** Its managed-by label; undefined when it has none. */
  managedBy: string | undefined;
  /** Whether it names the resource as an owner (by UID). */
  ownedByResource: boolean;
}

/** undefined: the stored report is Imprimatur's; otherwise what the squatted one claims. */
export function squattedReport(metadata: Record<string, unknown>, resourceUid: string): SquattedReport | undefined {
  const labels = metadata.labels;
  const label = typeof labels === "object" && labels !== null && !Array.isArray(labels) ? (labels as Record<string, unknown>)[MANAGED_BY_LABEL] : undefined;
  const managedBy = typeof label === "string" ? label : undefined;
  const owners = Array.isArray(metadata.ownerReferences) ? (metadata.ownerReferences as unknown[]) : [];
  const ownedByResource = owners.some((o) => typeof o === "object" && o !== null && (o as { uid?: unknown }).uid === resourceUid);
  return managedBy === MANAGED_BY && ownedByResource ? undefined : { managedBy, ownedByResource };
}

/** In words, for an Event and a log line: `managed by "kyverno"`, `has no managed-by label; no owner reference to this pod`. */
export function describeSquatter(squatter: SquattedReport, resourceKind: string): string {
  const label = squatter.managedBy === undefined ? "has no managed-by label" : `managed by ${JSON.stringify(squatter.managedBy)}`;
  const owner = squatter.ownedByResource
    ? ""
    : `${squatter.managedBy === undefined ? " and" : " but"} has no owner reference to this ${resourceKind.toLowerCase()}`;
  return `${label}${owner}`;
}
