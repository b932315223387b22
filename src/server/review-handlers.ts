// The three webhook endpoints as translators: parse the wire format, extract the AdmissionSubject (the one
// extraction), ask the engine (the one pipeline), and write the answer in the caller's format.
//   /imagereview — kube-apiserver's ImagePolicyWebhook (ImageReview; images only, so PodRestrictions cannot apply);
//   /validate    — a validating admission webhook (AdmissionReview) for Pods, workloads and custom resources;
//   /mutate      — the mutating webhook that pins tags to digests (digestMutate). It never denies for policy
//                  reasons (/validate does), only when a tag cannot be resolved and the server fails closed.
import { admissionResponse, parseAdmissionReview, type AdmissionResponseBody, type ParsedAdmissionReview } from "../core/admission-review.ts";
import type { Caller } from "../audit/caller.ts";
import { allow, capList, moreText, renderReason, type Decision } from "../core/decision.ts";
import { parseImageReview, type ImageReview } from "../core/image-review.ts";
import type { AdmissionCall } from "../engine/admission-call.ts";
import type { Engine } from "../engine/engine.ts";
import { HttpError } from "./http-body.ts";

export interface HandlerContext {
  engine: Engine;
}

/** One request to answer: by when, from whom, and why it cannot be judged when the server is overloaded. */
export interface ReviewRequest {
  deadline: number;
  caller: Caller;
  overloaded?: string;
}

export interface Handled<Body> {
  body: Body;
  /** Undefined when the request held nothing to review. */
  decision: Decision | undefined;
}

export async function handleImageReview(ctx: HandlerContext, body: unknown, request: ReviewRequest): Promise<Handled<ImageReview>> {
  const parsed = parseImageReview(body);
  if (!parsed.ok) throw new HttpError(400, `invalid ImageReview: ${parsed.error}`);
  const { review } = parsed;
  const { decision = allow() } = await ctx.engine.review({ kind: "image-review", spec: review.spec }, { endpoint: "imagereview", dryRun: false, ...request });
  const status: NonNullable<ImageReview["status"]> = { allowed: decision.allowed };
  if (!decision.allowed) status.reason = renderReason(decision.violations);
  // An ImageReview has no warnings: what the webhooks would return as warnings goes to the audit annotations.
  const auditAnnotations =
    decision.warnings.length > 0 ? { ...decision.auditAnnotations, warnings: imageReviewWarnings(decision.warnings) } : decision.auditAnnotations;
  if (Object.keys(auditAnnotations).length > 0) status.auditAnnotations = auditAnnotations;
  return { body: { ...review, status }, decision };
}

/** /validate and /mutate: the engine routes the request (a Namespace, a Pod, a workload, a custom resource). */
export async function handleAdmissionReview(
  ctx: HandlerContext,
  body: unknown,
  request: ReviewRequest,
  endpoint: "validate" | "mutate" = "validate",
): Promise<Handled<AdmissionResponseBody>> {
  const review = admissionReviewOf(body);
  const { decision } = await ctx.engine.review({ kind: "admission", request: review.request }, callOf(review, endpoint, request));
  return { body: admissionResponse(review, decision ?? allow()), decision };
}

export function handleMutate(ctx: HandlerContext, body: unknown, request: ReviewRequest): Promise<Handled<AdmissionResponseBody>> {
  return handleAdmissionReview(ctx, body, request, "mutate");
}

/** The warnings as one JSON list, capped as every list of findings is. */
function imageReviewWarnings(warnings: readonly string[]): string {
  const { listed, more } = capList(warnings);
  return JSON.stringify(more > 0 ? [...listed, moreText(more, "more warnings")] : listed);
}

function admissionReviewOf(body: unknown): ParsedAdmissionReview {
  const parsed = parseAdmissionReview(body);
  if (!parsed.ok) throw new HttpError(400, `invalid AdmissionReview: ${parsed.error}`);
  return parsed.review;
}

function callOf(review: ParsedAdmissionReview, endpoint: "validate" | "mutate", request: ReviewRequest): AdmissionCall {
  const req = review.request;
  return {
    endpoint,
    uid: req.uid,
    ...(req.userInfo?.username ? { user: req.userInfo.username } : {}),
    dryRun: req.dryRun === true,
    ...request,
  };
}
