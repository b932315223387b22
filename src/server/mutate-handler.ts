// The mutating AdmissionReview endpoint (/mutate): pins the tags of images whose policy rule says
// `digestMutate: true` to the digests they resolve to (JSONPatch), on Pods and on the pod templates of
// workloads and registered custom resources, so controllers create pinned pods. In record mode it resolves
// and records only. It never denies for policy reasons — /validate does — only when a tag cannot be resolved
// and the server fails closed.
import { admissionResponse, parseAdmissionReview, type AdmissionRequest, type AdmissionResponseBody } from "../core/admission-review.ts";
import { allow, type Decision } from "../core/decision.ts";
import type { ImageAt, PinnedImage, PinningOutcome, PodMetadataAt } from "../core/digest-pinning.ts";
import { asObject } from "../core/json-shapes.ts";
import { planRestrictionReview } from "../core/pod-restriction/admission-plan.ts";
import type { PodUnderReview } from "../core/pod-restriction/pod-restriction.ts";
import { podImages } from "../core/pod-images.ts";
import type { PinRequest } from "../pinning/image-pinner.ts";
import { HttpError } from "./http-body.ts";
import { recordOverrides, type HandlerContext } from "./review-handlers.ts";

export async function handleMutate(ctx: HandlerContext, body: unknown, deadline: number): Promise<{ body: AdmissionResponseBody; decision: Decision | undefined }> {
  const parsed = parseAdmissionReview(body);
  if (!parsed.ok) throw new HttpError(400, `invalid AdmissionReview: ${parsed.error}`);
  const { review } = parsed;
  const request = ctx.pinner ? pinRequestOf(review.request, ctx) : undefined;
  const outcome = request && ctx.pinner ? await ctx.pinner.pin(request, deadline) : undefined;
  if (!request || !outcome) return { body: admissionResponse(review, allow()), decision: undefined };

  const req = review.request;
  const dryRun = req.dryRun === true;
  const decision = await recordOverrides(ctx, outcome.decision, {
    endpoint: "mutate",
    uid: req.uid,
    namespace: request.namespace,
    name: objectName(req),
    ...(req.userInfo?.username ? { user: req.userInfo.username } : {}),
    images: outcome.failed.map((f) => f.target.image),
    dryRun,
  });
  if (!dryRun) recordEvent(ctx, req, request.namespace, outcome);
  return { body: admissionResponse(review, decision), decision };
}

/** The images the request adds or changes, per pod of the object, with where each pod's pins are recorded. */
function pinRequestOf(req: AdmissionRequest, ctx: HandlerContext): PinRequest | undefined {
  const plan = planRestrictionReview(req, ctx.templateKinds);
  if (!plan.review) return undefined;
  const obj = req.object ?? {};
  const images = plan.pods.flatMap((pod, i) => imagesOf(pod, plan.namespace, i));
  const before = new Map<string, string>();
  if (req.operation === "UPDATE" && req.oldObject) {
    // Only new or changed images are pinned, as on /validate only they are reviewed.
    const old = planRestrictionReview({ ...req, operation: "CREATE", object: req.oldObject, oldObject: null }, ctx.templateKinds);
    if (old.review) old.pods.forEach((pod, i) => imagesOf(pod, plan.namespace, i).forEach((im) => before.set(im.field, im.image)));
  }
  return {
    namespace: plan.namespace,
    images: images.filter((im) => before.get(im.field) !== im.image),
    pods: plan.pods.map((pod) => {
      const spec = asObject(pod.spec.value);
      return {
        metadata: metadataOf(pod, obj),
        pullSecrets: {
          namespace: plan.namespace,
          ...(Array.isArray(spec?.imagePullSecrets) ? { imagePullSecrets: spec.imagePullSecrets as Array<{ name?: string }> } : {}),
          ...(serviceAccountOf(spec) ? { serviceAccountName: serviceAccountOf(spec)! } : {}),
        },
      };
    }),
  };
}

function imagesOf(pod: PodUnderReview, namespace: string, index: number): ImageAt[] {
  const prefix = pod.spec.field ? `${pod.spec.field}.` : "";
  return podImages(asObject(pod.spec.value), {}, namespace, prefix).images.map((im) => ({ ...im, pod: index }));
}

/**
 * Where a pod's pins are recorded: its own metadata or its template's; bare pod specs of a custom resource
 * record on the object; Kubernetes < 1.22's EphemeralContainers object has no pod metadata to keep them.
 */
function metadataOf(pod: PodUnderReview, obj: Record<string, unknown>): PodMetadataAt | undefined {
  if (pod.onlyContainers) return undefined;
  if (pod.isTemplate && pod.metadata.field === "metadata") return { value: obj.metadata, field: "metadata" };
  return { value: pod.metadata.value, field: pod.metadata.field };
}

function serviceAccountOf(spec: Record<string, unknown> | undefined): string | undefined {
  const name = spec?.serviceAccountName ?? spec?.serviceAccount; // serviceAccount is the deprecated alias
  return typeof name === "string" && name !== "" ? name : undefined;
}

function objectName(req: AdmissionRequest): string {
  const meta = asObject(req.object?.metadata);
  const name = meta?.name ?? req.name ?? meta?.generateName;
  return typeof name === "string" ? name : "";
}

/** A Kubernetes Event on the object, so `kubectl describe` shows what was pinned (seed 003: auditable). */
function recordEvent(ctx: HandlerContext, req: AdmissionRequest, namespace: string, outcome: PinningOutcome): void {
  if (!ctx.events || (outcome.pinned.length === 0 && outcome.failed.length === 0)) return;
  const obj = req.object ?? {};
  const involvedObject = {
    apiVersion: typeof obj.apiVersion === "string" ? obj.apiVersion : [req.kind?.group, req.kind?.version].filter(Boolean).join("/"),
    kind: typeof obj.kind === "string" ? obj.kind : req.kind?.kind ?? "",
    name: objectName(req),
    namespace,
  };
  const describe = (p: PinnedImage) => `${p.field}: ${p.image} → ${p.pinned} (credentials: ${p.credentialSource})`;
  if (outcome.pinned.length > 0) {
    const pinned = ctx.pinner?.mode === "mutate";
    ctx.events.record({ involvedObject, type: "Normal", reason: pinned ? "ImagesPinned" : "ImagesResolved", message: `${pinned ? "Pinned" : "Resolved"} ${outcome.pinned.map(describe).join("; ")}` });
  }
  if (outcome.failed.length > 0) {
    ctx.events.record({ involvedObject, type: "Warning", reason: "ImageTagUnresolved", message: outcome.failed.map((f) => `${f.target.field}: ${f.target.image}: ${f.error}`).join("; ") });
  }
}
