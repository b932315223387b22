// Asks the remote ImageReview backends about one ImageReview spec and combines their answers (cached,
// retried with backoff inside the deadline, and failing open or closed by flag). All must allow. The
// in-process policy kinds are evaluated by the engine beside this step (src/engine/engine.ts); `builtin`
// lets a caller put one in front (tests).
import { imagesByPod, type AdmissionSubject } from "../core/admission-subject.ts";
import { allow, combineDecisions, deny, type Decision, type Violation } from "../core/decision.ts";
import { imagePolicyAnnotations, type ImageReviewSpec } from "../core/image-review.ts";
import { BackendUnavailableError, type RemoteImageReviewBackend } from "./backend.ts";
import type { DecisionCache } from "./decision-cache.ts";
import { sleepUnlessAborted } from "../async/sleep-unless-aborted.ts";

export interface ReviewInput {
  spec: ImageReviewSpec;
  /** Field path of each entry of spec.containers, when the review comes from a Pod. */
  fields?: string[];
  /** The caller's cluster: remote answers are cached per cluster. */
  cluster?: string;
}

export type BuiltinEngine = (input: ReviewInput) => Decision;

export interface ReviewServiceOptions {
  builtin?: BuiltinEngine;
  remotes: RemoteImageReviewBackend[];
  cache: DecisionCache;
  /** Admit when a remote backend cannot be reached in time (default: false, fail closed). */
  failOpen: boolean;
  /** First retry delay; doubles each attempt. */
  retryBackoffMs?: number;
  maxAttempts?: number;
  /** Observability hooks (metrics); optional. */
  onBackendResult?: (backend: string, outcome: "allowed" | "denied" | "cached" | "unavailable") => void;
}

export class ImageReviewService {
  private readonly opts: Required<Omit<ReviewServiceOptions, "onBackendResult" | "builtin">> & Pick<ReviewServiceOptions, "onBackendResult" | "builtin">;

  constructor(options: ReviewServiceOptions) {
    this.opts = { retryBackoffMs: 100, maxAttempts: 4, ...options };
  }

  async review(input: ReviewInput, deadline: number): Promise<Decision> {
    const builtin = this.opts.builtin?.(input) ?? allow();
    if (this.opts.remotes.length === 0) return builtin;
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), Math.max(0, deadline - Date.now()));
    try {
      const remote = await Promise.all(this.opts.remotes.map((b) => this.askRemote(b, input, deadline, controller.signal)));
      // A backend that allowed (and did not merely fail open) is recorded as a pass.
      const withPasses = remote.map((d, i) =>
        d.allowed && !d.failOpen
          ? { ...d, passes: [...(d.passes ?? []), { kind: "Backend" as const, policy: `backend/${this.opts.remotes[i]!.name}`, rule: "review" }] }
          : d,
      );
      return combine([builtin, ...withPasses]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** One ImageReview spec per pod of `subject` (each pod brings its own annotations), as the ImagePolicyWebhook sends it. */
  async reviewPods(subject: AdmissionSubject, deadline: number, cluster: string | undefined): Promise<Decision[]> {
    if (this.opts.remotes.length === 0) return [];
    return Promise.all(
      imagesByPod(subject).map(({ pod, images }) => {
        const spec = {
          containers: images.map((im) => ({ image: im.image })),
          annotations: imagePolicyAnnotations(pod.annotations),
          namespace: subject.namespace,
        };
        // Each cluster's answers are cached apart: the same spec may be judged differently for another cluster.
        return this.review({ spec, fields: images.map((im) => im.field), ...(cluster === undefined ? {} : { cluster }) }, deadline);
      }),
    );
  }

  private async askRemote(backend: RemoteImageReviewBackend, input: ReviewInput, deadline: number, signal: AbortSignal): Promise<Decision> {
    const { spec, cluster } = input;
    const cached = this.opts.cache.get(backend.name, spec, cluster);
    if (cached) {
      this.opts.onBackendResult?.(backend.name, "cached");
      return cached;
    }
    let lastFailure: Failure = { answered: false, message: "no attempt made before the deadline" };
    let delay = this.opts.retryBackoffMs;
    for (let attempt = 1; attempt <= this.opts.maxAttempts && Date.now() < deadline && !signal.aborted; attempt++) {
      try {
        const decision = await backend.review(spec, { signal, deadline });
        this.opts.cache.set(backend.name, spec, decision, cluster);
        this.opts.onBackendResult?.(backend.name, decision.allowed ? "allowed" : "denied");
        return decision;
      } catch (e) {
        lastFailure = failureOf(e);
        const retryable = !(e instanceof BackendUnavailableError) || e.retryable;
        if (!retryable || Date.now() + delay >= deadline) break;
        await sleepUnlessAborted(delay, signal);
        delay *= 2;
      }
    }
    this.opts.onBackendResult?.(backend.name, "unavailable");
    return this.unavailable(backend.name, lastFailure);
  }

  /** Not cached: the next admission should try the backend again. */
  private unavailable(name: string, failure: Failure): Decision {
    const error = failure.message;
    // An answer that is an error is named as an answer: the backend was reached, and said something else than a verdict.
    const state = failure.answered ? "answered with an error" : "unavailable";
    if (this.opts.failOpen) {
      return allow({
        warnings: [
          `image policy backend ${name} ${failure.answered ? `answered with an error: ${error}` : `was unavailable (${error})`}; admitted because the server fails open`,
        ],
        auditAnnotations: { [`backend.${name}`]: `${state}; admitted by fail-open: ${error}`, "fail-open": "true" },
        failOpen: [{ backend: name, error }],
      });
    }
    const violation: Violation = {
      policy: `backend/${name}`,
      rule: "failurePolicy",
      message: `image policy backend ${failure.answered ? `answered with an error: ${error}` : `could not be reached (${error})`}; denying because the server fails closed`,
    };
    return deny([violation], { auditAnnotations: { [`backend.${name}`]: `${state}; denied by fail-closed: ${error}` } });
  }
}

/** Why the last attempt gave no verdict, and whether the backend answered at all (an HTTP error or a malformed body). */
interface Failure {
  answered: boolean;
  message: string;
}

function failureOf(e: unknown): Failure {
  const message = e instanceof Error ? e.message : String(e);
  return { answered: e instanceof BackendUnavailableError && (e.code === "http-status" || e.code === "bad-response"), message };
}

/** All must allow (see combineDecisions); a denial is marked in the audit annotations. */
export function combine(decisions: Decision[]): Decision {
  const out = combineDecisions(...decisions);
  if (!out.allowed) out.auditAnnotations.decision = "denied";
  return out;
}
