// The failures of Kubernetes API requests (kube-client.ts): an answer that is not a success carries its HTTP status
// and the Status body's reason and message (which names a missing RBAC rule), so callers branch on the status and
// log the message.
import { ImprimaturError } from "../errors/imprimatur-error.ts";

export type KubeApiErrorCode =
  /** HTTP 401: the API rejected the credentials (or none could be had: an exec plugin failed). */
  | "unauthorized"
  /** HTTP 403: the identity lacks an RBAC permission (the message names it). */
  | "forbidden"
  /** No answer within the request timeout. */
  | "timeout"
  /** Anything else: unreachable, another HTTP status (`httpStatus` says which). */
  | "unavailable"
  /** The caller stopped waiting (its signal aborted); the request may go on for others. */
  | "aborted";

/** A Status body's `details`: what the failure is about ("pods", "namespaces" or a custom resource's plural in kind). */
export interface KubeStatusDetails {
  kind?: string;
  name?: string;
  group?: string;
}

/** A request to the Kubernetes API that gave no usable answer. */
export class KubeApiError extends ImprimaturError<KubeApiErrorCode> {
  /** The HTTP status the API answered with; undefined when there was no answer. */
  readonly httpStatus: number | undefined;
  /** The Status body's reason ("NotFound", "AlreadyExists", "Conflict", "Expired"), when the API gave one. */
  readonly reason: string | undefined;

  /** The Status body's details: the kind and name of the object a 404 or 409 is about. */
  readonly details: KubeStatusDetails | undefined;

  constructor(code: KubeApiErrorCode, message: string, options?: { cause?: unknown; httpStatus?: number; reason?: string; details?: KubeStatusDetails }) {
    super(code, message, options);
    this.httpStatus = options?.httpStatus;
    this.reason = options?.reason;
    this.details = options?.details;
  }
}

/** The code of a failed answer with HTTP `status`. */
export function codeForHttpStatus(status: number): KubeApiErrorCode {
  return status === 401 ? "unauthorized" : status === 403 ? "forbidden" : status === 504 ? "timeout" : "unavailable";
}

/** Whether `err` is an answer of the API with HTTP `status`. */
export function hasStatus(err: unknown, status: number): boolean {
  return err instanceof KubeApiError && err.httpStatus === status;
}

/** The code for a request that failed with `err`: its own when it is a KubeApiError; else "aborted" when `signal` ended it, "unavailable" otherwise. */
export function kubeApiErrorCode(err: unknown, signal?: AbortSignal): KubeApiErrorCode {
  if (err instanceof KubeApiError) return err.code;
  return signal?.aborted ? "aborted" : "unavailable";
}

/** A failure in a line: the message, with its cause's when that says more. */
export function describeApiError(err: unknown): string {
  if (err instanceof KubeApiError) return err.message;
  if (err instanceof Error) {
    const cause = (err as { cause?: unknown }).cause;
    return cause instanceof Error && cause.message !== err.message ? `${err.message} (${cause.message})` : err.message;
  }
  return String(err);
}
