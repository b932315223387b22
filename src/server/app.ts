// A running Imprimatur server, composed from three parts that know nothing of each other: the policies
// (loaded from a PolicySource, reloaded on change), the engine (built once from configuration), and the
// HTTPS transport (with its TLS material). Used by `imprimatur serve`, and by tests and benchmarks that
// want a server in-process.
import { join } from "node:path";
import type { KubeConfig } from "@kubernetes/client-node";
import type { Logger } from "pino";
import type { DecisionCache } from "../backends/decision-cache.ts";
import type { ServerConfig } from "../config/server-config.ts";
import type { ImagePolicy } from "../core/image-policy/image-policy.ts";
import type { NamespaceLabelSource } from "../core/namespace-labels.ts";
import type { PodRestriction } from "../core/pod-restriction/pod-restriction.ts";
import { unhonouredExceptions } from "../core/policy-exception/apply-exceptions.ts";
import { policyCount, type PolicySet } from "../core/policy-set/policy-kinds.ts";
import type { CredentialLookup } from "../credentials/credential.ts";
import type { Engine } from "../engine/engine.ts";
import { ImprimaturError } from "../errors/imprimatur-error.ts";
import { buildEngine } from "../engine/engine-builder.ts";
import type { ClusterConnections } from "../engine/cluster-reads.ts";
import type { Recorder } from "../engine/recorder.ts";
import { PolicyLoadError } from "../policy/policy-error.ts";
import { PolicyFolder, type PolicySource } from "../policy/policy-source.ts";
import type { DigestResolver } from "../registry/digest-resolver.ts";
import type { RoundTrip } from "../registry/registry-client.ts";
import type { RegistrySettingsMap } from "../registry/registry-settings.ts";
import { CallerAuthenticator, type CallerAuthOptions } from "../caller-auth/caller-auth.ts";
import { startHttpsServer, type RunningServer, type TlsUpdates } from "./https-server.ts";
import { createServerLogger } from "./logger.ts";
import { startClusterPolicies, type RunningClusterPolicies } from "../policy-resources/cluster-policy-resources.ts";
import { serializedPolicyLoader } from "../policy/policy-loader.ts";
import { createMetrics, prometheusRecorder, prometheusScanRecorder, startMetricsServer, type Metrics, type RunningMetricsServer } from "./metrics.ts";
import { ensureServingCertificate } from "../tls/tls-bootstrap.ts";
import type { BackgroundScanOptions } from "../scan/scan-flags.ts";
import type { PodSecurityContext } from "../core/pod-security/psa-evaluate.ts";
import { defaultCandidateIdentity, LeaderElector } from "../kube/leader-election.ts";
import { PolicyReportWriter } from "../kube/policy-report-writer.ts";
import { EventRecorder } from "../kube/event-recorder.ts";
import { AuditScanner } from "../scan/audit-scanner.ts";

export interface AppOptions {
  policies: string;
  /** Where policies come from instead of the `policies` folder: custom resources, with a folder or not (serve --policy-crds). */
  policySource?: PolicySource;
  host: string;
  port: number;
  stateDir: string;
  tls?: { cert: string; key: string; ca?: string };
  /** Later certificates replacing `tls` without a restart (self-managed TLS, src/tls/tls-secret-manager.ts). */
  tlsUpdates?: TlsUpdates;
  /** Extra DNS names / IPs for a generated serving certificate. */
  tlsHosts: string[];
  config: ServerConfig;
  namespaces?: NamespaceLabelSource;
  /** Shipped profiles bound cluster-wide (Drop) in addition to the policy folder (`serve --profile`). */
  profiles?: string[];
  /** Start even when no policy is loaded (otherwise refused: a gate with no policy admits everything). */
  allowEmptyPolicies?: boolean;
  /** Not ready, and every review denied, while no policy is in force (`serve --require-policies`). */
  requirePolicies?: boolean;
  /** The namespaces whose PolicyExceptions are honoured (`serve --exceptions-namespace`). */
  exceptionNamespaces?: readonly string[];
  logger?: Logger;
  /** Reload policies when files in the folder change (default true). */
  watchPolicies?: boolean;
  /** Called with each policy set that replaces the running one (not with the first). */
  onPoliciesReloaded?: (set: PolicySet) => void | Promise<void>;
  /** The server's own cluster's API: namespace labels (with `namespaces`), pods' pull secrets, k8s:// keys, pods and Events. */
  kube?: KubeConfig;
  /** Other clusters' kubeconfigs and the server's own cluster's name (serve --cluster-kubeconfig, --cluster-name). */
  clusters?: ClusterConnections;
  /** Other clusters' own policy resources, by cluster (serve --policy-crds with --cluster-kubeconfig). */
  clusterPolicySources?: ReadonlyMap<string, PolicySource>;
  /** Per-registry TLS, plain HTTP and mirrors (--registries). */
  registries?: RegistrySettingsMap;
  /** The server's own registry credentials (--authfile), tried after a pod's. */
  staticCredentials?: CredentialLookup;
  /** Called for every registry HTTP exchange (benchmarks count round trips). */
  onRegistryRoundTrip?: (trip: RoundTrip) => void;
  /** Who may call: a client CA, caller tokens, and whether callers without credentials are let in (default: anyone). */
  callers?: CallerAuthOptions;
  /** Serve /metrics (with /healthz and /readyz) over plain HTTP on this port, and not on the HTTPS port. */
  metricsPort?: number;
  /** Honour the namespaces' pod-security.kubernetes.io labels (serve --pod-security). */
  podSecurity?: PodSecurityContext;
  /** The post-creation audit of running pods (needs `kube`): src/scan/audit-scanner.ts. */
  backgroundScan?: BackgroundScanOptions;
}

export interface App {
  port: number;
  /** The plain-HTTP metrics port (--metrics-port), when there is one. */
  metricsPort: number | undefined;
  caPem: string | undefined;
  generatedCertificate: boolean;
  engine: Engine;
  cache: DecisionCache;
  /** Tag→digest resolution cache (digestMutate). */
  resolver: DigestResolver;
  metrics: Metrics;
  logger: Logger;
  policies(): readonly ImagePolicy[];
  podRestrictions(): readonly PodRestriction[];
  /** Reloads policies; keeps the last good set and returns the error when the new set fails to load. */
  reload(): Promise<PolicyLoadError | undefined>;
  /** Stops: not ready at once, answers for `drainMs` more, then closes. */
  close(drainMs?: number): Promise<void>;
}

/** Refused: a server with no policy at all admits everything (the same refusal as `check` and `test`). */
export { EmptyPolicySetError } from "../policy/policy-set.ts";

export async function startApp(opts: AppOptions): Promise<App> {
  const owned = opts.logger ? undefined : createServerLogger();
  const logger = opts.logger ?? owned!.logger;
  const metrics = createMetrics();
  const recorder = prometheusRecorder(metrics);
  const source: PolicySource = opts.policySource ?? new PolicyFolder(opts.policies);
  // The one policy-set loader `check` and `test` use too; reloads accept an empty set (with a warning, below).
  const load = serializedPolicyLoader(source, { profiles: opts.profiles ?? [], logger });
  const callers = new CallerAuthenticator(opts.callers);

  // Ready once the policies are loaded and the serving certificate is in place, until draining begins.
  const readiness = { policies: false, certificate: false, draining: false };
  const notReady = (): string | undefined =>
    readiness.draining
      ? "shutting down"
      : !readiness.policies
        ? "the policies are not loaded yet"
        : !readiness.certificate
          ? "the serving certificate is not in place yet"
          : opts.requirePolicies && !engine.policiesInForce()
            ? "no policy is in force yet (--require-policies)"
            : // A certificate kept in a Secret may expire unrenewed: then this replica should get no traffic.
              opts.tlsUpdates?.notReady?.();
  // The metrics port opens first, so its /readyz can say what the server is still waiting for.
  const metricsServer: RunningMetricsServer | undefined =
    opts.metricsPort === undefined ? undefined : await startMetricsServer({ host: opts.host, port: opts.metricsPort, metrics, notReady });

  let engine: Engine;
  try {
    // Refuse to start on an invalid policy set (or an unknown --profile): throws PolicyLoadError with details.
    const initial = await load(opts.allowEmptyPolicies === true);
    if (policyCount(initial) === 0) {
      logger.warn({ policies: source.description }, nothingInForce(opts));
    }
    warnUnhonouredExceptions(initial, opts, logger);
    engine = await serverEngine(opts, initial, logger, recorder);
  } catch (e) {
    await metricsServer?.close();
    throw e;
  }
  let clusterPolicies: RunningClusterPolicies | undefined;
  try {
    if (opts.clusterPolicySources && opts.clusterPolicySources.size > 0)
      clusterPolicies = await startClusterPolicies(opts.clusterPolicySources, { engine, logger, recorder, watch: opts.watchPolicies !== false });
    readiness.policies = true;
  } catch (e) {
    await engine.close();
    await metricsServer?.close();
    throw e;
  }

  let server: RunningServer;
  let tls: { material: { cert: string; key: string }; caPem: string | undefined; generated: boolean };
  try {
    tls = await servingTls(opts);
    metrics.setServingCertificate(tls.material.cert);
    readiness.certificate = true;
    server = await startHttpsServer({
      host: opts.host,
      port: opts.port,
      tls: tls.material,
      handlers: { engine },
      logger,
      recorder,
      metrics: metricsServer ? undefined : { text: () => metrics.registry.metrics(), contentType: metrics.registry.contentType },
      callers,
      maxBodyBytes: opts.config.maxRequestBytes,
      defaultTimeoutMs: 10_000,
      ...(opts.tlsUpdates ? { tlsUpdates: opts.tlsUpdates } : {}),
      notReady,
    });
  } catch (e) {
    clusterPolicies?.close();
    await engine.close();
    await metricsServer?.close();
    throw e;
  }

  // A renewed certificate moves the expiry the alert watches.
  const stopCertificateMetric = opts.tlsUpdates?.subscribe((next) => metrics.setServingCertificate(next.cert));

  const reload = async (): Promise<PolicyLoadError | undefined> => {
    try {
      const set = await load();
      engine.setPolicies(set);
      recorder.policyReload("success");
      logger.info({ policies: set.ImagePolicy.map((p) => p.name), podRestrictions: set.PodRestriction.map((p) => p.name) }, "policies reloaded");
      if (policyCount(set) === 0) logger.warn({ policies: source.description }, nothingInForce(opts));
      warnUnhonouredExceptions(set, opts, logger);
      scan?.scanner.policiesChanged();
      await opts.onPoliciesReloaded?.(set);
      return undefined;
    } catch (e) {
      if (!(e instanceof PolicyLoadError)) throw e;
      recorder.policyReload("failure");
      logger.error({ errors: e.errors }, "policy reload failed; keeping the last good policies");
      return e;
    }
  };

  const scan = opts.backgroundScan ? startBackgroundScan(opts, opts.backgroundScan, engine, logger, metrics) : undefined;

  const watcher =
    opts.watchPolicies === false
      ? undefined
      : source.watch?.(
          () => void reload(),
          (err) => logger.warn({ err }, "cannot watch the policy folder; reload with SIGHUP"),
        );

  const set = engine.policies();
  logger.info(
    {
      port: server.port,
      policies: set.ImagePolicy.map((p) => p.name),
      podRestrictions: set.PodRestriction.map((p) => p.name),
      backends: engine.remoteBackendNames(),
      failOpen: opts.config.failOpen,
      callers: {
        clientCertificates: callers.clientCaPem !== undefined,
        tokens: opts.callers?.tokens?.size ?? 0,
        unauthenticated: callers.required ? "refused" : "allowed",
      },
      ...(metricsServer ? { metricsPort: metricsServer.port } : {}),
    },
    "serving",
  );
  // Written out at once, not with the next batch: a fresh pod's log shows it serving.
  owned?.flush();
  return {
    port: server.port,
    metricsPort: metricsServer?.port,
    caPem: tls.caPem,
    generatedCertificate: tls.generated,
    engine,
    cache: engine.cache,
    resolver: resolverOf(engine),
    metrics,
    logger,
    policies: () => engine.policies().ImagePolicy,
    podRestrictions: () => engine.policies().PodRestriction,
    reload,
    close: async (drainMs = 0) => {
      readiness.draining = true;
      stopCertificateMetric?.();
      watcher?.close();
      clusterPolicies?.close();
      await scan?.close();
      await server.close(drainMs);
      await engine.close();
      await metricsServer?.close();
      owned?.close();
    },
  };
}

/** A server's engine is built online, so it has a resolver. */
function resolverOf(engine: Engine): DigestResolver {
  if (!engine.resolver) throw new ImprimaturError("internal", "the server's engine was built offline");
  return engine.resolver;
}

/** The scanner of running pods, run by the replica that holds the Lease, writing reports in the chosen formats. */
function startBackgroundScan(opts: AppOptions, scanOpts: BackgroundScanOptions, engine: Engine, logger: Logger, metrics: Metrics) {
  if (!opts.kube) throw new Error("the background scan needs the Kubernetes API: give --kubeconfig, or run in a pod");
  const kube = opts.kube;
  const leader = new LeaderElector({ kube, ...scanOpts.lease, identity: defaultCandidateIdentity(), logger });
  metrics.watchLease(scanOpts.lease.name, () => leader.isLeader());
  const scanner = new AuditScanner({
    engine,
    kube,
    logger,
    leader,
    ...(scanOpts.reports.length > 0 ? { reports: new PolicyReportWriter(kube, { formats: scanOpts.reports }) } : {}),
    podsPerSecond: scanOpts.podsPerSecond,
    rescanIntervalMs: scanOpts.rescanIntervalMs,
    excludeNamespaces: scanOpts.excludeNamespaces,
    errorRetryMs: scanOpts.errorRetryMs,
    recorder: prometheusScanRecorder(metrics),
    events: new EventRecorder(kube, logger),
  });
  metrics.setScanResultsSource(() => scanner.violationCounts());
  scanner.start();
  leader.start();
  return {
    scanner,
    close: async () => {
      await scanner.close();
      // Handing the Lease back lets another replica take the scan over at once rather than after it expires.
      await leader.close({ release: true });
    },
  };
}

/** The configured certificate, or one issued by the CA kept in the state folder (created on first start). */
async function servingTls(opts: AppOptions): Promise<{ material: { cert: string; key: string }; caPem: string | undefined; generated: boolean }> {
  if (opts.tls) return { material: { cert: opts.tls.cert, key: opts.tls.key }, caPem: opts.tls.ca, generated: false };
  const m = await ensureServingCertificate(opts.stateDir, opts.tlsHosts);
  return { material: { cert: m.certPem, key: m.keyPem }, caPem: m.caCertPem, generated: m.created };
}

/** What an empty policy set means for requests, as the warning says it. */
function nothingInForce(opts: AppOptions): string {
  return opts.requirePolicies && !opts.podSecurity
    ? "no policy is loaded: every request is refused until one is (--require-policies)"
    : "no policy is loaded: every request is admitted";
}

/** PolicyExceptions the set holds (from files; custom resources say so in their status) that are not honoured. */
function warnUnhonouredExceptions(set: PolicySet, opts: AppOptions, logger: Logger): void {
  const ignored = unhonouredExceptions(set.PolicyException, new Set(opts.exceptionNamespaces));
  if (ignored.length > 0) logger.warn({ exceptions: ignored }, "PolicyExceptions not honoured: their namespace is not one --exceptions-namespace names");
}

/** The engine `serve` judges with: online, its own cluster and the others, the audit log in the state folder. */
function serverEngine(opts: AppOptions, policies: PolicySet, logger: Logger, recorder: Recorder): Promise<Engine> {
  return buildEngine({
    config: opts.config,
    policies,
    ...(opts.namespaces ? { namespaces: opts.namespaces } : {}),
    logger,
    recorder,
    auditLogPath: opts.config.auditLog ?? join(opts.stateDir, "audit.jsonl"),
    ...(opts.kube ? { kube: opts.kube } : {}),
    ...(opts.clusters ? { clusters: opts.clusters } : {}),
    ...(opts.registries ? { registries: opts.registries } : {}),
    ...(opts.staticCredentials ? { staticCredentials: opts.staticCredentials } : {}),
    ...(opts.onRegistryRoundTrip ? { onRegistryRoundTrip: opts.onRegistryRoundTrip } : {}),
    ...(opts.podSecurity ? { podSecurity: opts.podSecurity } : {}),
    ...(opts.requirePolicies ? { requirePolicies: true } : {}),
    ...(opts.exceptionNamespaces ? { exceptionNamespaces: opts.exceptionNamespaces } : {}),
  });
}
