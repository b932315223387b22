// The one decision pipeline. Every entry point — the HTTPS webhooks, the ImageReview endpoint, `check`, `verify`,
// `imprimatur test`, the background scan — hands what it was asked to review(); none assembles its own copy of the
// steps. review() routes it (src/engine/review-routing.ts) and runs, for a subject:
//   1. the policies of the caller's cluster and of the subject's namespace, then those whose match/exclude it
//      meets; the namespace's labels, fetched only when some policy needs them;
//   2. at once, as they wait on the network: signature verification of images whose allow rule has attestors
//      (src/engine/verify-images.ts), the remote ImageReview backends, on /imagereview digest records, and when
//      a pod requests break-glass whether its user may (src/engine/break-glass-access.ts);
//   3. every registered policy kind's verdict (src/core/policy-set/policy-kinds.ts) with the verification results, Pod
//      Security Admission, the exceptions that apply;
//   4. on /mutate instead of 2–3: tag→digest pinning, which also records the images it verified
//      (src/engine/pin-subject.ts);
//   5. durable audit records of overrides (break-glass, fail-open, exceptions) before the answer;
//   6. one decision log line and the metrics.
// What the engine is built from, online or offline, is src/engine/engine-builder.ts.
import { clusterOf } from "../audit/caller.ts";
import type { DecisionCache } from "../backends/decision-cache.ts";
import type { AdmissionSubject } from "../core/admission-subject.ts";
import { allow, combineDecisions, deny, type Decision } from "../core/decision.ts";
import { withEvaluationDeadline } from "../core/conditions/evaluation-deadline.ts";
import { namespaceOfRequest, preparedForNamespace } from "../core/policy-set/namespace-scope.ts";
import { podSecurityDecision } from "../core/pod-security/psa-decision.ts";
import { applyExceptions } from "../core/policy-exception/apply-exceptions.ts";
import { policiesVerify } from "../core/image-policy/image-policy.ts";
import { evaluateKinds, policyCount, type PolicySet, type PreparedPolicies } from "../core/policy-set/policy-kinds.ts";
import { scopeRequest, type RequestScope } from "../core/policy-set/request-scope.ts";
import { overloadDecision } from "../core/overload.ts";
import { withActionEffects } from "../core/validation-actions.ts";
import type { DigestResolver } from "../registry/digest-resolver.ts";
import { loadVerifierCode, type Verifier } from "../verification/deferred-verifier.ts";
import type { AdmissionCall } from "./admission-call.ts";
import { recordOverrides } from "./audit-overrides.ts";
import { breakGlassAccessFor } from "./break-glass-access.ts";
import type { ClusterTools } from "./cluster-tools.ts";
import type { EngineParts } from "./engine-parts.ts";
import { logDecision } from "./decision-log.ts";
import { checkNamespace, isCheckedNamespaceChange } from "./namespace-check.ts";
import { pinRequest } from "./pin-request.ts";
import { pinSubject } from "./pin-subject.ts";
import { routeReview, type Reviewable } from "./review-routing.ts";
import { NO_POLICY_IN_FORCE, refusal } from "./refusals.ts";
import { cachedVerifications, signaturesToVerify, verifySignatures } from "./verify-images.ts";

/** What review() answers. */
export interface Reviewed {
  /** Undefined when the request held nothing to review (or a Namespace that Pod Security Admission does not check). */
  decision: Decision | undefined;
  /** The subject judged. */
  subject?: AdmissionSubject;
  /** Why nothing was reviewed: not a Pod, a built-in workload, a registered custom resource or an imagePaths kind. */
  skipped?: string;
  /** The policies the subject was judged by, after its cluster, namespace and match/exclude (`check` reports them). */
  policies?: PolicySet;
}

type Scoped = RequestScope & { namespaceLabels?: Record<string, string>; refused?: Decision };

export class Engine {
  private readonly parts: EngineParts;

  constructor(parts: EngineParts) {
    this.parts = parts;
    this.loadVerifierFor(parts.policies.all.set);
  }

  get cache(): DecisionCache {
    return this.parts.cache;
  }

  /** Tag→digest resolution cache; absent offline. */
  get resolver(): DigestResolver | undefined {
    return this.parts.resolver;
  }

  /** Signature verification of the server's own cluster's reviews; absent offline (signatures then go unchecked, with a warning). */
  get verifier(): Verifier | undefined {
    return this.parts.tools.home.online ? this.parts.tools.home.verifier : undefined;
  }

  /** Review anything any entry point is asked: the one pipeline. */
  async review(input: Reviewable, call: AdmissionCall): Promise<Reviewed> {
    const judgedBy = this.parts.policies.forCaller(call.caller, call.ownCluster);
    // Where images are: an admission's by the policies it is judged by; a manifest's (check, the scan) by every policy's.
    const imagePaths = (input.kind === "admission" ? judgedBy : this.parts.policies.all).imagePaths;
    // imagePaths are JMESPath a policy wrote: they end at the review's deadline like its other expressions.
    const route = untilDeadline(call, () => routeReview(input, call.endpoint, { templateKinds: this.parts.config.podTemplates, imagePaths }));
    if (route.to === "nothing") return { decision: undefined, skipped: route.why };
    if (route.to === "namespace") {
      const { podSecurity } = this.parts;
      if (!podSecurity || !isCheckedNamespaceChange(route.request)) return { decision: undefined };
      if (call.overloaded !== undefined) return this.shed(undefined, call, call.overloaded);
      const tools = this.parts.tools.for(call.caller);
      const decision = await checkNamespace(route.request, podSecurity, tools.online ? tools.pods : undefined, call.deadline);
      this.parts.recorder.decision(call.endpoint, decision);
      return { decision };
    }
    const subject = route.subject;
    if (call.overloaded !== undefined) return this.shed(subject, call, call.overloaded);
    // With --require-policies and nothing in force every review is refused; /mutate then has nothing to pin.
    if (call.endpoint !== "mutate" && this.parts.requirePolicies && !this.policiesInForce())
      return this.finish(subject, call, refusal("noPolicy", NO_POLICY_IN_FORCE));
    const tools = this.parts.tools.for(call.caller);
    const scope = await this.scopeFor(subject, call, tools, judgedBy);
    if (scope.refused) return this.finish(subject, call, scope.refused);
    return call.endpoint === "mutate" ? this.mutate(subject, call, tools, scope) : this.validate(subject, call, tools, scope);
  }

  /** Admit or deny: every policy kind, the remote backends, and on /imagereview digest records. */
  private async validate(subject: AdmissionSubject, call: AdmissionCall, tools: ClusterTools, scope: Scoped): Promise<Reviewed> {
    const { prepared, namespaceLabels, violations: outOfReach, failedOpen } = scope;
    const { podSecurity, config } = this.parts;
    // Signatures, remote backends and, for an ImageReview, digest records wait on the network: all at once. An
    // ImageReview answer cannot change the pod, so tags marked digestMutate are resolved and recorded only.
    const recordDigests =
      call.endpoint === "imagereview" && tools.online ? tools.pinner.pin(pinRequest(subject, prepared), call.deadline, "record") : undefined;
    const signatures = signaturesToVerify(tools, prepared.set.ImagePolicy, subject, namespaceLabels);
    // Verified images whose results are cached (a rollout's pods, a repeat admission) are answered without an await.
    const known = signatures && cachedVerifications(signatures, subject, NO_PINNED_DIGESTS, call.presentedCredentials);
    // Most admissions have nothing to wait on (no signature to verify, no remote backend): they skip the
    // Promise.all and its microtasks.
    const breakGlassAccess = breakGlassAccessFor(subject, prepared.set.ImagePolicy, tools, config.breakGlass.authorization, call.deadline);
    const waits =
      (signatures !== undefined && known === undefined) || this.parts.remotes.length > 0 || recordDigests !== undefined || breakGlassAccess !== undefined;
    const [verifications, remote, resolved, breakGlass] = waits
      ? await Promise.all([
          known ?? (signatures && verifySignatures(signatures, subject, NO_PINNED_DIGESTS, call.deadline, call.presentedCredentials)),
          this.parts.reviews.reviewPods(subject, call.deadline, clusterOf(call.caller)),
          recordDigests,
          breakGlassAccess,
        ])
      : [known, [], undefined, undefined];
    const decisions = untilDeadline(call, () =>
      evaluateKinds(prepared, subject, {
        ...(namespaceLabels === undefined ? {} : { namespaceLabels }),
        ...(verifications ? { verifications } : {}),
        ...(breakGlass ? { breakGlassAccess: breakGlass } : {}),
        failOpen: config.failOpen,
        now: Date.now(),
      }),
    );
    const psa = podSecurity && podSecurityDecision(subject, namespaceLabels, podSecurity);
    if (psa) decisions.push(psa);
    decisions.push(...remote);
    if (resolved) decisions.push(resolved.decision);
    if (outOfReach.length > 0) decisions.push(deny(outOfReach));
    if (failedOpen) decisions.push(failedOpen);
    // Failures set to Warn or Audit add their warnings and audit annotation once, over every kind.
    // Exceptions first: a failure they set aside must not warn or be audited as a failure.
    const combined =
      decisions.length === 0
        ? allow()
        : withActionEffects(applyExceptions(combineDecisions(...decisions), subject, prepared.byKind.PolicyException, this.parts.honouredExceptions));
    if (!combined.allowed) combined.auditAnnotations.decision = "denied";
    const images = subject.images.map((i) => i.image);
    const decision = await recordOverrides(this.parts.audit, this.parts.logger, combined, subject, call, images);
    return { ...this.finish(subject, call, decision), policies: prepared.set };
  }

  /** Pin (or record) the digests of the subject's digestMutate images; no decision when none asks for it. */
  private async mutate(subject: AdmissionSubject, call: AdmissionCall, tools: ClusterTools, scope: Scoped): Promise<Reviewed> {
    // Offline nothing is pinned. Policies whose scope cannot be decided pin nothing here; /validate denies with the reason.
    const decision = tools.online ? await pinSubject(this.parts, subject, call, tools, scope) : undefined;
    return decision ? this.finish(subject, call, decision) : { decision: undefined, subject };
  }

  /**
   * The policies a request is judged by: its cluster's, its namespace's, then those whose match/exclude it meets; the
   * namespace's labels when a policy needs them; a refusal when they would be another cluster's.
   */
  private async scopeFor(subject: AdmissionSubject, call: AdmissionCall, tools: ClusterTools, judgedBy: PreparedPolicies): Promise<Scoped> {
    // Other namespaces' policies are left out before anything of theirs (a condition, a selector) runs.
    const ofNamespace = preparedForNamespace(judgedBy, namespaceOfRequest(subject.request));
    // Pod Security Admission reads every namespace's labels; policies only when one of them has a selector.
    const needsLabels = ofNamespace.usesNamespaceLabels || this.parts.podSecurity !== undefined;
    // Never another cluster's labels: the review is refused, whatever the failure policy.
    if (needsLabels && tools.unreadable !== undefined) return { prepared: ofNamespace, violations: [], refused: refusal("clusterAccess", tools.unreadable) };
    if (needsLabels) await tools.namespaces.prepare?.(subject.namespace, call.deadline);
    const namespaceLabels = needsLabels ? tools.namespaces.labels(subject.namespace) : undefined;
    const request = { request: subject.request, ...(namespaceLabels ? { namespaceLabels } : {}) };
    const scope = untilDeadline(call, () => scopeRequest(ofNamespace, request, this.parts.config.failOpen));
    return { ...scope, ...(namespaceLabels ? { namespaceLabels } : {}) };
  }

  /** Not judged (the server is overloaded): the failure policy's answer, recorded and audited as any other. */
  private async shed(subject: AdmissionSubject | undefined, call: AdmissionCall, reason: string): Promise<Reviewed> {
    this.parts.recorder.reviewShed(call.endpoint);
    const decision = overloadDecision(reason, this.parts.config.failOpen);
    if (!subject) {
      this.parts.recorder.decision(call.endpoint, decision);
      return { decision };
    }
    const images = subject.images.map((i) => i.image);
    return this.finish(subject, call, await recordOverrides(this.parts.audit, this.parts.logger, decision, subject, call, images));
  }

  private finish(subject: AdmissionSubject, call: AdmissionCall, decision: Decision): Reviewed {
    logDecision(this.parts.logger, this.parts.recorder, subject, call, decision);
    return { decision, subject };
  }

  policies(): PolicySet {
    return this.parts.policies.all.set;
  }

  /** Whether anything decides: a policy loaded, or Pod Security Admission on. */
  policiesInForce(): boolean {
    return policyCount(this.parts.policies.all.set) > 0 || this.parts.podSecurity !== undefined;
  }

  remoteBackendNames(): string[] {
    return this.parts.remotes.map((r) => r.name);
  }

  /**
   * Swaps the policy set atomically; cached remote answers and resolutions may depend on it, so they go. `generation`:
   * the set's number where verification results are shared between processes (serve --workers).
   */
  setPolicies(set: PolicySet, generation?: number): void {
    this.parts.policies.replace(set);
    this.forgetPolicyResults(generation);
    this.loadVerifierFor(set);
  }

  /**
   * Swaps another cluster's own policy resources (serve --policy-crds with --cluster-kubeconfig): its requests are
   * judged by them and by the server's policies that cover it, no other cluster's. Not for the server's own cluster.
   */
  setClusterPolicies(cluster: string, set: PolicySet): void {
    this.parts.policies.replaceClusterOwn(cluster, set);
    this.forgetPolicyResults();
    this.loadVerifierFor(set);
  }

  /** A set with a rule that verifies: the verifier's code loads now, not with the first admission that needs it. */
  private loadVerifierFor(set: PolicySet): void {
    // A failed load denies each image that needs verifying, naming why; here it is logged once.
    if (this.parts.tools.home.online && policiesVerify(set.ImagePolicy))
      loadVerifierCode().catch((e: unknown) =>
        this.parts.logger.error({ err: (e as Error).message }, "the signature verification code cannot be loaded: images that need verifying are denied"),
      );
  }

  /**
   * Names verification results with `generation` from now on, the set unchanged: a worker of serve --workers, whose
   * first set is its primary's set of that number.
   */
  nameResultsWith(generation: number): void {
    for (const tools of this.parts.tools.all()) if (tools.online) tools.verifier.clear(generation);
  }

  /** After a policy change: cached answers, resolutions and verifications may depend on it. */
  private forgetPolicyResults(generation?: number): void {
    this.parts.cache.clear();
    this.parts.resolver?.clear();
    for (const tools of this.parts.tools.all()) if (tools.online) tools.verifier.clear(generation);
  }

  async close(): Promise<void> {
    await this.parts.close();
    await Promise.all(this.parts.tools.all().map((tools) => (tools.online ? tools.events?.flush() : undefined)));
    await this.parts.audit?.close();
  }
}

/** /validate pins nothing: its images are verified at the digests they name. */
const NO_PINNED_DIGESTS: ReadonlyMap<string, string> = new Map();

/** Policy text (conditions, imagePaths, selectors) runs until the review's deadline, and no further. */
function untilDeadline<T>(call: AdmissionCall, evaluate: () => T): T {
  return withEvaluationDeadline(() => Date.now() > call.deadline, evaluate);
}
