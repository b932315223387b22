// An ImageReview backend: something that answers an ImageReview spec with a Decision.
import type { Decision } from "../core/decision.ts";
import type { ImageReviewSpec } from "../core/image-review.ts";
import { ImprimaturError } from "../errors/imprimatur-error.ts";

export interface ReviewCall {
  /** Aborted when the admission deadline passes. */
  signal: AbortSignal;
  /** Epoch milliseconds by which an answer is needed. */
  deadline: number;
}

export interface RemoteImageReviewBackend {
  readonly name: string;
  review(spec: ImageReviewSpec, call: ReviewCall): Promise<Decision>;
  close?(): Promise<void>;
}

export type BackendFailureCode =
  /** No connection: refused, DNS, TLS handshake, reset while reading. */
  | "unreachable"
  /** No answer within the per-attempt timeout or the admission deadline. */
  | "timeout"
  /** An answer that is not an ImageReview status: not JSON, no status.allowed boolean. */
  | "bad-response"
  /** A non-2xx HTTP status. */
  | "http-status";

// A backend that was not reached, or was too slow, may answer the next attempt; one that answers nonsense will not.
const RETRYABLE_BY_DEFAULT: Record<BackendFailureCode, boolean> = { unreachable: true, timeout: true, "bad-response": false, "http-status": false };

/** A remote backend failed to give an answer (unreachable, timed out, malformed or non-2xx response). */
export class BackendUnavailableError extends ImprimaturError<BackendFailureCode> {
  /** Whether another attempt may succeed. */
  readonly retryable: boolean;
  /** The HTTP status, for "http-status". */
  readonly status: number | undefined;

  constructor(code: BackendFailureCode, message: string, details: { retryable?: boolean; status?: number; cause?: unknown } = {}) {
    super(code, message, { cause: details.cause });
    this.retryable = details.retryable ?? RETRYABLE_BY_DEFAULT[code];
    this.status = details.status;
  }
}
