// The one decision pipeline. Every entry point — the HTTPS webhooks, the ImageReview endpoint, `check`,
// `imprimatur test`, later the node-side gRPC service — turns its input into an AdmissionSubject and calls
// this engine; none assembles its own copy of the steps. The steps, in order:
//   1. the namespace's labels, fetched only when some policy needs them;
//   2. at once, as they wait on the network: signature verification of images whose allow rule has attestors
//      (src/verification/), the remote ImageReview backends (cached, fail open/closed), and on /imagereview
//      digest records;
//   3. every registered policy kind's verdict (src/core/policy-kinds.ts), with the verification results;
//   4. tag→digest pinning on /mutate, which also records the images it verified;
//   5. durable audit records of overrides (break-glass, fail-open) before the answer;
//   6. one decision log line and the metrics.
import type { KubeConfig } from "@kubernetes/client-node";
import { pino, type Logger } from "pino";
import { AuditLog } from "../audit/audit-log.ts";
import { clusterOf, describeCaller, type Caller } from "../audit/caller.ts";
import { DecisionCache } from "../backends/decision-cache.ts";
import { ImageReviewService } from "../backends/review-service.ts";
import { WebhookBackend } from "../backends/webhook-backend.ts";
import type { ServerConfig } from "../config/server-config.ts";
import { imagesByPod, subjectOfObject, subjectOfRequest, type AdmissionSubject, type RequestUser, type SubjectPlan } from "../core/admission-subject.ts";
import type { AdmissionRequest } from "../core/admission-review.ts";
import { CLUSTER_UNREADABLE, hasNamespacedPolicies, isClusterScoped, policiesForCluster } from "../core/cluster-scope.ts";
import { withClusterOwnPolicies } from "../core/cluster-policies.ts";
import { allow, capList, combineDecisions, deny, type Decision, type JsonPatchOperation } from "../core/decision.ts";
import { registryAnswered, type PinningOutcome } from "../core/digest-pinning.ts";
import { imagePolicyAnnotations } from "../core/image-review.ts";
import { fullName } from "../core/image-reference.ts";
import { asObject } from "../core/json-shapes.ts";
import { withActionEffects } from "../core/validation-actions.ts";
import { podSecurityDecision, POD_SECURITY_POLICY } from "../core/pod-security/psa-decision.ts";
import {
  checkNamespaceChange,
  NAMESPACE_MAX_PODS_TO_CHECK,
  NAMESPACE_POD_CHECK_BUDGET_MS,
  type PodSecurityContext,
} from "../core/pod-security/psa-evaluate.ts";
import { CoreV1Api } from "@kubernetes/client-node";
import { withSignal } from "../kube/api-requests.ts";
import { NO_NAMESPACE_LABELS, type NamespaceLabelSource } from "../core/namespace-labels.ts";
import { namespaceOfRequest, preparedForNamespace } from "../core/namespace-scope.ts";
import { withEvaluationDeadline } from "../core/conditions/evaluation-deadline.ts";
import { evaluateKinds, policyCount, preparePolicies, type PolicySet, type PreparedPolicies } from "../core/policy-kinds.ts";
import type { MatchedRequest } from "../core/request-match/request-match.ts";
import { scopeRequest, type RequestScope } from "../core/request-match/request-scope.ts";
import { ANONYMOUS, type CredentialLookup } from "../credentials/credential.ts";
import { lookupForPolicy, PodCredentials, type PodLookup } from "../kube/pod-credentials.ts";
import { verifies } from "../core/image-policy/image-policy.ts";
import { verificationsNeeded, verifiedImagesPatches, type VerificationNeed } from "../core/image-policy/image-verification.ts";
import { verificationKey, type ImageVerification } from "../core/image-policy/verification-results.ts";
import type { SecretKeyRef } from "../core/image-policy/attestors.ts";
import { ImageVerifier } from "../verification/image-verifier.ts";
import { SecretKeyReader } from "../kube/secret-keys.ts";
import { EventRecorder, type EventSink } from "../kube/event-recorder.ts";
import { PullSecretReader } from "../kube/pull-secrets.ts";
import { ImagePinner, type PinRequest } from "../pinning/image-pinner.ts";
import { DigestResolver } from "../registry/digest-resolver.ts";
import { RegistryClient, type RoundTrip } from "../registry/registry-client.ts";
import type { RegistrySettingsMap } from "../registry/registry-settings.ts";
import type { AdmissionCall } from "./admission-call.ts";
import { applyExceptions, type HonouredNamespaces } from "../core/policy-exception/apply-exceptions.ts";
import { recordOverrides } from "./audit-overrides.ts";
import { NO_RECORDER, type Recorder } from "./recorder.ts";
import { ClusterUnreadableError, clusterToRead, fromHomeCluster, NO_OTHER_CLUSTERS, type ClusterConnections } from "./cluster-reads.ts";

/** How long Pod Security Admission's namespace check waits for the list of the namespace's pods. */
const NAMESPACE_POD_LIST_TIMEOUT_MS = 5_000;

export interface EngineOptions {
  config: ServerConfig;
  policies: PolicySet;
  namespaces?: NamespaceLabelSource;
  logger?: Logger;
  recorder?: Recorder;
  /** The append-only audit log; without one, an override that must be recorded is refused. */
  auditLogPath?: string;
  /** Offline (check, policy tests): no remote backends, no registry, no Kubernetes API. */
  offline?: boolean;
  /** The server's own cluster's API: pods' pull secrets, k8s:// keys, pods and Events (with `namespaces`: its labels). */
  kube?: KubeConfig;
  /** The other clusters whose callers share the server, and the name of its own (src/engine/cluster-reads.ts). */
  clusters?: ClusterConnections;
  registries?: RegistrySettingsMap;
  /** The server's own registry credentials (--authfile), tried after a pod's. */
  staticCredentials?: CredentialLookup;
  /** Called for every registry HTTP exchange (benchmarks count round trips). */
  onRegistryRoundTrip?: (trip: RoundTrip) => void;
  /** Honour the namespaces' pod-security.kubernetes.io labels as Pod Security Admission does (src/core/pod-security/). */
  podSecurity?: PodSecurityContext;
  /** Deny every review while no policy is in force (`serve --require-policies`), instead of admitting everything. */
  requirePolicies?: boolean;
  /** The namespaces whose PolicyExceptions are honoured (`serve --exceptions-namespace`); none by default. */
  exceptionNamespaces?: readonly string[];
}

/** The clock check of a review's deadline, for the CEL evaluations it runs (src/core/conditions/evaluation-deadline.ts). */
const pastDeadlineOf =
  (call: AdmissionCall): (() => boolean) =>
  () =>
    Date.now() > call.deadline;

/** A review that needs a read of a cluster the server has no kubeconfig for: denied whatever the failure policy. */
function clusterRefusal(reason: string): Decision {
  return deny([{ policy: "imprimatur", rule: "clusterAccess", message: reason }], { auditAnnotations: { decision: "denied" } });
}

/** The denial of every review while `--require-policies` finds nothing in force. */
export const NO_POLICY_IN_FORCE =
  "no policy is in force yet, and the server requires one (serve --require-policies): every request is refused until a policy is loaded";

/** What the engine reads of one cluster, and the tools that read it: made once per cluster, on its first review. */
interface ClusterTools {
  namespaces: NamespaceLabelSource;
  kube: KubeConfig | undefined;
  /** Absent offline. */
  credentials: PodCredentials | undefined;
  verifier: ImageVerifier | undefined;
  pinner: ImagePinner | undefined;
  events: EventRecorder | undefined;
  /** Made on first use: only Pod Security Admission's namespace check lists pods. */
  coreApi?: CoreV1Api;
  /** A caller's cluster the server has no kubeconfig for: why a review that needs a read of it is refused. */
  unreadable?: string;
}

export class Engine {
  readonly cache: DecisionCache;
  /** Tag→digest resolution cache; absent offline. */
  readonly resolver: DigestResolver | undefined;
  private readonly logger: Logger;
  /** Swapped as a whole on reload, so an admission sees one set from start to end. */
  private current: PreparedPolicies;
  /** The set each cluster sees when some policy is scoped to clusters (spec.clusters) or it has its own; emptied on reload. */
  private byCluster = new Map<string | undefined, PreparedPolicies>();
  /** Other clusters' own policy resources (src/core/cluster-policies.ts), by cluster. */
  private readonly ownPolicies = new Map<string, PolicySet>();
  private readonly recorder: Recorder;
  private readonly reviews: ImageReviewService;
  private readonly remotes: WebhookBackend[];
  private readonly audit: AuditLog | undefined;
  private readonly registry: RegistryClient | undefined;
  /** Signature verification of the server's own cluster's reviews; absent offline (signatures then go unchecked, with a warning). */
  readonly verifier: ImageVerifier | undefined;
  private readonly failOpen: boolean;
  private readonly templateKinds: ServerConfig["podTemplates"];
  private readonly podSecurity: PodSecurityContext | undefined;
  private readonly requirePolicies: boolean;
  private readonly honouredExceptions: HonouredNamespaces;
  private readonly options: EngineOptions;
  private readonly clusters: ClusterConnections;
  /** What the server's own cluster's reviews read. */
  private readonly home: ClusterTools;
  /** Other clusters' (bounded: the configured clusters, and the clusters of configured tokens and client certificates). */
  private readonly others = new Map<string, ClusterTools>();

  private constructor(opts: EngineOptions, remotes: WebhookBackend[]) {
    this.logger = opts.logger ?? pino({ level: "silent" });
    this.recorder = opts.recorder ?? NO_RECORDER;
    this.options = opts;
    this.clusters = opts.clusters ?? NO_OTHER_CLUSTERS;
    this.current = preparePolicies(opts.policies);
    this.remotes = remotes;
    this.cache = new DecisionCache({ allowTtlMs: opts.config.allowTtlMs, denyTtlMs: opts.config.denyTtlMs, maxEntries: opts.config.cacheMaxEntries });
    this.reviews = new ImageReviewService({
      remotes,
      cache: this.cache,
      failOpen: opts.config.failOpen,
      onBackendResult: (backend, outcome) => this.recorder.backendResult(backend, outcome),
    });
    this.audit = opts.auditLogPath ? new AuditLog(opts.auditLogPath) : undefined;
    this.failOpen = opts.config.failOpen;
    this.templateKinds = opts.config.podTemplates;
    this.podSecurity = opts.podSecurity;
    this.requirePolicies = opts.requirePolicies === true;
    this.honouredExceptions = new Set(opts.exceptionNamespaces ?? []);
    if (!opts.offline) {
      this.registry = this.registryClient(opts);
      const registry = this.registry;
      this.resolver = new DigestResolver(
        { resolveDigest: (ref, o) => registry.resolveDigest(ref, { signal: o.signal, credentials: o.lookup }) },
        { ttlMs: opts.config.digests.cacheTtlMs, maxEntries: opts.config.digests.cacheMaxEntries },
      );
    }
    this.home = this.toolsOf(opts.kube, opts.namespaces ?? NO_NAMESPACE_LABELS, () => this.current.byKind.TrustRoot);
    this.verifier = this.home.verifier;
  }

  private registryClient(opts: EngineOptions): RegistryClient {
    return new RegistryClient({
      settings: opts.registries ?? new Map(),
      onRoundTrip: (trip) => {
        this.recorder.registryRequest(trip.method, trip.status);
        opts.onRegistryRoundTrip?.(trip);
      },
    });
  }

  /**
   * The tools that read one cluster: its pull secrets, k8s:// keys and Events through `kube`. Without `kube`, a
   * cluster named `unreadable` refuses every read with that reason; the server's own cluster without API access
   * reads nothing (only the server's own credentials, no k8s:// key).
   */
  private toolsOf(
    kube: KubeConfig | undefined,
    namespaces: NamespaceLabelSource,
    trustRoots: () => PreparedPolicies["byKind"]["TrustRoot"],
    unreadable?: string,
  ): ClusterTools {
    const opts = this.options;
    const tools: ClusterTools = {
      namespaces,
      kube,
      credentials: undefined,
      verifier: undefined,
      pinner: undefined,
      events: undefined,
      ...(unreadable === undefined ? {} : { unreadable }),
    };
    const { registry, resolver } = this;
    if (!registry || !resolver) return tools;
    const refuse = (): Promise<never> => Promise.reject(new ClusterUnreadableError(CLUSTER_UNREADABLE, unreadable ?? ""));
    const pullSecrets = kube ? new PullSecretReader(kube, { logger: this.logger }) : unreadable !== undefined ? { credentialsFor: refuse } : undefined;
    tools.events = kube ? new EventRecorder(kube, this.logger) : undefined;
    const credentials = new PodCredentials({
      ...(pullSecrets ? { pullSecrets } : {}),
      staticCredentials: opts.staticCredentials ?? ANONYMOUS,
      ...(opts.registries ? { registries: opts.registries } : {}),
      logger: this.logger,
    });
    tools.credentials = credentials;
    const secretKeys = kube ? new SecretKeyReader(kube) : undefined;
    const readKey = secretKeys ? (ref: SecretKeyRef, signal: AbortSignal) => secretKeys.read(ref, signal) : unreadable !== undefined ? refuse : undefined;
    tools.verifier = new ImageVerifier({
      client: registry,
      trustRoots,
      ...(readKey ? { secretKeys: readKey } : {}),
      // A deleted signature should stop admitting new pods within minutes, whatever the backends' allow TTL.
      verifiedTtlMs: Math.min(opts.config.allowTtlMs, 300_000),
      deniedTtlMs: opts.config.denyTtlMs,
      maxBytesPerImage: opts.config.verification.maxBytesPerImage,
      maxArtifactsPerImage: opts.config.verification.maxArtifactsPerImage,
      // Logged when a verification runs, not on every cache hit (admissions are the bulk of traffic).
      onVerification: (request, result, seconds) => {
        this.recorder.signatureVerification(result.status, seconds);
        const what = { image: fullName(request.image), policy: request.policy, rule: request.rule, seconds };
        if (result.status === "verified") this.logger.info({ ...what, signers: result.evidence }, "signatures verified");
        else this.logger.info({ ...what, outcome: result.status, reason: result.reason }, "signatures not verified");
      },
    });
    tools.pinner = new ImagePinner({
      policies: () => this.current.set.ImagePolicy,
      namespaces,
      resolver,
      credentials,
      mode: opts.config.digests.mode,
      failOpen: opts.config.failOpen,
      logger: this.logger,
      onOutcome: (outcome, mode) => {
        if (outcome.pinned.length > 0) this.recorder.digestResolutions(mode === "mutate" ? "pinned" : "recorded", outcome.pinned.length);
        if (outcome.failed.length > 0) this.recorder.digestResolutions("failed", outcome.failed.length);
      },
    });
    return tools;
  }

  /** The tools that read the caller's cluster (src/engine/cluster-reads.ts): never another cluster's. */
  private toolsFor(caller: Caller | undefined): ClusterTools {
    const target = clusterToRead(caller, this.clusters);
    if (target.kind === "home") return this.home;
    let tools = this.others.get(target.cluster);
    if (!tools) {
      // The trust roots of the set the cluster's requests are judged by: its own TrustRoots among them.
      const cluster = target.cluster;
      const trustRoots = () => this.preparedForCluster(cluster, false).byKind.TrustRoot;
      tools =
        target.kind === "other"
          ? this.toolsOf(target.connection.kube, target.connection.namespaces, trustRoots)
          : this.toolsOf(undefined, NO_NAMESPACE_LABELS, trustRoots, target.reason);
      this.others.set(target.cluster, tools);
    }
    return tools;
  }

  private allTools(): ClusterTools[] {
    return [this.home, ...this.others.values()];
  }

  /** Builds the engine from configuration: remote backends, caches, registry access, audit log. */
  static async build(opts: EngineOptions): Promise<Engine> {
    const remotes = opts.offline
      ? []
      : await Promise.all(opts.config.backends.map((b) => WebhookBackend.fromConfig({ name: b.name, kubeconfig: b.kubeconfig, timeoutMs: b.timeoutMs })));
    return new Engine(opts, remotes);
  }

  policies(): PolicySet {
    return this.current.set;
  }

  remoteBackendNames(): string[] {
    return this.remotes.map((r) => r.name);
  }

  /** Swaps the policy set atomically; cached remote answers and resolutions may depend on it, so they go. */
  setPolicies(set: PolicySet): void {
    this.current = preparePolicies(set);
    this.forgetPolicyResults();
  }

  /**
   * Swaps another cluster's own policy resources (serve --policy-crds with --cluster-kubeconfig): its requests are
   * judged by them and by the server's policies that cover it, no other cluster's. Not for the server's own cluster.
   */
  setClusterPolicies(cluster: string, set: PolicySet): void {
    this.ownPolicies.set(cluster, set);
    this.forgetPolicyResults();
  }

  /** After a policy change: the per-cluster sets, cached answers, resolutions and verifications may depend on it. */
  private forgetPolicyResults(): void {
    this.byCluster = new Map();
    this.cache.clear();
    this.resolver?.clear();
    for (const tools of this.allTools()) tools.verifier?.clear();
  }

  /**
   * What a request asks to review, by the one extraction: Pods, built-in workloads, the custom resources of the
   * server config, and the image locations the image policies that apply to the caller declare (imagePaths).
   */
  subjectOfRequest(req: AdmissionRequest, caller?: Caller): SubjectPlan {
    return subjectOfRequest(req, { templateKinds: this.templateKinds, imagePaths: this.preparedFor(caller).imagePaths });
  }

  /**
   * The policies a request is judged by: those scoped to no cluster and those naming the caller's cluster, and
   * namespaced policies for the server's own cluster's requests only; every policy for an in-process caller (no
   * `caller`). `ownCluster`: a request of the server's own cluster with no caller (the background scan), judged
   * by the policies of the cluster --cluster-name names.
   */
  private preparedFor(caller: Caller | undefined, ownCluster = false): PreparedPolicies {
    if (!caller && !ownCluster) return this.current;
    const cluster = ownCluster ? this.clusters.home : clusterOf(caller);
    return this.preparedForCluster(cluster, ownCluster || fromHomeCluster(caller, this.clusters));
  }

  /** The policies a request of `cluster` is judged by; `home`: the server's own cluster (its namespaced policies apply). */
  private preparedForCluster(cluster: string | undefined, home: boolean): PreparedPolicies {
    const current = this.current;
    const own = home || cluster === undefined ? undefined : this.ownPolicies.get(cluster);
    if (!own && !isClusterScoped(current.set) && (home || !hasNamespacedPolicies(current.set))) return current;
    // Bounded: cluster names come from the configured tokens and from certificates the client CA issued. The
    // cluster decides whether it is the server's own, so it is the whole key.
    let prepared = this.byCluster.get(cluster);
    if (!prepared) {
      const set = own && cluster !== undefined ? withClusterOwnPolicies(current.set, own, cluster) : policiesForCluster(current.set, cluster, home);
      this.byCluster.set(cluster, (prepared = preparePolicies(set)));
    }
    return prepared;
  }

  /** A manifest checked offline, as if it were created. */
  subjectOfObject(obj: Record<string, unknown>, defaultNamespace?: string, user?: RequestUser): SubjectPlan {
    return subjectOfObject(obj, { templateKinds: this.templateKinds, imagePaths: this.current.imagePaths }, defaultNamespace, user);
  }

  /** The policies an in-process caller's subject (`check`, `imprimatur test`) is judged by, after match/exclude. */
  async policiesFor(subject: AdmissionSubject, deadline: number): Promise<PolicySet> {
    return (await this.scopeFor(subject, { endpoint: "check", deadline, dryRun: true }, this.home)).prepared.set;
  }

  /**
   * The policies a request is judged by: its cluster's, its namespace's, then those whose match/exclude it meets; the
   * namespace's labels when a policy needs them; denials for policies whose scope cannot be decided.
   */
  private async scopeFor(
    subject: AdmissionSubject,
    call: AdmissionCall,
    tools: ClusterTools,
  ): Promise<RequestScope & { namespaceLabels?: Record<string, string>; refused?: Decision }> {
    // Other namespaces' policies are left out before anything of theirs (a condition, a selector) runs.
    const ofNamespace = preparedForNamespace(this.preparedFor(call.caller, call.ownCluster), namespaceOfRequest(subject.request));
    // Pod Security Admission reads every namespace's labels; policies only when one of them has a selector.
    const needsLabels = ofNamespace.usesNamespaceLabels || this.podSecurity !== undefined;
    // Never another cluster's labels: the review is refused, whatever the failure policy.
    if (needsLabels && tools.unreadable !== undefined) return { prepared: ofNamespace, violations: [], refused: clusterRefusal(tools.unreadable) };
    const namespaceLabels = needsLabels ? await this.labelsOf(tools, subject.namespace, call.deadline) : undefined;
    const request: MatchedRequest = { request: subject.request, ...(namespaceLabels ? { namespaceLabels } : {}) };
    const scope = withEvaluationDeadline(pastDeadlineOf(call), () => scopeRequest(ofNamespace, request, this.failOpen));
    return { ...scope, ...(namespaceLabels ? { namespaceLabels } : {}) };
  }

  /** Whether anything decides: a policy loaded, or Pod Security Admission on. */
  policiesInForce(): boolean {
    return policyCount(this.current.set) > 0 || this.podSecurity !== undefined;
  }

  /** Admit or deny: every policy kind, the remote backends, and on /imagereview digest records. */
  async validate(subject: AdmissionSubject, call: AdmissionCall): Promise<Decision> {
    if (this.requirePolicies && !this.policiesInForce()) {
      const refused = deny([{ policy: "imprimatur", rule: "noPolicy", message: NO_POLICY_IN_FORCE }], { auditAnnotations: { decision: "denied" } });
      this.finish(subject, call, refused);
      return refused;
    }
    const cluster = clusterOf(call.caller);
    const tools = this.toolsFor(call.caller);
    const { prepared, namespaceLabels, violations: outOfReach, refused } = await this.scopeFor(subject, call, tools);
    if (refused) {
      this.finish(subject, call, refused);
      return refused;
    }
    // Signatures, remote backends and, for an ImageReview, digest records wait on the network: all at once. An
    // ImageReview answer cannot change the pod, so tags marked digestMutate are resolved and recorded only.
    const recordDigests =
      call.endpoint === "imagereview" && tools.pinner ? tools.pinner.pin(this.pinRequest(subject, prepared), call.deadline, "record") : undefined;
    const needs = this.signaturesToVerify(tools, prepared.set.ImagePolicy, subject, namespaceLabels);
    // Most admissions have nothing to wait on (no signature to verify, no remote backend): they skip the
    // Promise.all and its microtasks.
    const waits = (needs !== undefined && needs.length > 0) || this.remotes.length > 0 || recordDigests !== undefined;
    const [verifications, remote, resolved] = waits
      ? await Promise.all([
          needs === undefined ? undefined : this.verifyNeeds(tools, needs, subject, new Map(), call.deadline),
          this.askRemotes(subject, call.deadline, cluster),
          recordDigests,
        ])
      : [needs === undefined ? undefined : new Map<string, ImageVerification>(), [], undefined];
    const decisions = withEvaluationDeadline(pastDeadlineOf(call), () =>
      evaluateKinds(prepared, subject, {
        ...(namespaceLabels === undefined ? {} : { namespaceLabels }),
        ...(verifications ? { verifications } : {}),
        failOpen: this.failOpen,
        now: Date.now(),
      }),
    );
    if (this.podSecurity) {
      const psa = podSecurityDecision(subject, namespaceLabels, this.podSecurity);
      if (psa) decisions.push(psa);
    }
    decisions.push(...remote);
    if (resolved) decisions.push(resolved.decision);
    if (outOfReach.length > 0) decisions.push(deny(outOfReach));
    // Failures set to Warn or Audit add their warnings and audit annotation once, over every kind.
    // Exceptions first: a failure they set aside must not warn or be audited as a failure.
    let decision =
      decisions.length === 0
        ? allow()
        : withActionEffects(applyExceptions(combineDecisions(...decisions), subject, prepared.byKind.PolicyException, this.honouredExceptions));
    if (!decision.allowed) decision.auditAnnotations.decision = "denied";
    decision = await recordOverrides(
      this.audit,
      this.logger,
      decision,
      subject,
      call,
      subject.images.map((i) => i.image),
    );
    this.finish(subject, call, decision);
    return decision;
  }

  /**
   * A Namespace created or updated, under --pod-security: invalid pod-security labels are refused, and a tightened
   * enforce level is answered with warnings naming the existing pods that would violate it (PSA's
   * ValidateNamespace). Undefined when Pod Security Admission is off or the request is not one it checks.
   */
  async validateNamespace(request: AdmissionRequest, call: AdmissionCall): Promise<Decision | undefined> {
    if (!this.podSecurity || (request.operation !== "CREATE" && request.operation !== "UPDATE") || request.subResource) return undefined;
    const labelsOf = (o: unknown) => asObject(asObject(asObject(o)?.metadata)?.labels) as Record<string, string> | undefined;
    const labels = labelsOf(request.object);
    const oldLabels = labelsOf(request.oldObject);
    const name = request.name || (asObject(asObject(request.object)?.metadata)?.name as string | undefined) || "";
    const enforceChanged = ["pod-security.kubernetes.io/enforce", "pod-security.kubernetes.io/enforce-version"].some((k) => labels?.[k] !== oldLabels?.[k]);
    // The pods are listed only when the enforce policy changed on an update: the check looks at them only then.
    const pods = request.operation === "UPDATE" && enforceChanged ? await this.podsIn(this.toolsFor(call.caller), name, call.deadline) : [];
    // PSA's budget: one second, or half of what is left of the request's time.
    const until = Date.now() + Math.min(NAMESPACE_POD_CHECK_BUDGET_MS, (call.deadline - Date.now()) / 2);
    const outcome = checkNamespaceChange(
      { operation: request.operation, name, labels, ...(request.operation === "UPDATE" ? { oldLabels } : {}) },
      pods,
      this.podSecurity,
      { outOfTime: () => Date.now() > until },
    );
    const decision = outcome.allowed
      ? allow({ warnings: outcome.warnings, auditAnnotations: outcome.auditAnnotations })
      : deny([{ policy: POD_SECURITY_POLICY, rule: "namespace", message: outcome.denial ?? "", text: outcome.denial ?? "" }], {
          warnings: outcome.warnings,
          auditAnnotations: outcome.auditAnnotations,
        });
    this.recorder.decision(call.endpoint, decision);
    return decision;
  }

  /** The namespace's pods, for Pod Security Admission's namespace check; undefined when they cannot be listed. */
  private async podsIn(tools: ClusterTools, namespace: string, deadline: number): Promise<Record<string, unknown>[] | undefined> {
    if (!tools.kube) return undefined;
    try {
      const api = (tools.coreApi ??= tools.kube.makeApiClient(CoreV1Api));
      const signal = AbortSignal.timeout(Math.max(1, Math.min(deadline - Date.now(), NAMESPACE_POD_LIST_TIMEOUT_MS)));
      const list = await api.listNamespacedPod({ namespace, limit: NAMESPACE_MAX_PODS_TO_CHECK }, withSignal(signal));
      return list.items.map((p) => JSON.parse(JSON.stringify(p)) as Record<string, unknown>);
    } catch (err) {
      this.logger.warn({ err: (err as Error).message, namespace }, "pod security: cannot list the namespace's pods");
      return undefined;
    }
  }

  /** Pin (or record) the digests of the subject's digestMutate images; undefined when none asks for it. */
  async mutate(subject: AdmissionSubject, call: AdmissionCall): Promise<Decision | undefined> {
    // Policies whose scope cannot be decided pin nothing here; /validate denies with the reason.
    const tools = this.toolsFor(call.caller);
    const { prepared, namespaceLabels, refused } = await this.scopeFor(subject, call, tools);
    if (refused) {
      this.finish(subject, call, refused);
      return refused;
    }
    const pinner = tools.pinner;
    const outcome = pinner && subject.images.length > 0 ? await pinner.pin(this.pinRequest(subject, prepared), call.deadline) : undefined;
    const verified = pinner?.mode === "mutate" ? await this.verifiedImagePatches(tools, prepared, namespaceLabels, subject, outcome, call.deadline) : [];
    if (!outcome && verified.length === 0) return undefined;
    // A pin that failed under a rule an exception sets aside does not deny: the image goes through unpinned.
    const base = outcome ? applyExceptions(outcome.decision, subject, prepared.byKind.PolicyException, this.honouredExceptions) : allow();
    if (base.allowed && verified.length > 0) base.patches = [...(base.patches ?? []), ...verified];
    const decision = await recordOverrides(this.audit, this.logger, base, subject, call, outcome?.failed.map((f) => f.target.image) ?? []);
    if (!call.dryRun && outcome) this.recordEvent(tools, subject, outcome);
    this.finish(subject, call, decision);
    return decision;
  }

  async close(): Promise<void> {
    await Promise.all(this.remotes.map((r) => r.close()));
    await this.registry?.close();
    await Promise.all(this.allTools().map((tools) => tools.events?.flush()));
    await this.audit?.close();
  }

  /**
   * Every image whose deciding allow rule has attestors, to verify by digest (verifyNeeds). A tag under such a rule
   * is denied by digestVerify (its default), so only rules that set `digestVerify: false` verify a tag, at the
   * digest it resolves to now with the pod's credentials. Undefined offline.
   */
  private signaturesToVerify(
    tools: ClusterTools,
    policies: PolicySet["ImagePolicy"],
    subject: AdmissionSubject,
    namespaceLabels: Record<string, string> | undefined,
  ): VerificationNeed[] | undefined {
    if (!tools.verifier) return undefined;
    const needs = verificationsNeeded(policies, subject.namespace, subject.images, namespaceLabels === undefined ? {} : { namespaceLabels });
    // A tag under digestVerify is denied whatever its signatures say: nothing to look up.
    return needs.some((n) => n.rule.digestVerify && !n.ref.digest) ? needs.filter((n) => !n.rule.digestVerify || n.ref.digest) : needs;
  }

  /**
   * /mutate records what it verified on the object (`imprimatur.dev/verified-images`), at the digests it just
   * pinned, so what runs is what was verified; /validate then finds these results in the cache. A failed
   * verification adds nothing here: /validate denies it with the reason.
   */
  private async verifiedImagePatches(
    tools: ClusterTools,
    prepared: PreparedPolicies,
    namespaceLabels: Record<string, string> | undefined,
    subject: AdmissionSubject,
    pinning: PinningOutcome | undefined,
    deadline: number,
  ): Promise<JsonPatchOperation[]> {
    if (!tools.verifier || !prepared.set.ImagePolicy.some((p) => p.rules.some(verifies))) return [];
    const needs = verificationsNeeded(prepared.set.ImagePolicy, subject.namespace, subject.images, namespaceLabels === undefined ? {} : { namespaceLabels });
    if (needs.length === 0) return [];
    const pinnedDigests = new Map((pinning?.pinned ?? []).map((p) => [p.field, p.digest]));
    const results = await this.verifyNeeds(tools, needs, subject, pinnedDigests, deadline);
    const pods = this.pinRequest(subject, prepared).pods.map((p) => p.metadata);
    // Where pinning already added its annotation (creating the map if needed), the record goes next to it.
    const podOf = new Map(subject.images.map((i) => [i.field, i.pod]));
    const pinnedAt = new Set(
      (pinning?.pinned ?? []).flatMap((p) => {
        const at = pods[podOf.get(p.field) ?? -1];
        return at ? [at.field] : [];
      }),
    );
    return verifiedImagesPatches(needs, results, pods, pinnedAt);
  }

  /** Each need verified with its pod's credentials; `digests` (field → digest) are digests already pinned. */
  private async verifyNeeds(
    tools: ClusterTools,
    needs: readonly VerificationNeed[],
    subject: AdmissionSubject,
    digests: ReadonlyMap<string, string>,
    deadline: number,
  ): Promise<Map<string, ImageVerification>> {
    const results = new Map<string, ImageVerification>();
    if (needs.length === 0) return results;
    const lookups = new Map<number, Promise<PodLookup>>();
    const lookupOf = (pod: number) => {
      let l = lookups.get(pod);
      const at = subject.pods[pod];
      if (!l) lookups.set(pod, (l = tools.credentials!.lookupFor(at ? this.pinPod(subject, at).pullSecrets : undefined, deadline)));
      return l;
    };
    await Promise.all(
      needs.map(async (need) => {
        const pinned = digests.get(need.field);
        const target = pinned ? { ...need, ref: { ...need.ref, digest: pinned } } : need;
        results.set(verificationKey(need.policy.name, need.rule.index, need.image), await this.verifyOne(tools, target, await lookupOf(need.pod), deadline));
      }),
    );
    return results;
  }

  private async verifyOne(tools: ClusterTools, need: VerificationNeed, creds: PodLookup, deadline: number): Promise<ImageVerification> {
    // Another cluster's secrets never stand in for the pod's: a cluster the server cannot read is a denial.
    if ("error" in creds && creds.code === CLUSTER_UNREADABLE) return { status: "denied", reason: creds.error };
    if ("error" in creds) return { status: "unavailable", reason: creds.error, registry: need.ref.registry };
    // A namespaced policy's lookups get the server's own credentials only where the registries file lends them.
    const lookup = lookupForPolicy(creds, need.policy);
    let digest = need.ref.digest;
    if (!digest) {
      const resolved = await this.resolver!.resolve(need.ref, lookup, deadline);
      if (!resolved.ok) {
        const reason = `its tag could not be resolved to a digest to verify: ${resolved.error}`;
        return registryAnswered(resolved.code) ? { status: "denied", reason } : { status: "unavailable", reason, registry: need.ref.registry };
      }
      digest = resolved.digest;
    }
    const result = await tools.verifier!.verify(
      {
        image: { ...need.ref, digest },
        policy: need.policy.name,
        rule: need.rule.index,
        attestors: need.rule.attestors ?? [],
        ...(need.rule.attestations
          ? { attestations: need.rule.attestations.map((a) => ({ index: a.index, predicateType: a.predicateType, attestors: a.attestors })) }
          : {}),
        ...(need.rule.signatureRepository ? { signatureRepository: need.rule.signatureRepository } : {}),
        lookup,
      },
      deadline,
    );
    return { ...result, digest };
  }

  private async labelsOf(tools: ClusterTools, namespace: string, deadline: number): Promise<Record<string, string> | undefined> {
    await tools.namespaces.prepare?.(namespace, deadline);
    return tools.namespaces.labels(namespace);
  }

  /** One ImageReview spec per pod (each pod brings its own annotations), as the ImagePolicyWebhook sends it. */
  private async askRemotes(subject: AdmissionSubject, deadline: number, cluster: string | undefined): Promise<Decision[]> {
    if (this.remotes.length === 0) return [];
    return Promise.all(
      imagesByPod(subject).map(({ pod, images }) => {
        const spec = {
          containers: images.map((im) => ({ image: im.image })),
          annotations: imagePolicyAnnotations(pod.annotations),
          namespace: subject.namespace,
        };
        // Each cluster's answers are cached apart: the same spec may be judged differently for another cluster.
        return this.reviews.review({ spec, fields: images.map((im) => im.field), ...(cluster === undefined ? {} : { cluster }) }, deadline);
      }),
    );
  }

  private pinRequest(subject: AdmissionSubject, prepared: PreparedPolicies): PinRequest {
    return {
      namespace: subject.namespace,
      images: subject.images,
      pods: subject.pods.map((pod) => this.pinPod(subject, pod)),
      policies: prepared.set.ImagePolicy,
    };
  }

  /** One pod of a PinRequest: where its pins are recorded and whose pull secrets apply. */
  private pinPod(subject: AdmissionSubject, pod: AdmissionSubject["pods"][number]): PinRequest["pods"][number] {
    // An ImageReview carries no pod: only the server's own credentials apply, and nothing is recorded.
    if (subject.origin === "imagereview") return { metadata: undefined };
    const spec = asObject(pod.spec.value);
    const serviceAccount = spec?.serviceAccountName ?? spec?.serviceAccount; // serviceAccount: the deprecated alias
    return {
      metadata: pod.pinRecord,
      pullSecrets: {
        namespace: subject.namespace,
        ...(Array.isArray(spec?.imagePullSecrets) ? { imagePullSecrets: spec.imagePullSecrets as Array<{ name?: string }> } : {}),
        ...(typeof serviceAccount === "string" && serviceAccount !== "" ? { serviceAccountName: serviceAccount } : {}),
      },
    };
  }

  /** A Kubernetes Event on the object, so `kubectl describe` shows what was pinned (auditable pinning). */
  private recordEvent(tools: ClusterTools, subject: AdmissionSubject, outcome: PinningOutcome): void {
    const sink: EventSink | undefined = tools.events;
    if (!sink || (outcome.pinned.length === 0 && outcome.failed.length === 0)) return;
    const involvedObject = { ...subject.object, namespace: subject.namespace };
    if (outcome.pinned.length > 0) {
      const pinned = tools.pinner?.mode === "mutate";
      const described = outcome.pinned.map((p) => `${p.field}: ${p.image} → ${p.pinned} (credentials: ${p.credentialSource})`);
      sink.record({
        involvedObject,
        type: "Normal",
        reason: pinned ? "ImagesPinned" : "ImagesResolved",
        message: `${pinned ? "Pinned" : "Resolved"} ${described.join("; ")}`,
      });
    }
    if (outcome.failed.length > 0) {
      sink.record({
        involvedObject,
        type: "Warning",
        reason: "ImageTagUnresolved",
        message: outcome.failed.map((f) => `${f.target.field}: ${f.target.image}: ${f.error}`).join("; "),
      });
    }
  }

  /** One log line per decision naming who asked for what, and the metrics. */
  private finish(subject: AdmissionSubject, call: AdmissionCall, decision: Decision): void {
    // The background audit counts and logs its own results (src/scan/): a scan of every pod is not admissions.
    if (call.endpoint === "audit") return;
    this.recorder.decision(call.endpoint, decision);
    // Plain admissions are the bulk of traffic and logged at debug only: nothing is built for them otherwise.
    if (decision.allowed && !this.logger.isLevelEnabled("debug")) return;
    const who = {
      endpoint: call.endpoint,
      ...(call.uid ? { uid: call.uid } : {}),
      namespace: subject.namespace,
      kind: subject.object.kind,
      name: subject.object.name,
      ...(call.user ? { user: call.user } : {}),
      ...(call.caller ? { caller: describeCaller(call.caller) } : {}),
      ...(call.dryRun ? { dryRun: true } : {}),
    };
    // Denials at info; plain admissions at debug (they are the bulk of traffic; overrides are logged where
    // they are written to the audit log).
    if (decision.allowed) {
      this.logger.debug({ ...who, allowed: true, passes: capList(decision.passes ?? []).listed }, "admitted");
      return;
    }
    const { listed, more } = capList(decision.violations);
    this.logger.info({ ...who, allowed: false, violations: listed, ...(more > 0 ? { moreViolations: more } : {}) }, "denied");
  }
}
