// AdmissionReview (admission.k8s.io/v1, and v1beta1 answered in kind): validation of the incoming review and
// the response. What the request holds is extracted in admission-subject.ts.
import { quotedValue } from "./primitives/quoted-value.ts";
import { capList, moreText, renderReason, type Decision } from "./decision.ts";
import { isObject } from "./primitives/json-shapes.ts";

export const ADMISSION_API_VERSIONS = ["admission.k8s.io/v1", "admission.k8s.io/v1beta1"] as const;
/** The operations admission.k8s.io defines; DELETE and CONNECT start no image and are answered allowed. */
export const ADMISSION_OPERATIONS = ["CREATE", "UPDATE", "DELETE", "CONNECT"] as const;

export interface AdmissionRequest {
  uid: string;
  kind?: { group?: string; version?: string; kind?: string };
  resource?: { group?: string; version?: string; resource?: string };
  subResource?: string;
  name?: string;
  namespace?: string;
  operation?: string;
  /** The authenticated user (authentication/v1 UserInfo): what a SubjectAccessReview asks about, as the apiserver saw it. */
  userInfo?: { username?: string; uid?: string; groups?: string[]; extra?: Record<string, string[]> };
  object?: Record<string, unknown> | null;
  oldObject?: Record<string, unknown> | null;
  dryRun?: boolean;
}

export interface ParsedAdmissionReview {
  apiVersion: (typeof ADMISSION_API_VERSIONS)[number];
  request: AdmissionRequest;
}

export type AdmissionParseResult = { ok: true; review: ParsedAdmissionReview } | { ok: false; error: string };

export function parseAdmissionReview(body: unknown): AdmissionParseResult {
  if (!isObject(body)) return { ok: false, error: "body must be a JSON object (an AdmissionReview)" };
  const apiVersion = ADMISSION_API_VERSIONS.find((v) => v === body.apiVersion);
  if (!apiVersion) {
    return { ok: false, error: `apiVersion must be one of ${ADMISSION_API_VERSIONS.join(", ")}, got ${quotedValue(body.apiVersion ?? null)}` };
  }
  if (body.kind !== "AdmissionReview") return { ok: false, error: `kind must be "AdmissionReview", got ${quotedValue(body.kind ?? null)}` };
  const request = body.request;
  if (!isObject(request)) return { ok: false, error: "request must be an object" };
  if (typeof request.uid !== "string" || request.uid === "") return { ok: false, error: "request.uid must be a non-empty string" };
  // A request that does not say what it does cannot be judged; "allowed" would let it pass as a no-op.
  if (!ADMISSION_OPERATIONS.some((op) => op === request.operation)) {
    return { ok: false, error: `request.operation must be one of ${ADMISSION_OPERATIONS.join(", ")}, got ${quotedValue(request.operation ?? null)}` };
  }
  const wrongType = requestFieldTypeError(request);
  if (wrongType) return { ok: false, error: wrongType };
  for (const key of ["object", "oldObject"] as const) {
    const v = request[key];
    if (v !== undefined && v !== null && !isObject(v)) return { ok: false, error: `request.${key} must be an object` };
  }
  // The apiserver always sends the object of a CREATE or UPDATE; without it the request cannot be judged,
  // and answering "allowed" would be ambiguous.
  if ((request.operation === "CREATE" || request.operation === "UPDATE") && !isObject(request.object)) {
    return { ok: false, error: `request.object must be an object for operation ${request.operation}` };
  }
  return { ok: true, review: { apiVersion, request: request as unknown as AdmissionRequest } };
}

/** Absent, or null as Kubernetes decodes it, is fine; otherwise the value must pass `ok`. */
const absentOr = (v: unknown, ok: (v: unknown) => boolean): boolean => v === undefined || v === null || ok(v);
const isString = (v: unknown): v is string => typeof v === "string";

/**
 * The fields of AdmissionRequest the engine reads (matching, routing, audit) must have the types it declares:
 * a value of another type would be taken for one, and could throw far from here.
 */
function requestFieldTypeError(request: Record<string, unknown>): string | undefined {
  for (const key of ["name", "namespace", "subResource"] as const) {
    if (!absentOr(request[key], isString)) return `request.${key} must be a string`;
  }
  if (!absentOr(request.dryRun, (v) => typeof v === "boolean")) return "request.dryRun must be true or false";
  const objects = [
    ["kind", ["group", "version", "kind"]],
    ["resource", ["group", "version", "resource"]],
    ["userInfo", ["username", "uid"]],
  ] as const;
  for (const [key, members] of objects) {
    const v = request[key];
    if (v === undefined || v === null) continue;
    if (!isObject(v)) return `request.${key} must be an object`;
    for (const m of members) if (!absentOr(v[m], isString)) return `request.${key}.${m} must be a string`;
  }
  const groups = isObject(request.userInfo) ? request.userInfo.groups : undefined;
  if (!absentOr(groups, (g) => Array.isArray(g) && g.every(isString))) return "request.userInfo.groups must be a list of strings";
  const extra = isObject(request.userInfo) ? request.userInfo.extra : undefined;
  if (!absentOr(extra, (x) => isObject(x) && Object.values(x).every((v) => Array.isArray(v) && v.every(isString))))
    return "request.userInfo.extra must map names to lists of strings";
  return undefined;
}

export interface AdmissionResponseBody {
  apiVersion: string;
  kind: "AdmissionReview";
  response: {
    uid: string;
    allowed: boolean;
    status?: { code: number; reason?: string; message: string };
    warnings?: string[];
    auditAnnotations?: Record<string, string>;
    patchType?: "JSONPatch";
    /** base64 of the JSON patch document. */
    patch?: string;
  };
}

/** The denial message lists every violation; the apiserver prefixes it with the webhook's name. */
export function admissionResponse(review: ParsedAdmissionReview, decision: Decision): AdmissionResponseBody {
  const response: AdmissionResponseBody["response"] = { uid: review.request.uid, allowed: decision.allowed };
  if (!decision.allowed) {
    response.status = { code: 403, reason: "Forbidden", message: renderReason(decision.violations) };
  }
  if (decision.warnings.length > 0) {
    const { listed, more } = capList(decision.warnings);
    response.warnings = [...listed.map(sanitizeWarning), ...(more > 0 ? [moreText(more, "more warnings")] : [])];
  }
  if (Object.keys(decision.auditAnnotations).length > 0) response.auditAnnotations = decision.auditAnnotations;
  if (decision.allowed && decision.patches && decision.patches.length > 0) {
    response.patchType = "JSONPatch";
    response.patch = Buffer.from(JSON.stringify(decision.patches)).toString("base64");
  }
  return { apiVersion: review.apiVersion, kind: "AdmissionReview", response };
}

/** Kubernetes drops warnings with control characters and truncates long ones; keep them printable and short. */
function sanitizeWarning(w: string): string {
  const clean = w.replace(/[\u0000-\u001f\u007f]/g, " ");
  return clean.length > 500 ? `${clean.slice(0, 497)}...` : clean;
}
