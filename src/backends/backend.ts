// An ImageReview backend: something that answers an ImageReview spec with a Decision.
import type { Decision } from "../core/decision.ts";
import type { ImageReviewSpec } from "../core/image-review.ts";

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

/** A remote backend failed to give an answer (unreachable, timed out, malformed or non-2xx response). */
export class BackendUnavailableError extends Error {
  readonly retryable: boolean;
  constructor(message: string, retryable: boolean) {
    super(message);
    this.name = "BackendUnavailableError";
    this.retryable = retryable;
  }
}
