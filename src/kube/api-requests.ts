// Helpers for calls through @kubernetes/client-node's generated API clients: making a request abortable,
// and reading its failures (an ApiException carries the Status body, which names a missing RBAC rule).
import { ApiException, Observable } from "@kubernetes/client-node";
import type { ObservableMiddleware } from "@kubernetes/client-node";
import { ImprimaturError } from "../errors/imprimatur-error.ts";

export type KubeApiErrorCode =
  /** HTTP 401: the API rejected the credentials. */
  | "unauthorized"
  /** HTTP 403: the identity lacks an RBAC permission (the message names it). */
  | "forbidden"
  /** No answer within the request timeout. */
  | "timeout"
  /** Anything else: unreachable, another HTTP status. */
  | "unavailable"
  /** The caller stopped waiting (its signal aborted); the request may go on for others. */
  | "aborted";

/** A read from the Kubernetes API that gave no usable answer. */
export class KubeApiError extends ImprimaturError<KubeApiErrorCode> {}

/** Per-request options that make the generated client's fetch abortable. */
export function withSignal(signal: AbortSignal): { middleware: ObservableMiddleware[]; middlewareMergeStrategy: "append" } {
  return {
    middleware: [
      {
        pre: (context) => {
          context.setSignal(signal);
          return new Observable(Promise.resolve(context));
        },
        post: (response) => new Observable(Promise.resolve(response)),
      },
    ],
    middlewareMergeStrategy: "append",
  };
}

export function hasStatus(err: unknown, status: number): boolean {
  if (err instanceof ApiException) return err.code === status;
  return typeof err === "object" && err !== null && (err as { statusCode?: unknown }).statusCode === status;
}

/**
 * The code for a request that failed with `err`: its own when it is a KubeApiError; "aborted" when the caller's
 * `signal` ended it; "unauthorized" for HTTP 401, "forbidden" for 403; else "unavailable".
 */
export function kubeApiErrorCode(err: unknown, signal?: AbortSignal): KubeApiErrorCode {
  if (err instanceof KubeApiError) return err.code;
  if (signal?.aborted) return "aborted";
  if (hasStatus(err, 401)) return "unauthorized";
  if (hasStatus(err, 403)) return "forbidden";
  return "unavailable";
}

/** An API failure in a line: the HTTP status and the Status message. */
export function describeApiError(err: unknown): string {
  if (err instanceof ApiException) {
    // The body is a Status, as text or parsed; its message says what was wrong (e.g. which RBAC rule is missing).
    let body: unknown = err.body;
    if (typeof body === "string") {
      try {
        body = JSON.parse(body);
      } catch {
        // not JSON: keep the status code alone
      }
    }
    const message = typeof body === "object" && body !== null ? (body as { message?: unknown }).message : undefined;
    return `HTTP ${err.code}${typeof message === "string" && message ? `: ${message}` : ""}`;
  }
  if (err instanceof Error) {
    const cause = (err as { cause?: unknown }).cause;
    return cause instanceof Error && cause.message !== err.message ? `${err.message} (${cause.message})` : err.message;
  }
  return String(err);
}
