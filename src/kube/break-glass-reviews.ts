// Whether a user may use break-glass on a policy, asked of the cluster's authorizer with a SubjectAccessReview:
// the verb `break-glass` on the policy's resource (imagepolicies, or namespacedimagepolicies in its namespace), by
// name, for the user, groups, uid and extra of the AdmissionReview's userInfo — what `kubectl auth can-i
// break-glass imagepolicies/NAME --as USER` asks. RBAC grants it with a rule such as
//   {apiGroups: [imprimatur.dev], resources: [imagepolicies], verbs: [break-glass], resourceNames: [NAME]}.
// Answers are kept briefly (a revoked grant stops working within the TTL); failures are not kept.
import { LRUCache } from "lru-cache";
import type { BreakGlassGrant } from "../core/break-glass.ts";
import type { RequestUser } from "../core/admission-subject.ts";
import { asObject } from "../core/primitives/json-shapes.ts";
import { describeApiError } from "./api-requests.ts";
import type { KubeClient } from "./kube-client.ts";

export const BREAK_GLASS_VERB = "break-glass";
export const POLICY_GROUP = "imprimatur.dev";

/** The policy an override would set aside: an ImagePolicy, or a NamespacedImagePolicy in its namespace. */
export interface OverriddenPolicy {
  name: string;
  namespace?: string | undefined;
}

/** An authorization.k8s.io/v1 SubjectAccessReview, as far as this asks it. */
export interface SubjectAccessReview {
  apiVersion: "authorization.k8s.io/v1";
  kind: "SubjectAccessReview";
  spec: {
    user?: string;
    uid?: string;
    groups?: string[];
    extra?: Record<string, string[]>;
    resourceAttributes: { group: string; resource: string; verb: string; name: string; namespace?: string };
  };
}

export interface BreakGlassReviewerOptions {
  /** How long an answer is reused. Default 10 s. */
  ttlMs?: number;
  /** Answers kept. Default 10,000. */
  maxEntries?: number;
  /** How long one SubjectAccessReview may take, whatever the callers' deadlines. Default 5 s. */
  requestTimeoutMs?: number;
}

export class BreakGlassReviewer {
  private readonly kube: KubeClient;
  private readonly requestTimeoutMs: number;
  private readonly answers: LRUCache<string, BreakGlassGrant, SubjectAccessReview>;

  constructor(kube: KubeClient, options: BreakGlassReviewerOptions = {}) {
    this.kube = kube;
    this.requestTimeoutMs = options.requestTimeoutMs ?? 5_000;
    this.answers = new LRUCache({
      max: options.maxEntries ?? 10_000,
      ttl: options.ttlMs ?? 10_000,
      // Callers that ask the same question at once share one request; a caller whose deadline passes stops waiting
      // (may()), not the request.
      ignoreFetchAbort: true,
      fetchMethod: (_key, _stale, { context }) => this.ask(context),
    });
  }

  /** The authorizer's answer, or a refusal that says why it could not be had by `deadline` (epoch ms). */
  async may(user: RequestUser, policy: OverriddenPolicy, deadline: number): Promise<BreakGlassGrant> {
    const review = accessReview(user, policy);
    const key = JSON.stringify(review.spec);
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<BreakGlassGrant>((resolve) => {
      timer = setTimeout(
        () => resolve({ allowed: false, reason: "the authorizer did not answer before the review's deadline" }),
        Math.max(0, deadline - Date.now()),
      );
    });
    try {
      return await Promise.race([
        this.answers.fetch(key, { context: review }).then(
          (grant) => grant ?? { allowed: false, reason: "the authorizer gave no answer" },
          (e: unknown) => ({ allowed: false as const, reason: `the authorizer could not be asked: ${describeApiError(e)}` }),
        ),
        late,
      ]);
    } finally {
      clearTimeout(timer);
    }
  }

  private async ask(review: SubjectAccessReview): Promise<BreakGlassGrant> {
    const answer = await this.kube.request("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", {
      body: review,
      signal: AbortSignal.timeout(this.requestTimeoutMs),
    });
    const status = asObject(asObject(answer)?.status);
    if (status?.allowed === true) return { allowed: true };
    const resource = `${review.spec.resourceAttributes.resource}.${POLICY_GROUP}`;
    const reason = typeof status?.reason === "string" ? status.reason : "";
    const evaluationError = typeof status?.evaluationError === "string" ? status.evaluationError : "";
    const why = reason ? `: ${reason}` : evaluationError ? ` (${evaluationError})` : "";
    return {
      allowed: false,
      reason: `no RBAC rule grants the verb ${BREAK_GLASS_VERB} on ${resource} ${JSON.stringify(review.spec.resourceAttributes.name)}${why}`,
    };
  }

  clear(): void {
    this.answers.clear();
  }
}

/** The SubjectAccessReview that asks whether `user` may break glass on `policy`. */
export function accessReview(user: RequestUser, policy: OverriddenPolicy): SubjectAccessReview {
  return {
    apiVersion: "authorization.k8s.io/v1",
    kind: "SubjectAccessReview",
    spec: {
      ...(user.username ? { user: user.username } : {}),
      ...(user.uid ? { uid: user.uid } : {}),
      ...(user.groups ? { groups: user.groups } : {}),
      ...(user.extra ? { extra: user.extra } : {}),
      resourceAttributes: {
        group: POLICY_GROUP,
        resource: policy.namespace === undefined ? "imagepolicies" : "namespacedimagepolicies",
        verb: BREAK_GLASS_VERB,
        name: policy.name,
        ...(policy.namespace === undefined ? {} : { namespace: policy.namespace }),
      },
    },
  };
}
