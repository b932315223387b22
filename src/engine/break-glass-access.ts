// Who may use break-glass, found out before the policies judge a subject that requests it: for every image policy
// in scope that allows overrides, whether the requesting user may use one on it (a SubjectAccessReview in the
// caller's cluster, src/kube/break-glass-reviews.ts). The core then honours an override only on policies the user
// may override (src/core/break-glass.ts). Asked only when a pod carries a break-glass annotation.
//
// Without an answer the override is refused, not honoured: a request that names no user (an ImageReview carries
// none), a server without a Kubernetes API, a cluster it cannot read, an authorizer that does not answer in time.
// `breakGlass.authorization: None` in the server's configuration honours the annotations alone, as `check` does
// (it has no cluster to ask); both then warn that no one was asked.
import { breakGlassRequested, type BreakGlassAccess, type BreakGlassAuthorization, type BreakGlassGrant } from "../core/break-glass.ts";
import type { AdmissionSubject } from "../core/admission-subject.ts";
import type { ImagePolicy } from "../core/image-policy/image-policy.ts";
import { namespacedObjectName } from "../core/namespaced-policy.ts";
import type { ClusterTools } from "./cluster-tools.ts";

export const UNCHECKED_BY_CONFIGURATION = "the server's breakGlass.authorization is None";
export const UNCHECKED_OFFLINE = "imprimatur check has no cluster to ask; in a cluster a SubjectAccessReview decides";

/** Undefined, at once, when no pod of the subject requests break-glass (nearly every admission). */
export function breakGlassAccessFor(
  subject: AdmissionSubject,
  policies: readonly ImagePolicy[],
  tools: ClusterTools,
  authorization: BreakGlassAuthorization,
  deadline: number,
): Promise<BreakGlassAccess> | undefined {
  if (!subject.pods.some((pod) => breakGlassRequested(pod.annotations))) return undefined;
  return ask(subject, policies, tools, authorization, deadline);
}

async function ask(
  subject: AdmissionSubject,
  policies: readonly ImagePolicy[],
  tools: ClusterTools,
  authorization: BreakGlassAuthorization,
  deadline: number,
): Promise<BreakGlassAccess> {
  if (authorization === "None") return { checked: false, why: UNCHECKED_BY_CONFIGURATION };
  if (!tools.online) return { checked: false, why: UNCHECKED_OFFLINE };
  const overridable = new Map<string, ImagePolicy>();
  for (const policy of policies) if (policy.breakGlass.allowed) overridable.set(policy.name, policy);
  const user = subject.request.userInfo;
  const username = user?.username ?? "";
  const byPolicy = new Map<string, BreakGlassGrant>();
  const refuseAll = (reason: string) => {
    for (const key of overridable.keys()) byPolicy.set(key, { allowed: false, reason });
    return { checked: true as const, user: username, byPolicy };
  };
  // No user: no one can be asked about, whichever cluster it is.
  if (!user || username === "")
    return refuseAll(
      subject.origin === "imagereview"
        ? "an ImageReview names no user to ask about (set breakGlass.authorization: None to honour the annotations alone)"
        : "the request names no user to ask about",
    );
  if (tools.unreadable !== undefined) return refuseAll(tools.unreadable);
  const reviewer = tools.breakGlass;
  if (!reviewer)
    return refuseAll("the server has no Kubernetes API to ask whether the user may (set breakGlass.authorization: None to honour the annotations alone)");
  await Promise.all(
    [...overridable].map(async ([key, policy]) => {
      const name = policy.namespace === undefined ? policy.name : namespacedObjectName(policy.namespace, policy.name);
      byPolicy.set(key, await reviewer.may(user, { name, namespace: policy.namespace }, deadline));
    }),
  );
  return { checked: true, user: username, byPolicy };
}
