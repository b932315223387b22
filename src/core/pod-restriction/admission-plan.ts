// Which pods an admission request asks PodRestrictions to judge: a Pod (create, update, ephemeral
// containers), or the pod templates of a workload or registered custom resource (fail-fast at the
// controller object). Updates that change nothing a restriction can see are let through unjudged, so a
// policy added later does not block unrelated updates (scaling, finalizers, status-like edits).
import { isDeepStrictEqual } from "node:util";
import type { AdmissionRequest } from "../admission-review.ts";
import { asObject } from "../json-shapes.ts";
import { podsInObject, type TemplateKind } from "../workload-templates.ts";
import type { PodUnderReview } from "./pod-restriction.ts";

export type RestrictionPlan = { review: false; why: string } | { review: true; namespace: string; pods: PodUnderReview[] };

export function planRestrictionReview(req: AdmissionRequest, extraKinds: readonly TemplateKind[] = []): RestrictionPlan {
  if (req.operation !== "CREATE" && req.operation !== "UPDATE") return { review: false, why: `operation ${req.operation ?? "?"}` };
  const obj = req.object ?? undefined;
  if (!obj) return { review: false, why: "no object" };
  const namespace = req.namespace ?? str(asObject(obj.metadata)?.namespace) ?? "";
  const sub = req.subResource ?? "";
  const isPods = (req.resource?.group ?? "") === "" && req.resource?.resource === "pods";

  if (isPods && sub === "ephemeralcontainers" && req.kind?.kind === "EphemeralContainers") {
    // Kubernetes < 1.22 sends only the ephemeral containers, not the pod: check them alone.
    const spec = { value: { ephemeralContainers: obj.ephemeralContainers }, field: "" };
    return { review: true, namespace, pods: [{ metadata: { value: undefined, field: "metadata" }, spec, isTemplate: false, onlyContainers: true }] };
  }
  if (sub !== "" && !(isPods && sub === "ephemeralcontainers")) return { review: false, why: `subresource ${sub}` };

  const pods = podsInObject(obj, extraKinds);
  if (pods.length === 0) return { review: false, why: `${String(obj.kind)} runs no pods` };
  if (req.operation === "UPDATE" && req.oldObject && sub === "") {
    const before = podsInObject(req.oldObject, extraKinds);
    if (before.length === pods.length && pods.every((p, i) => sameRestrictedContent(p, before[i]!))) {
      return { review: false, why: "no restricted field changed" };
    }
  }
  return { review: true, namespace, pods };
}

function sameRestrictedContent(a: PodUnderReview, b: PodUnderReview): boolean {
  const ma = asObject(a.metadata.value) ?? {};
  const mb = asObject(b.metadata.value) ?? {};
  return (
    isDeepStrictEqual(a.spec.value, b.spec.value) &&
    isDeepStrictEqual(ma.labels ?? {}, mb.labels ?? {}) &&
    isDeepStrictEqual(ma.annotations ?? {}, mb.annotations ?? {})
  );
}

function str(v: unknown): string | undefined {
  return typeof v === "string" ? v : undefined;
}
