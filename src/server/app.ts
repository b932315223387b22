// Assembles a running Imprimatur server from options: policies, TLS, backends, cache, audit log, registry
// access for tag→digest pinning, HTTPS.
// Used by `imprimatur serve`, and by tests and benchmarks that want a server in-process.
import { watch, type FSWatcher } from "node:fs";
import { join } from "node:path";
import type { KubeConfig } from "@kubernetes/client-node";
import { pino, type Logger } from "pino";
import { AuditLog } from "../audit/audit-log.ts";
import { builtinEngine } from "../backends/builtin-engine.ts";
import { NO_NAMESPACE_LABELS, type NamespaceLabelSource } from "../core/namespace-labels.ts";
import { DecisionCache } from "../backends/decision-cache.ts";
import { ImageReviewService } from "../backends/review-service.ts";
import { WebhookBackend } from "../backends/webhook-backend.ts";
import type { ServerConfig } from "../config/server-config.ts";
import type { ImagePolicy } from "../core/image-policy.ts";
import type { PodRestriction } from "../core/pod-restriction/pod-restriction.ts";
import { PodRestrictionIndex } from "../core/pod-restriction/restriction-index.ts";
import type { TemplateKind } from "../core/workload-templates.ts";
import { loadPolicies, type PolicySet } from "../policy/load-policies.ts";
import { bindProfileClusterWide, shippedProfiles } from "../policy/profiles.ts";
import { PolicyLoadError } from "../policy/policy-error.ts";
import { ANONYMOUS, type CredentialLookup } from "../credentials/credential.ts";
import { EventRecorder } from "../kube/event-recorder.ts";
import { PullSecretReader } from "../kube/pull-secrets.ts";
import { ImagePinner } from "../pinning/image-pinner.ts";
import { DigestResolver } from "../registry/digest-resolver.ts";
import { RegistryClient, type RoundTrip } from "../registry/registry-client.ts";
import type { RegistrySettingsMap } from "../registry/registry-settings.ts";
import { startHttpsServer, type RunningServer } from "./https-server.ts";
import { createMetrics, type Metrics } from "./metrics.ts";
import { ensureServingCertificate } from "./tls-bootstrap.ts";

export interface AppOptions {
  policies: string;
  host: string;
  port: number;
  stateDir: string;
  tls?: { cert: string; key: string; ca?: string };
  /** Extra DNS names / IPs for a generated serving certificate. */
  tlsHosts: string[];
  config: ServerConfig;
  namespaces?: NamespaceLabelSource;
  /** Shipped profiles bound cluster-wide (Drop) in addition to the policy folder (`serve --profile`). */
  profiles?: string[];
  logger?: Logger;
  /** Reload policies when files in the folder change (default true). */
  watchPolicies?: boolean;
  /** Kubernetes API access: pods' pull secrets and Events for tag→digest pinning. */
  kube?: KubeConfig;
  /** Per-registry TLS, plain HTTP and mirrors (--registries). */
  registries?: RegistrySettingsMap;
  /** The server's own registry credentials (--authfile), tried after a pod's. */
  staticCredentials?: CredentialLookup;
  /** Called for every registry HTTP exchange (benchmarks count round trips). */
  onRegistryRoundTrip?: (trip: RoundTrip) => void;
}

export interface App {
  port: number;
  caPem: string | undefined;
  generatedCertificate: boolean;
  cache: DecisionCache;
  /** Tag→digest resolution cache (digestMutate). */
  resolver: DigestResolver;
  metrics: Metrics;
  logger: Logger;
  policies(): readonly ImagePolicy[];
  podRestrictions(): readonly PodRestriction[];
  /** Reloads policies; keeps the last good set and returns the error when the new set fails to load. */
  reload(): Promise<PolicyLoadError | undefined>;
  close(): Promise<void>;
}

export async function startApp(opts: AppOptions): Promise<App> {
  // Buffered, asynchronous log writes keep logging off the answer path; audit records are not logs
  // and go to the fsync'ed audit log instead. The buffer is flushed on close.
  const logger = opts.logger ?? pino({ name: "imprimatur", level: process.env.IMPRIMATUR_LOG_LEVEL ?? "info" }, pino.destination({ dest: 1, sync: false, minLength: 4096 }));
  const metrics = createMetrics();
  // Refuse to start on an invalid policy set (or an unknown --profile): throws PolicyLoadError with details.
  const profileBindings = await bindProfiles(opts.profiles ?? []);
  const load = async (): Promise<{ images: ImagePolicy[]; restrictions: PodRestrictionIndex }> => {
    const set: PolicySet = await loadPolicies(opts.policies);
    return { images: set.imagePolicies, restrictions: new PodRestrictionIndex([...profileBindings, ...set.podRestrictions]) };
  };
  let { images: current, restrictions } = await load();
  const templateKinds: TemplateKind[] = opts.config.podTemplates;

  let tls: { cert: string; key: string };
  let caPem: string | undefined;
  let generatedCertificate = false;
  if (opts.tls) {
    tls = { cert: opts.tls.cert, key: opts.tls.key };
    caPem = opts.tls.ca;
  } else {
    const material = await ensureServingCertificate(opts.stateDir, opts.tlsHosts);
    tls = { cert: material.certPem, key: material.keyPem };
    caPem = material.caCertPem;
    generatedCertificate = material.created;
  }

  const remotes = await Promise.all(opts.config.backends.map((b) => WebhookBackend.fromConfig({ name: b.name, kubeconfig: b.kubeconfig, timeoutMs: b.timeoutMs })));
  const cache = new DecisionCache({ allowTtlMs: opts.config.allowTtlMs, denyTtlMs: opts.config.denyTtlMs, maxEntries: opts.config.cacheMaxEntries });
  const reviews = new ImageReviewService({
    builtin: builtinEngine(() => current, opts.namespaces ?? NO_NAMESPACE_LABELS),
    remotes,
    cache,
    failOpen: opts.config.failOpen,
    onBackendResult: (backend, outcome) => metrics.backendResults.inc({ backend, outcome }),
  });
  const audit = new AuditLog(opts.config.auditLog ?? join(opts.stateDir, "audit.jsonl"));
  const registry = new RegistryClient({
    settings: opts.registries ?? new Map(),
    onRoundTrip: (trip) => {
      metrics.registryRequests.inc({ method: trip.method, status: String(trip.status) });
      opts.onRegistryRoundTrip?.(trip);
    },
  });
  const resolver = new DigestResolver(
    { resolveDigest: (ref, o) => registry.resolveDigest(ref, { signal: o.signal, credentials: o.lookup }) },
    { ttlMs: opts.config.digests.cacheTtlMs, maxEntries: opts.config.digests.cacheMaxEntries },
  );
  const events = opts.kube ? new EventRecorder(opts.kube, logger) : undefined;
  const pinner = new ImagePinner({
    policies: () => current,
    namespaces: opts.namespaces ?? NO_NAMESPACE_LABELS,
    resolver,
    ...(opts.kube ? { pullSecrets: new PullSecretReader(opts.kube, { logger }) } : {}),
    staticCredentials: opts.staticCredentials ?? ANONYMOUS,
    mode: opts.config.digests.mode,
    failOpen: opts.config.failOpen,
    logger,
    onOutcome: (outcome, mode) => {
      if (outcome.pinned.length > 0) metrics.digestResolutions.inc({ outcome: mode === "mutate" ? "pinned" : "recorded" }, outcome.pinned.length);
      if (outcome.failed.length > 0) metrics.digestResolutions.inc({ outcome: "failed" }, outcome.failed.length);
    },
  });

  let server: RunningServer;
  try {
    server = await startHttpsServer({
      host: opts.host,
      port: opts.port,
      tls,
      reviews,
      audit,
      logger,
      metrics,
      restrictions: () => restrictions,
      namespaces: opts.namespaces ?? NO_NAMESPACE_LABELS,
      templateKinds,
      pinner,
      ...(events ? { events } : {}),
      maxBodyBytes: opts.config.maxRequestBytes,
      defaultTimeoutMs: 10_000,
      isReady: () => true,
    });
  } catch (e) {
    await Promise.all(remotes.map((r) => r.close()));
    await registry.close();
    throw e;
  }

  const reload = async (): Promise<PolicyLoadError | undefined> => {
    try {
      ({ images: current, restrictions } = await load());
      // Remote decisions may depend on what the operator just changed; start afresh.
      cache.clear();
      resolver.clear();
      metrics.policyReloads.inc({ result: "success" });
      logger.info({ policies: current.map((p) => p.name), podRestrictions: restrictions.all.map((p) => p.name) }, "policies reloaded");
      return undefined;
    } catch (e) {
      if (!(e instanceof PolicyLoadError)) throw e;
      metrics.policyReloads.inc({ result: "failure" });
      logger.error({ errors: e.errors }, "policy reload failed; keeping the last good policies");
      return e;
    }
  };

  let watcher: FSWatcher | undefined;
  if (opts.watchPolicies !== false) {
    let timer: NodeJS.Timeout | undefined;
    try {
      watcher = watch(opts.policies, { recursive: true, persistent: false }, () => {
        clearTimeout(timer);
        timer = setTimeout(() => void reload(), 200); // editors write in several steps
      });
      watcher.on("error", (err) => logger.warn({ err }, "policy watch failed; reload with SIGHUP"));
    } catch (err) {
      logger.warn({ err }, "cannot watch the policy folder; reload with SIGHUP");
    }
  }

  logger.info({ port: server.port, policies: current.map((p) => p.name), podRestrictions: restrictions.all.map((p) => p.name), backends: remotes.map((r) => r.name), failOpen: opts.config.failOpen }, "serving");
  return {
    port: server.port,
    caPem,
    generatedCertificate,
    cache,
    resolver,
    metrics,
    logger,
    policies: () => current,
    podRestrictions: () => restrictions.all,
    reload,
    close: async () => {
      watcher?.close();
      await server.close();
      await Promise.all(remotes.map((r) => r.close()));
      await registry.close();
      await events?.flush();
      await audit.close();
      logger.flush();
    },
  };
}

async function bindProfiles(names: string[]): Promise<PodRestriction[]> {
  if (names.length === 0) return [];
  const profiles = await shippedProfiles();
  return names.map((name) => bindProfileClusterWide(name, profiles));
}
