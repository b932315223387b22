// What both formats put around the results: the report's name and namespace, its label, its owner and its scope.
import { isNamespaced, type ReportedResource } from "./resource-scan.ts";

export const MANAGED_BY_LABEL = "app.kubernetes.io/managed-by";
export const MANAGED_BY = "imprimatur";

export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}

export interface ReportMetadata {
  name: string;
  namespace?: string;
  labels: Record<string, string>;
  ownerReferences: OwnerReference[];
  annotations?: Record<string, string>;
  finalizers?: string[];
  resourceVersion?: string;
}

/** A core/v1 ObjectReference, the type of `scope` in both formats. */
export interface ScopeReference {
  apiVersion: string;
  kind: string;
  name: string;
  namespace?: string;
  uid: string;
}

/**
 * One report per resource, named by the resource's UID (a new pod under an old name gets a new report, and a
 * report never outlives its pod under a reused name), in the resource's namespace, owned by the resource.
 *
 * The owner reference names the resource and nothing more, as Kyverno's per-resource reports do: no
 * `controller: true`, because the report is not a controlled child (a pod's controller is its ReplicaSet, and
 * claiming it would mislead tools that follow controller references); no `blockOwnerDeletion`, because a report
 * must never hold up a pod's foreground deletion, and setting it needs `update` on the owner's `finalizers`
 * subresource (OwnerReferencesPermissionEnforcement), a right a scanner should not have. The garbage collector
 * deletes dependents whatever these two flags say.
 */
export function reportMetadata(resource: ReportedResource): ReportMetadata {
  const metadata: ReportMetadata = {
    name: resource.uid,
    labels: { [MANAGED_BY_LABEL]: MANAGED_BY },
    ownerReferences: [{ apiVersion: resource.apiVersion, kind: resource.kind, name: resource.name, uid: resource.uid }],
  };
  if (isNamespaced(resource)) metadata.namespace = resource.namespace;
  return metadata;
}

/** `scope`: the resource the whole report is about (Kyverno 1.11+ per-resource reports set it; results then name no resource). */
export function reportScope(resource: ReportedResource): ScopeReference {
  const scope: ScopeReference = { apiVersion: resource.apiVersion, kind: resource.kind, name: resource.name, uid: resource.uid };
  if (isNamespaced(resource)) scope.namespace = resource.namespace;
  return scope;
}
