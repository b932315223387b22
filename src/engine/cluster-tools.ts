// What a review reads of one cluster, and the tools that read it: made once per cluster, on its first review, and
// never shared between clusters (src/engine/cluster-reads.ts says which cluster a caller's review reads).
// Offline (`check`, `imprimatur test`) a cluster is its namespace labels only: no registry, no API. The two are
// variants of one type, so a step that needs the registry says so in its types instead of asserting it.
import { HttpRevocationFetcher } from "../verification/revocation-fetcher.ts";
import type { KubeClient } from "../kube/kube-client.ts";
import type { Logger } from "pino";
import type { Caller } from "../audit/caller.ts";
import type { ServerConfig } from "../config/server-config.ts";
import { CLUSTER_UNREADABLE } from "../core/cluster-scope.ts";
import type { SecretKeyRef } from "../core/image-policy/attestors.ts";
import type { ImagePolicy } from "../core/image-policy/image-policy.ts";
import { fullName } from "../core/image-reference.ts";
import { NO_NAMESPACE_LABELS, type NamespaceLabelSource } from "../core/namespace-labels.ts";
import type { PreparedPolicies } from "../core/policy-set/policy-kinds.ts";
import { ANONYMOUS, type CredentialLookup } from "../credentials/credential.ts";
import { BreakGlassReviewer } from "../kube/break-glass-reviews.ts";
import { EventRecorder } from "../kube/event-recorder.ts";
import { KubeNamespacePods, type NamespacePods } from "../kube/namespace-pods.ts";
import { PodCredentials } from "../kube/pod-credentials.ts";
import { PullSecretReader } from "../kube/pull-secrets.ts";
import { SecretKeyReader } from "../kube/secret-keys.ts";
import { ImagePinner } from "../pinning/image-pinner.ts";
import type { DigestResolver } from "../registry/digest-resolver.ts";
import type { RegistryClient } from "../registry/registry-client.ts";
import type { RegistrySettingsMap } from "../registry/registry-settings.ts";
import { DeferredImageVerifier, type Verifier } from "../verification/deferred-verifier.ts";
import type { SharedVerifications } from "../verification/image-verifier.ts";
import { ClusterUnreadableError, clusterToRead, type ClusterConnections } from "./cluster-reads.ts";
import type { Recorder } from "./recorder.ts";

/** What is known of one cluster before its tools are made. */
export interface ClusterAccess {
  /** Its API; absent: nothing is read through the API. */
  kube?: KubeClient | undefined;
  namespaces: NamespaceLabelSource;
  /** A caller's cluster the server has no kubeconfig for: why a review that needs a read of it is refused. */
  unreadable?: string | undefined;
  /** The cluster's name ("" for the server's own): what its verifications are named with where they are shared. */
  name?: string;
}

interface ToolsOfEveryMode {
  namespaces: NamespaceLabelSource;
  unreadable?: string;
}

/** Offline: labels only; signatures go unchecked (with a warning) and nothing is pinned. */
export interface OfflineTools extends ToolsOfEveryMode {
  online: false;
}

export interface OnlineTools extends ToolsOfEveryMode {
  online: true;
  credentials: PodCredentials;
  resolver: DigestResolver;
  verifier: Verifier;
  pinner: ImagePinner;
  /** Absent without API access. */
  events: EventRecorder | undefined;
  /** Absent without API access: Pod Security Admission's namespace check then sees no pods. */
  pods: NamespacePods | undefined;
  /** Who may use break-glass (SubjectAccessReviews); absent without API access, where overrides are then refused. */
  breakGlass: BreakGlassReviewer | undefined;
}

export type ClusterTools = OfflineTools | OnlineTools;

/** Makes one cluster's tools; `trustRoots` are those of the policy set its requests are judged by. */
export type ToolsFactory = (access: ClusterAccess, trustRoots: () => PreparedPolicies["byKind"]["TrustRoot"]) => ClusterTools;

export const offlineTools: ToolsFactory = (access) => ({
  online: false,
  namespaces: access.namespaces,
  ...(access.unreadable === undefined ? {} : { unreadable: access.unreadable }),
});

/** What every online cluster's tools share: one registry client and resolver, the server's credentials and settings. */
export interface OnlineServices {
  registry: RegistryClient;
  resolver: DigestResolver;
  config: ServerConfig;
  registries: RegistrySettingsMap | undefined;
  staticCredentials: CredentialLookup | undefined;
  /** The image policies in force, for the pinner (it reads the current set at each pin). */
  imagePolicies: () => readonly ImagePolicy[];
  logger: Logger;
  recorder: Recorder;
  /** Verification results shared with other processes (serve --workers). */
  sharedVerifications?: SharedVerifications | undefined;
}

export function onlineTools(services: OnlineServices): ToolsFactory {
  const { registry, resolver, config, logger, recorder } = services;
  // One for every cluster: OCSP answers and CRLs are about certificates, not clusters.
  const revocation = new HttpRevocationFetcher(services.registries ? { registries: services.registries } : {});
  return (access, trustRoots) => {
    const { kube, unreadable } = access;
    // A cluster the server cannot read refuses every read with the reason; never another cluster's answer.
    const refuse = (): Promise<never> => Promise.reject(new ClusterUnreadableError(CLUSTER_UNREADABLE, unreadable ?? ""));
    const pullSecrets = kube
      ? new PullSecretReader(kube, { logger })
      : unreadable !== undefined
        ? { credentialsFor: refuse, credentialsKnown: () => undefined }
        : undefined;
    const credentials = new PodCredentials({
      ...(pullSecrets ? { pullSecrets } : {}),
      staticCredentials: services.staticCredentials ?? ANONYMOUS,
      ...(services.registries ? { registries: services.registries } : {}),
      logger,
    });
    const secretKeys = kube ? new SecretKeyReader(kube) : undefined;
    const readKey = secretKeys ? (ref: SecretKeyRef, signal: AbortSignal) => secretKeys.read(ref, signal) : unreadable !== undefined ? refuse : undefined;
    const verifier = new DeferredImageVerifier({
      client: registry,
      trustRoots,
      revocation,
      ...(readKey ? { secretKeys: readKey } : {}),
      ...(services.sharedVerifications ? { shared: services.sharedVerifications, scope: access.name ?? "" } : {}),
      // A deleted signature should stop admitting new pods within minutes, whatever the backends' allow TTL.
      verifiedTtlMs: Math.min(config.allowTtlMs, 300_000),
      deniedTtlMs: config.denyTtlMs,
      maxBytesPerImage: config.verification.maxBytesPerImage,
      maxArtifactsPerImage: config.verification.maxArtifactsPerImage,
      // Logged when a verification runs, not on every cache hit (admissions are the bulk of traffic).
      onVerification: (request, result, seconds) => {
        recorder.signatureVerification(result.status, seconds);
        const what = { image: fullName(request.image), policy: request.policy, rule: request.rule, seconds };
        if (result.status === "verified") logger.info({ ...what, signers: result.evidence }, "signatures verified");
        else logger.info({ ...what, outcome: result.status, reason: result.reason }, "signatures not verified");
      },
    });
    const pinner = new ImagePinner({
      policies: services.imagePolicies,
      namespaces: access.namespaces,
      resolver,
      credentials,
      mode: config.digests.mode,
      failOpen: config.failOpen,
      logger,
      onOutcome: (outcome, mode) => {
        if (outcome.pinned.length > 0) recorder.digestResolutions(mode === "mutate" ? "pinned" : "recorded", outcome.pinned.length);
        if (outcome.failed.length > 0) recorder.digestResolutions("failed", outcome.failed.length);
      },
    });
    return {
      online: true,
      namespaces: access.namespaces,
      ...(unreadable === undefined ? {} : { unreadable }),
      credentials,
      resolver,
      verifier,
      pinner,
      events: kube ? new EventRecorder(kube, logger) : undefined,
      pods: kube ? new KubeNamespacePods(kube, logger) : undefined,
      breakGlass: kube ? new BreakGlassReviewer(kube, { ttlMs: config.breakGlass.cacheTtlMs }) : undefined,
    };
  };
}

/**
 * The tools of every cluster a review may read: the server's own, made at once, and others', made on their first
 * review (bounded: the configured clusters, and the clusters of configured tokens and client certificates).
 */
export class ClusterToolbox {
  readonly home: ClusterTools;
  private readonly others = new Map<string, ClusterTools>();
  private readonly clusters: ClusterConnections;
  private readonly make: ToolsFactory;
  private readonly trustRootsOf: (cluster: string) => () => PreparedPolicies["byKind"]["TrustRoot"];

  constructor(opts: {
    clusters: ClusterConnections;
    home: ClusterAccess;
    make: ToolsFactory;
    /** The home cluster's trust roots, and another cluster's: those of the set its requests are judged by. */
    homeTrustRoots: () => PreparedPolicies["byKind"]["TrustRoot"];
    trustRootsOf: (cluster: string) => () => PreparedPolicies["byKind"]["TrustRoot"];
  }) {
    this.clusters = opts.clusters;
    this.make = opts.make;
    this.trustRootsOf = opts.trustRootsOf;
    this.home = opts.make({ ...opts.home, name: "" }, opts.homeTrustRoots);
  }

  /** The tools that read the caller's cluster: never another cluster's. */
  for(caller: Caller | undefined): ClusterTools {
    const target = clusterToRead(caller, this.clusters);
    if (target.kind === "home") return this.home;
    let tools = this.others.get(target.cluster);
    if (!tools) {
      const access: ClusterAccess = target.kind === "other" ? target.connection : { namespaces: NO_NAMESPACE_LABELS, unreadable: target.reason };
      tools = this.make({ ...access, name: target.cluster }, this.trustRootsOf(target.cluster));
      this.others.set(target.cluster, tools);
    }
    return tools;
  }

  all(): ClusterTools[] {
    return [this.home, ...this.others.values()];
  }
}
