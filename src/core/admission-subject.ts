// The one extraction of what a request holds: the pods an object runs (a Pod, the ephemeral containers of a
// Pod, the pod templates of built-in workloads and of registered custom resources), their images with field
// paths, images that custom resources keep outside pods (ImagePolicy imagePaths), and — on UPDATE — which of
// them changed. /validate, /mutate, /imagereview and `check` all start from an AdmissionSubject, so they can
// never disagree about which images or pods a request contains.
import { isDeepStrictEqual } from "node:util";
import type { AdmissionRequest } from "./admission-review.ts";
import type { ImageReviewSpec } from "./image-review.ts";
import { imagesAtPaths, pathsFor, type ExtractionError, type ImagePath, type PathImage } from "./image-paths.ts";
import { asObject, stringMap } from "./primitives/json-shapes.ts";
import { guessResource } from "./kind-resource.ts";
import { podImages } from "./pod-images.ts";
import type { ImageAt, PodMetadataAt } from "./pod-locations.ts";
import type { PodUnderReview } from "./pod-under-review.ts";
import { podsInObject, type TemplateKind } from "./workload-templates.ts";

export interface SubjectPod extends PodUnderReview {
  /** The pod's annotations (a template's, for workloads): break-glass and `*.image-policy.k8s.io/*` keys. */
  annotations: Record<string, string>;
  /** Where pins of this pod's images are recorded; undefined when there is nowhere to keep them. */
  pinRecord?: PodMetadataAt;
  /**
   * Set on the one entry that is not a pod: images a custom resource keeps outside pod specs (imagePaths), with
   * the object's annotations and pin record. PodRestrictions do not judge it.
   */
  pathImages?: PathImage[];
}

/** What, besides Pods and built-in workloads, holds pods and images: from the server config and the policies. */
export interface Extraction {
  /** Custom resources with pod templates or pod specs (server config podTemplates). */
  templateKinds?: readonly TemplateKind[];
  /** Image locations in custom resources (ImagePolicy imagePaths). */
  imagePaths?: readonly ImagePath[];
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
  /** Images imagePaths select but that cannot be reviewed (not located in the object): each one denies. */
  extractionErrors?: ExtractionError[];
  /**
   * The request as the apiServer sent it (or as `check` and an ImageReview stand for it): what a policy's
   * matchConstraints and matchConditions are decided on.
   */
  request: AdmissionRequest;
}

export type SubjectPlan = { review: false; why: string } | { review: true; subject: AdmissionSubject };

/** What an admission request asks us to review. */
export function subjectOfRequest(req: AdmissionRequest, extraction: Extraction = {}): SubjectPlan {
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
        request: req,
      },
    };
  }
  if (sub !== "" && !(isPods && sub === "ephemeralcontainers")) return { review: false, why: `subresource ${sub}` };
  // The resource decides what the object is; a Pod-shaped body sent for another resource is not a pod.
  if (object.kind === "Pod" && req.resource?.resource && !isPods) return { review: false, why: `not a pod (resource ${req.resource.resource})` };

  const { pods, errors: found } = subjectPods(obj, object, extraction);
  if (pods.length === 0 && found.length === 0) return { review: false, why: `${object.kind || "object"} runs no pods` };
  let errors = found;
  if (req.operation === "UPDATE" && req.oldObject) {
    const { pods: before, errors: errorsBefore } = subjectPods(req.oldObject, object, extraction);
    // As for images, only what the update brings is judged: an object whose paths could not be located before
    // can still lose a finalizer.
    const known = new Set(errorsBefore.map((e) => `${e.policy}\u0000${e.message}`));
    errors = found.filter((e) => !known.has(`${e.policy}\u0000${e.message}`));
    const extractionErrors = errors.length > 0 ? { extractionErrors: errors } : {};
    const images = changedImages(pods, before);
    // An update that changes nothing a policy sees (a scale, a finalizer, a status-like edit) is let through
    // unjudged, so a policy added later does not block unrelated updates. Ephemeral containers are always new.
    const unchanged = sub === "" && before.length === pods.length && pods.every((p, i) => sameRestrictedContent(p, before[i]!));
    if (unchanged && images.length === 0 && errors.length === 0) return { review: false, why: "no restricted field changed" };
    return { review: true, subject: { origin: "object", namespace, object, pods, images, judgePods: !unchanged, request: req, ...extractionErrors } };
  }
  const extractionErrors = errors.length > 0 ? { extractionErrors: errors } : {};
  return {
    review: true,
    subject: { origin: "object", namespace, object, pods, images: changedImages(pods, undefined), judgePods: true, request: req, ...extractionErrors },
  };
}

/** Who `check` and `imprimatur test` say creates a manifest (kubectl's --as and --as-group). */
export type RequestUser = NonNullable<AdmissionRequest["userInfo"]>;

/** A manifest checked offline, as if it were created; objects without a namespace go to `defaultNamespace`. */
export function subjectOfObject(obj: Record<string, unknown>, extraction: Extraction = {}, defaultNamespace = "default", user?: RequestUser): SubjectPlan {
  const metadata = asObject(obj.metadata);
  const namespace = str(metadata?.namespace) ?? defaultNamespace;
  const { group, version } = groupVersionOf(str(obj.apiVersion) ?? "");
  const kind = str(obj.kind) ?? "";
  return subjectOfRequest(
    {
      uid: "",
      operation: "CREATE",
      namespace,
      name: str(metadata?.name) ?? "",
      object: obj,
      kind: { group, version, kind },
      resource: { group, version, resource: guessResource(kind) },
      ...(user ? { userInfo: user } : {}),
    },
    extraction,
  );
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
    // The ImagePolicyWebhook admission plugin asks while a pod is created; the review carries no more of it: no
    // labels, no author. Policies scoped by those match it as a pod without them (request-match.ts).
    request: {
      uid: "",
      operation: "CREATE",
      namespace: spec.namespace ?? "",
      kind: { group: "", version: "v1", kind: "Pod" },
      resource: { group: "", version: "v1", resource: "pods" },
      object: { apiVersion: "v1", kind: "Pod", metadata: { namespace: spec.namespace ?? "", annotations }, spec: { containers: spec.containers } },
    },
  };
}

/** The subject's images grouped by their pod, pods without images left out (each pod brings its own annotations). */
export function imagesByPod(subject: AdmissionSubject): Array<{ pod: SubjectPod; images: ImageAt[] }> {
  const groups = subject.pods.map((pod) => ({ pod, images: [] as ImageAt[] }));
  for (const im of subject.images) groups[im.pod]?.images.push(im);
  return groups.filter((g) => g.images.length > 0);
}

/**
 * The pods of an object with their annotations and where their pins are recorded, then — when imagePaths apply
 * to its kind — one entry for the images it keeps outside pods (those a pod already lists are left to the pod).
 */
function subjectPods(obj: Record<string, unknown>, object: SubjectObject, extraction: Extraction): { pods: SubjectPod[]; errors: ExtractionError[] } {
  const pods = podsOf(obj, extraction.templateKinds ?? []);
  const paths = pathsFor(extraction.imagePaths ?? [], object.apiVersion, object.kind);
  if (paths.length === 0) return { pods, errors: [] };
  const found = imagesAtPaths(obj, paths);
  const inPods = new Set(pods.flatMap((p, i) => imagesOfPod(p, i).map((im) => im.field)));
  const outside = found.images.filter((im) => !inPods.has(im.field));
  if (outside.length > 0) {
    pods.push({
      metadata: { value: obj.metadata, field: "metadata" },
      spec: { value: undefined, field: "" },
      isTemplate: true,
      annotations: stringMap(asObject(obj.metadata)?.annotations),
      pinRecord: { value: obj.metadata, field: "metadata" },
      pathImages: outside,
    });
  }
  return { pods, errors: found.errors };
}

function podsOf(obj: Record<string, unknown>, templateKinds: readonly TemplateKind[]): SubjectPod[] {
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

function imagesOfPod(pod: SubjectPod, index: number): ImageAt[] {
  if (pod.pathImages) return pod.pathImages.map((im) => ({ ...im, pod: index }));
  const prefix = pod.spec.field ? `${pod.spec.field}.` : "";
  return podImages(asObject(pod.spec.value), prefix).map((im) => ({ ...im, pod: index }));
}

function sameRestrictedContent(a: SubjectPod, b: SubjectPod): boolean {
  // Images are compared on their own (changedImages); an imagePaths entry has nothing else a policy judges.
  if (a.pathImages && b.pathImages) return true;
  const ma = asObject(a.metadata.value) ?? {};
  const mb = asObject(b.metadata.value) ?? {};
  return (
    isDeepStrictEqual(a.spec.value, b.spec.value) &&
    isDeepStrictEqual(ma.labels ?? {}, mb.labels ?? {}) &&
    isDeepStrictEqual(ma.annotations ?? {}, mb.annotations ?? {})
  );
}

function groupVersionOf(apiVersion: string): { group: string; version: string } {
  const slash = apiVersion.indexOf("/");
  return slash < 0 ? { group: "", version: apiVersion } : { group: apiVersion.slice(0, slash), version: apiVersion.slice(slash + 1) };
}

function str(v: unknown): string | undefined {
  return typeof v === "string" ? v : undefined;
}
