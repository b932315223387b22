// Builds the engine from configuration, apart from its use: the policy sets, each cluster's tools, the remote
// ImageReview backends and their cache, the audit log and, online, one registry client and tag resolver that
// every cluster's tools share. Offline (`check`, `imprimatur test`) there is no registry, no backend and no API:
// the tools are the offline variant (src/engine/cluster-tools.ts), so nothing needs to be asserted present.
import type { KubeClient } from "../kube/kube-client.ts";
import { pino, type Logger } from "pino";
import { AuditLog } from "../audit/audit-log.ts";
import type { SharedVerifications } from "../verification/image-verifier.ts";
import { DecisionCache } from "../backends/decision-cache.ts";
import { ImageReviewService } from "../backends/review-service.ts";
import { WebhookBackend } from "../backends/webhook-backend.ts";
import type { ServerConfig } from "../config/server-config.ts";
import { NO_NAMESPACE_LABELS, type NamespaceLabelSource } from "../core/namespace-labels.ts";
import type { PodSecurityContext } from "../core/pod-security/psa-evaluate.ts";
import type { PolicySet } from "../core/policy-set/policy-kinds.ts";
import type { CredentialLookup } from "../credentials/credential.ts";
import { DigestResolver } from "../registry/digest-resolver.ts";
import { RegistryClient, type RoundTrip } from "../registry/registry-client.ts";
import type { RegistrySettingsMap } from "../registry/registry-settings.ts";
import { NO_OTHER_CLUSTERS, type ClusterConnections } from "./cluster-reads.ts";
import { ClusterToolbox, offlineTools, onlineTools, type ToolsFactory } from "./cluster-tools.ts";
import { Engine } from "./engine.ts";
import { PolicySets } from "./policy-sets.ts";
import { NO_RECORDER, type Recorder } from "./recorder.ts";

interface EngineOptionsOfEveryMode {
  config: ServerConfig;
  policies: PolicySet;
  namespaces?: NamespaceLabelSource;
  logger?: Logger;
  recorder?: Recorder;
  /** The append-only audit log; without one, an override that must be recorded is refused. */
  auditLogPath?: string;
  /** The audit log itself, when the caller writes to it too (the node records every pull); instead of auditLogPath. */
  auditLog?: AuditLog;
  /** Another process opened the audit log first and mended an unfinished last line (serve --workers): appended to as it is. */
  auditLogMended?: boolean;
  /** Honour the namespaces' pod-security.kubernetes.io labels as Pod Security Admission does (src/core/pod-security/). */
  podSecurity?: PodSecurityContext;
  /** Deny every review while no policy is in force (`serve --require-policies`), instead of admitting everything. */
  requirePolicies?: boolean;
  /** The namespaces whose PolicyExceptions are honoured (`serve --exceptions-namespace`); none by default. */
  exceptionNamespaces?: readonly string[];
  /** The other clusters whose callers share the server, and the name of its own (src/engine/cluster-reads.ts). */
  clusters?: ClusterConnections;
}

/** Offline (check, policy tests): no remote backends, no registry, no Kubernetes API. */
export interface OfflineEngineOptions extends EngineOptionsOfEveryMode {
  offline: true;
}

export interface OnlineEngineOptions extends EngineOptionsOfEveryMode {
  offline?: false;
  /** The server's own cluster's API: pods' pull secrets, k8s:// keys, pods and Events (with `namespaces`: its labels). */
  kube?: KubeClient;
  registries?: RegistrySettingsMap;
  /** The server's own registry credentials (--authfile), tried after a pod's. */
  staticCredentials?: CredentialLookup;
  /** Called for every registry HTTP exchange (benchmarks count round trips). */
  onRegistryRoundTrip?: (trip: RoundTrip) => void;
  /** Verification results shared with other processes (serve --workers). */
  sharedVerifications?: SharedVerifications;
}

export type EngineOptions = OfflineEngineOptions | OnlineEngineOptions;

export async function buildEngine(opts: EngineOptions): Promise<Engine> {
  const logger = opts.logger ?? pino({ level: "silent" });
  const recorder = opts.recorder ?? NO_RECORDER;
  const { config } = opts;
  const clusters = opts.clusters ?? NO_OTHER_CLUSTERS;
  const policies = new PolicySets(opts.policies, clusters);
  const remotes = opts.offline
    ? []
    : await Promise.all(config.backends.map((b) => WebhookBackend.fromConfig({ name: b.name, kubeconfig: b.kubeconfig, timeoutMs: b.timeoutMs })));
  const cache = new DecisionCache({ allowTtlMs: config.allowTtlMs, denyTtlMs: config.denyTtlMs, maxEntries: config.cacheMaxEntries });
  const reviews = new ImageReviewService({
    remotes,
    cache,
    failOpen: config.failOpen,
    onBackendResult: (backend, outcome) => recorder.backendResult(backend, outcome),
  });
  const online = opts.offline ? undefined : registryAccess(opts, recorder);
  const make: ToolsFactory = online
    ? onlineTools({
        ...online,
        config,
        registries: !opts.offline ? opts.registries : undefined,
        staticCredentials: !opts.offline ? opts.staticCredentials : undefined,
        imagePolicies: () => policies.all.set.ImagePolicy,
        logger,
        recorder,
        sharedVerifications: !opts.offline ? opts.sharedVerifications : undefined,
      })
    : offlineTools;
  const tools = new ClusterToolbox({
    clusters,
    home: { kube: opts.offline ? undefined : opts.kube, namespaces: opts.namespaces ?? NO_NAMESPACE_LABELS },
    make,
    homeTrustRoots: () => policies.all.byKind.TrustRoot,
    // The trust roots of the set the cluster's requests are judged by: its own TrustRoots among them.
    trustRootsOf: (cluster) => () => policies.forCluster(cluster, false).byKind.TrustRoot,
  });
  return new Engine({
    policies,
    tools,
    reviews,
    remotes,
    cache,
    resolver: online?.resolver,
    audit:
      opts.auditLog ??
      (opts.auditLogPath
        ? new AuditLog(opts.auditLogPath, {
            mendTornLine: opts.auditLogMended !== true,
            onTornLine: (repair) =>
              logger.warn({ auditLog: opts.auditLogPath, ...repair }, "the audit log ended in an unfinished record (a crash while writing it); moved aside"),
          })
        : undefined),
    close: async () => {
      await Promise.all(remotes.map((r) => r.close()));
      await online?.registry.close();
    },
    logger,
    recorder,
    config,
    podSecurity: opts.podSecurity,
    requirePolicies: opts.requirePolicies === true,
    honouredExceptions: new Set(opts.exceptionNamespaces ?? []),
  });
}

/** One registry client and tag resolver for every cluster's tools. */
function registryAccess(opts: OnlineEngineOptions, recorder: Recorder): { registry: RegistryClient; resolver: DigestResolver } {
  const registry = new RegistryClient({
    settings: opts.registries ?? new Map(),
    onRoundTrip: (trip) => {
      recorder.registryRequest(trip.method, trip.status);
      opts.onRegistryRoundTrip?.(trip);
    },
  });
  const resolver = new DigestResolver(
    { resolveDigest: (ref, o) => registry.resolveDigest(ref, { signal: o.signal, credentials: o.lookup }) },
    { ttlMs: opts.config.digests.cacheTtlMs, maxEntries: opts.config.digests.cacheMaxEntries },
  );
  return { registry, resolver };
}
