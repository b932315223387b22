// The two review endpoints: ImageReview (called by kube-apiserver's ImagePolicyWebhook) and
// AdmissionReview (a dynamic validating webhook). Both ask the same ImageReviewService for images; the
// AdmissionReview also judges the pod (or pod template) against the bound PodRestrictions — an ImageReview
// carries only images, so PodRestrictions cannot apply there.
import type { Logger } from "pino";
import { admissionResponse, parseAdmissionReview, planPodReview, type AdmissionResponseBody, type ParsedAdmissionReview } from "../core/admission-review.ts";
import { allow, combineDecisions, deny, renderReason, type Decision } from "../core/decision.ts";
import { parseImageReview, type ImageReview } from "../core/image-review.ts";
import type { NamespaceLabelSource } from "../core/namespace-labels.ts";
import { planRestrictionReview } from "../core/pod-restriction/admission-plan.ts";
import { decidePodRestrictions } from "../core/pod-restriction/pod-restriction-decision.ts";
import type { PodRestrictionIndex } from "../core/pod-restriction/restriction-index.ts";
import type { TemplateKind } from "../core/workload-templates.ts";
import type { AuditLog } from "../audit/audit-log.ts";
import type { EventSink } from "../kube/event-recorder.ts";
import type { ImagePinner } from "../pinning/image-pinner.ts";
import type { ImageReviewService } from "../backends/review-service.ts";
import { HttpError } from "./http-body.ts";

export interface HandlerContext {
  reviews: ImageReviewService;
  audit: AuditLog;
  logger: Logger;
  /** The PodRestrictions in force (swapped on reload). */
  restrictions: () => PodRestrictionIndex;
  namespaces: NamespaceLabelSource;
  /** Custom resources that embed pod templates, from the server config. */
  templateKinds: readonly TemplateKind[];
  /** Tag→digest pinning (digestMutate); absent when the server has no registry access configured. */
  pinner?: ImagePinner;
  /** Kubernetes Events (when the server has API access). */
  events?: EventSink;
}

export interface RecordContext {
  endpoint: string;
  uid?: string;
  namespace: string;
  name?: string;
  user?: string;
  images: string[];
  dryRun: boolean;
}

export async function handleImageReview(ctx: HandlerContext, body: unknown, deadline: number): Promise<{ body: ImageReview; decision: Decision }> {
  const parsed = parseImageReview(body);
  if (!parsed.ok) throw new HttpError(400, `invalid ImageReview: ${parsed.error}`);
  const { review } = parsed;
  let decision = await ctx.reviews.review({ spec: review.spec }, deadline);
  // An ImageReview answer cannot change the pod: tags marked digestMutate are resolved and recorded only.
  const resolved = await ctx.pinner?.pin(
    {
      namespace: review.spec.namespace ?? "",
      images: review.spec.containers.map((c, i) => ({ image: c.image, field: `spec.containers[${i}].image`, pod: 0 })),
      pods: [{ metadata: undefined }],
    },
    deadline,
    "record",
  );
  if (resolved) decision = combineDecisions(decision, resolved.decision);
  decision = await recordOverrides(ctx, decision, {
    endpoint: "imagereview",
    namespace: review.spec.namespace ?? "",
    images: review.spec.containers.map((c) => c.image),
    dryRun: false,
  });
  const status: NonNullable<ImageReview["status"]> = { allowed: decision.allowed };
  if (!decision.allowed) status.reason = renderReason(decision.violations);
  if (Object.keys(decision.auditAnnotations).length > 0) status.auditAnnotations = decision.auditAnnotations;
  return { body: { ...review, status }, decision };
}

export async function handleAdmissionReview(ctx: HandlerContext, body: unknown, deadline: number): Promise<{ body: AdmissionResponseBody; decision: Decision | undefined }> {
  const parsed = parseAdmissionReview(body);
  if (!parsed.ok) throw new HttpError(400, `invalid AdmissionReview: ${parsed.error}`);
  const review: ParsedAdmissionReview = parsed.review;
  const restricted = await decideRestrictions(ctx, review, deadline);
  const plan = planPodReview(review.request);
  if (!plan.review) {
    return { body: admissionResponse(review, restricted ?? allow()), decision: restricted };
  }
  const { images } = plan;
  let decision = await ctx.reviews.review({ spec: images.spec, fields: images.images.map((i) => i.field) }, deadline);
  if (restricted) decision = combineDecisions(decision, restricted);
  decision = await recordOverrides(ctx, decision, {
    endpoint: "validate",
    uid: review.request.uid,
    namespace: images.spec.namespace ?? "",
    name: plan.podName,
    ...(review.request.userInfo?.username ? { user: review.request.userInfo.username } : {}),
    images: images.images.map((i) => i.image),
    dryRun: review.request.dryRun === true,
  });
  return { body: admissionResponse(review, decision), decision };
}

/** The PodRestriction decision for the request, or undefined when it carries no pod to judge. */
async function decideRestrictions(ctx: HandlerContext, review: ParsedAdmissionReview, deadline: number): Promise<Decision | undefined> {
  const index = ctx.restrictions();
  if (index.all.length === 0) return undefined;
  const plan = planRestrictionReview(review.request, ctx.templateKinds);
  if (!plan.review) return undefined;
  let labels: Record<string, string> | undefined;
  if (index.usesSelectors) {
    await ctx.namespaces.prepare?.(plan.namespace, deadline);
    labels = ctx.namespaces.labels(plan.namespace);
  }
  return plan.pods.map((pod) => decidePodRestrictions(index, pod, plan.namespace, labels)).reduce(combineDecisions);
}

/**
 * Break-glass overrides and fail-open admissions are written to the audit log, durably, before the answer.
 * If the record cannot be written the admission is denied: an override that leaves no trace is not allowed.
 * Dry runs decide the same way but leave no record (the webhook declares sideEffects: NoneOnDryRun).
 */
export async function recordOverrides(ctx: HandlerContext, decision: Decision, rc: RecordContext): Promise<Decision> {
  if (!decision.allowed || rc.dryRun || (!decision.breakGlass && !decision.failOpen)) return decision;
  const base = {
    time: new Date().toISOString(),
    endpoint: rc.endpoint,
    ...(rc.uid ? { uid: rc.uid } : {}),
    namespace: rc.namespace,
    ...(rc.name ? { name: rc.name } : {}),
    ...(rc.user ? { user: rc.user } : {}),
    images: rc.images,
  };
  try {
    if (decision.breakGlass) {
      await ctx.audit.append({
        ...base,
        event: "break-glass",
        reason: decision.breakGlass.reason,
        ticket: decision.breakGlass.ticket,
        overridden: decision.breakGlass.overridden,
      });
      ctx.logger.warn({ ...base, ticket: decision.breakGlass.ticket }, "break-glass override admitted");
    }
    if (decision.failOpen) {
      await ctx.audit.append({ ...base, event: "fail-open", backends: decision.failOpen });
      ctx.logger.warn({ ...base, backends: decision.failOpen }, "admitted by fail-open");
    }
  } catch (e) {
    ctx.logger.error({ err: e, ...base }, "audit log write failed; denying");
    return deny([{ policy: "imprimatur", rule: "auditLog", message: `the admission could not be recorded in the audit log (${(e as Error).message}), so it is denied` }]);
  }
  return decision;
}
