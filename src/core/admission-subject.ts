// The one extraction of what a request holds: the pods an object runs (a Pod, the ephemeral containers of a
// Pod, the pod templates of built-in workloads and of registered custom resources), their images with field
// paths, and — on UPDATE — which of them changed. /validate, /mutate, /imagereview and `check` all start
// from an AdmissionSubject, so they can never disagree about which images or pods a request contains.
import { isDeepStrictEqual } from "node:util";
import type { AdmissionRequest } from "./admission-review.ts";
import type { ImageAt, PodMetadataAt } from "./digest-pinning.ts";
import type { ImageReviewSpec } from "./image-review.ts";
import { asObject, stringMap } from "./json-shapes.ts";
import { podImages } from "./pod-images.ts";
import type { PodUnderReview } from "./pod-restriction/pod-restriction.ts";
import { podsInObject, type TemplateKind } from "./workload-templates.ts";

export interface SubjectPod extends PodUnderReview {
  /** The pod's annotations (a template's, for workloads): break-glass and `*.image-policy.k8s.io/*` keys. */
  annotations: Record<string, string>;
  /** Where pins of this pod's images are recorded; undefined when there is nowhere to keep them. */
  pinRecord?: PodMetadataAt;
}

/** Kind and name of the object under review, for denials, logs, audit records and Events. */
export interface SubjectObject {
  apiVersion: string;
  kind: string;
  name: string;
}

export interface AdmissionSubject {
  /** An object (Pod, workload, custom resource) or an ImageReview, which names images but carries no pod. */
  origin: "object" | "imagereview";
  namespace: string;
  object: SubjectObject;
  pods: SubjectPod[];
  /** Images to review and pin, with the index of their pod: all on CREATE, only new or changed on UPDATE. */
  images: ImageAt[];
  /** Whether PodRestrictions judge the pods: false for an ImageReview and for updates they cannot see. */
  judgePods: boolean;
}

export type SubjectPlan = { review: false; why: string } | { review: true; subject: AdmissionSubject };

/** What an admission request asks us to review; `templateKinds` are the registered custom resources. */
export function subjectOfRequest(req: AdmissionRequest, templateKinds: readonly TemplateKind[] = []): SubjectPlan {
  if (req.operation !== "CREATE" && req.operation !== "UPDATE") return { review: false, why: `operation ${req.operation ?? "?"}` };
  const obj = req.object ?? undefined;
  if (!obj) return { review: false, why: "no object" };
  const metadata = asObject(obj.metadata);
  const namespace = req.namespace ?? str(metadata?.namespace) ?? "";
  const object: SubjectObject = {
    apiVersion: str(obj.apiVersion) ?? [req.kind?.group, req.kind?.version].filter(Boolean).join("/"),
    kind: str(obj.kind) ?? req.kind?.kind ?? "",
    name: str(metadata?.name) ?? req.name ?? str(metadata?.generateName) ?? "",
  };
  const sub = req.subResource ?? "";
  const isPods = (req.resource?.group ?? "") === "" && req.resource?.resource === "pods";

  if (isPods && sub === "ephemeralcontainers" && req.kind?.kind === "EphemeralContainers") {
    // Kubernetes < 1.22 sends only the ephemeral containers, not the pod: they are judged alone.
    const pod = ephemeralOnly(obj);
    const before = req.oldObject ? ephemeralOnly(req.oldObject) : undefined;
    return {
      review: true,
      subject: {
        origin: "object",
        namespace,
        object: { ...object, kind: "Pod" },
        pods: [pod],
        images: changedImages([pod], before ? [before] : undefined),
        judgePods: true,
      },
    };
  }
  if (sub !== "" && !(isPods && sub === "ephemeralcontainers")) return { review: false, why: `subresource ${sub}` };
  // The resource decides what the object is; a Pod-shaped body sent for another resource is not a pod.
  if (object.kind === "Pod" && req.resource?.resource && !isPods) return { review: false, why: `not a pod (resource ${req.resource.resource})` };

  const pods = subjectPods(obj, templateKinds);
  if (pods.length === 0) return { review: false, why: `${object.kind || "object"} runs no pods` };
  if (req.operation === "UPDATE" && req.oldObject) {
    const before = subjectPods(req.oldObject, templateKinds);
    const images = changedImages(pods, before);
    // An update that changes nothing a policy sees (a scale, a finalizer, a status-like edit) is let through
    // unjudged, so a policy added later does not block unrelated updates. Ephemeral containers are always new.
    const unchanged = sub === "" && before.length === pods.length && pods.every((p, i) => sameRestrictedContent(p, before[i]!));
    if (unchanged && images.length === 0) return { review: false, why: "no restricted field changed" };
    return { review: true, subject: { origin: "object", namespace, object, pods, images, judgePods: !unchanged } };
  }
  return { review: true, subject: { origin: "object", namespace, object, pods, images: changedImages(pods, undefined), judgePods: true } };
}

/** A manifest checked offline, as if it were created; objects without a namespace go to `defaultNamespace`. */
export function subjectOfObject(obj: Record<string, unknown>, templateKinds: readonly TemplateKind[] = [], defaultNamespace = "default"): SubjectPlan {
  const namespace = str(asObject(obj.metadata)?.namespace) ?? defaultNamespace;
  return subjectOfRequest({ uid: "", operation: "CREATE", namespace, object: obj, resource: resourceOf(obj) }, templateKinds);
}

/** An ImageReview carries only images, annotations and a namespace: one pod with nothing else to judge. */
export function subjectOfImageReview(spec: ImageReviewSpec): AdmissionSubject {
  const annotations = { ...(spec.annotations ?? {}) };
  const pod: SubjectPod = {
    metadata: { value: { annotations }, field: "metadata" },
    spec: { value: { containers: spec.containers }, field: "spec" },
    isTemplate: false,
    annotations,
  };
  return {
    origin: "imagereview",
    namespace: spec.namespace ?? "",
    object: { apiVersion: "v1", kind: "Pod", name: "" },
    pods: [pod],
    images: spec.containers.map((c, i) => ({ image: c.image, field: `spec.containers[${i}].image`, pod: 0 })),
    judgePods: false,
  };
}

/** The subject's images grouped by their pod, pods without images left out (each pod brings its own annotations). */
export function imagesByPod(subject: AdmissionSubject): Array<{ pod: SubjectPod; images: ImageAt[] }> {
  const groups = subject.pods.map((pod) => ({ pod, images: [] as ImageAt[] }));
  for (const im of subject.images) groups[im.pod]?.images.push(im);
  return groups.filter((g) => g.images.length > 0);
}

/** The pods of an object with their annotations and where their pins are recorded. */
function subjectPods(obj: Record<string, unknown>, templateKinds: readonly TemplateKind[]): SubjectPod[] {
  return podsInObject(obj, templateKinds).map((pod) => ({
    ...pod,
    annotations: stringMap(asObject(pod.metadata.value)?.annotations),
    // A bare pod spec of a custom resource has no metadata of its own: its pins are kept on the object.
    pinRecord:
      pod.isTemplate && pod.metadata.field === "metadata"
        ? { value: obj.metadata, field: "metadata" }
        : { value: pod.metadata.value, field: pod.metadata.field },
  }));
}

function ephemeralOnly(obj: Record<string, unknown>): SubjectPod {
  return {
    metadata: { value: undefined, field: "metadata" },
    spec: { value: { ephemeralContainers: obj.ephemeralContainers }, field: "" },
    isTemplate: false,
    onlyContainers: true,
    annotations: stringMap(asObject(obj.metadata)?.annotations),
  };
}

/** Every image of the pods, or, given the pods before an update, only those that are new or changed. */
function changedImages(pods: readonly SubjectPod[], before: readonly SubjectPod[] | undefined): ImageAt[] {
  const old = new Map<string, string>();
  before?.forEach((pod) => imagesOfPod(pod, 0).forEach((im) => old.set(im.field, im.image)));
  return pods.flatMap((pod, i) => imagesOfPod(pod, i)).filter((im) => before === undefined || old.get(im.field) !== im.image);
}

function imagesOfPod(pod: PodUnderReview, index: number): ImageAt[] {
  const prefix = pod.spec.field ? `${pod.spec.field}.` : "";
  return podImages(asObject(pod.spec.value), prefix).map((im) => ({ ...im, pod: index }));
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

/** The resource a manifest's kind is served as; only Pods need it (their subresources are told apart). */
function resourceOf(obj: Record<string, unknown>): AdmissionRequest["resource"] {
  return obj.kind === "Pod" && obj.apiVersion === "v1" ? { group: "", version: "v1", resource: "pods" } : { group: "", version: "", resource: "" };
}

function str(v: unknown): string | undefined {
  return typeof v === "string" ? v : undefined;
}
