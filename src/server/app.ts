// A running Imprimatur server, composed from three parts that know nothing of each other: the policies
// (loaded from a PolicySource, reloaded on change), the engine (built once from configuration), and the
// HTTPS transport (with its TLS material). Used by `imprimatur serve`, and by tests and benchmarks that
// want a server in-process.
import { join } from "node:path";
import type { KubeClient } from "../kube/kube-client.ts";
import type { Logger } from "pino";
import { mendAuditLog } from "../audit/audit-log.ts";
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
import { serializedPolicyLoader, type PolicyLoad } from "../policy/policy-loader.ts";
import { createMetrics, prometheusRecorder, prometheusScanRecorder, startMetricsServer, type Metrics, type RunningMetricsServer } from "./metrics.ts";
import { ensureServingCertificate } from "../tls/tls-bootstrap.ts";
import { Readiness } from "./readiness.ts";
import type { BackgroundScanOptions } from "../scan/scan-flags.ts";
import type { PodSecurityContext } from "../core/pod-security/psa-evaluate.ts";
import { defaultCandidateIdentity, LeaderElector } from "../kube/leader-election.ts";
import { PolicyReportWriter } from "../kube/policy-report-writer.ts";
import { EventRecorder } from "../kube/event-recorder.ts";
import { AuditScanner } from "../scan/audit-scanner.ts";
import { RecordingPolicySource, type SnapshotPolicySource } from "../workers/policy-snapshot.ts";
import type { PrimaryChannel } from "../workers/primary-channel.ts";
import { VerificationBroker } from "../workers/shared-verifications.ts";
import { WorkerPool } from "../workers/worker-pool.ts";
import { everyProcessMetrics } from "../workers/process-metrics.ts";

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
  kube?: KubeClient;
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
  /**
   * serve --workers N (N > 1): this process is the primary, and N worker processes serve its port (src/workers/). It
   * keeps the policy source, the scan, the certificate, the audit log's mending and every process's metrics.
   */
  workers?: number;
  /** This process is a worker of serve --workers: its policies, certificate and shared verifications come from here. */
  primary?: PrimaryChannel;
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

/** A start-up the options cannot satisfy: the background scan without the Kubernetes API. */
export class ServerStartError extends ImprimaturError<"needs-kubernetes-api"> {}

export async function startApp(opts: AppOptions): Promise<App> {
  const owned = opts.logger ? undefined : createServerLogger();
  const parts = serverParts(opts, opts.logger ?? owned!.logger, await serveMode(opts));
  // A worker's certificate comes from its primary, which says when one is in place.
  const readiness = new Readiness({ requirePolicies: opts.requirePolicies === true, certificate: opts.primary ?? opts.tlsUpdates });
  const opened = new OpenedByApp();
  let started: Started;
  try {
    started = await startInOrder(parts, readiness, opened);
  } catch (e) {
    // What was opened before the failing step, closed as a stopping app closes it; the lines logged so far written out.
    await opened.close(0);
    owned?.close();
    throw e;
  }
  logServing(parts, started.engine, started.port, opened.metricsServer);
  // Written out at once, not with the next batch: a fresh pod's log shows it serving.
  owned?.flush();
  return runningApp(parts, started, opened, async (drainMs) => {
    readiness.drain();
    await opened.close(drainMs);
    owned?.close();
  });
}

/** What the start-up steps share: the options, the logger and metrics, where policies come from, who may call. */
interface ServerParts {
  opts: AppOptions;
  logger: Logger;
  metrics: Metrics;
  recorder: Recorder;
  source: PolicySource;
  load: PolicyLoad;
  callers: CallerAuthenticator;
  mode: ServeMode;
  /** /metrics: this process's, or every process's under serve --workers. */
  metricsText: () => Promise<string>;
}

/**
 * How this process serves: alone; as the primary of workers that serve its port (it reads the policies, recording
 * what it read for them, and holds the verification results they share); or as one of those workers.
 */
type ServeMode =
  | { kind: "alone" }
  | { kind: "primary"; workers: number; recording: RecordingPolicySource; broker: VerificationBroker; version: number; pool?: WorkerPool }
  | { kind: "worker"; primary: PrimaryChannel; source: SnapshotPolicySource };

async function serveMode(opts: AppOptions): Promise<ServeMode> {
  if (opts.primary) return { kind: "worker", primary: opts.primary, source: await opts.primary.policySource() };
  if (opts.workers !== undefined && opts.workers > 1) {
    const recording = new RecordingPolicySource(opts.policySource ?? new PolicyFolder(opts.policies));
    return { kind: "primary", workers: opts.workers, recording, broker: new VerificationBroker(), version: 0 };
  }
  return { kind: "alone" };
}

function serverParts(opts: AppOptions, logger: Logger, mode: ServeMode): ServerParts {
  const metrics = createMetrics();
  const recorder = prometheusRecorder(metrics);
  const source: PolicySource =
    mode.kind === "primary" ? mode.recording : mode.kind === "worker" ? mode.source : (opts.policySource ?? new PolicyFolder(opts.policies));
  // The one policy-set loader `check` and `test` use too; reloads accept an empty set (with a warning, below).
  const load = serializedPolicyLoader(source, { profiles: opts.profiles ?? [], logger });
  const metricsText =
    mode.kind === "primary"
      ? everyProcessMetrics(metrics.registry, () => mode.pool?.workerMetrics() ?? Promise.resolve([]))
      : mode.kind === "worker"
        ? () => mode.primary.metricsText()
        : () => metrics.registry.metrics();
  return { opts, logger, metrics, recorder, source, load, callers: new CallerAuthenticator(opts.callers), mode, metricsText };
}

/** What the app opened, closed in this order when a later start-up step fails or the app stops. */
class OpenedByApp {
  metricsServer: RunningMetricsServer | undefined;
  engine: Engine | undefined;
  clusterPolicies: RunningClusterPolicies | undefined;
  server: RunningServer | undefined;
  workers: WorkerPool | undefined;
  stopCertificateMetric: (() => void) | undefined;
  scan: RunningBackgroundScan | undefined;
  watcher: { close(): void } | undefined;

  async close(drainMs: number): Promise<void> {
    // The workers are told first: each turns not ready and drains while the rest closes here (the scan may take a while).
    const workersStopped = this.workers?.stop(drainMs);
    this.stopCertificateMetric?.();
    this.watcher?.close();
    this.clusterPolicies?.close();
    await this.scan?.close();
    await this.server?.close(drainMs);
    await workersStopped;
    await this.engine?.close();
    await this.metricsServer?.close();
  }
}

/** What start-up hands the running app besides what it opened. */
interface Started {
  engine: Engine;
  /** The HTTPS port served (by this process, or by its workers). */
  port: number;
  tls: ServingTls;
  reload: () => Promise<PolicyLoadError | undefined>;
}

/** The start-up steps in turn; what they open goes into `opened`, for the caller to close. */
async function startInOrder(parts: ServerParts, readiness: Readiness, opened: OpenedByApp): Promise<Started> {
  // The metrics port opens first, so its /readyz can say what the server is still waiting for.
  opened.metricsServer = await openMetricsPort(parts, readiness);
  // The source is watched from before the first load: a change while the server starts (its workers can take
  // seconds) is reloaded once it serves, instead of waiting for the next change (a policy applied during a rollout).
  let changedWhileStarting = false;
  let changed = (): void => void (changedWhileStarting = true);
  opened.watcher = watchPolicies(parts, () => changed());
  const initial = await loadFirstPolicies(parts);
  // The audit log is mended once, by the primary, before any worker appends to it.
  if (parts.mode.kind === "primary") await mendSharedAuditLog(parts);
  const engine = await serverEngine(parts, initial);
  opened.engine = engine;
  // A worker names its verification results with the primary's number for this set, as every other worker does.
  if (parts.mode.kind === "worker") engine.nameResultsWith(parts.mode.source.lastReadVersion);
  opened.clusterPolicies = await startOtherClustersPolicies(parts, engine);
  readiness.policiesLoaded(() => engine.policiesInForce());
  const tls = await servingCertificate(parts, readiness);
  let port: number;
  if (parts.mode.kind === "primary") {
    opened.workers = await startWorkers(parts, parts.mode, tls);
    port = opened.workers.port ?? parts.opts.port;
  } else {
    opened.server = await startHttps(parts, tls, engine, readiness, opened.metricsServer);
    port = opened.server.port;
    if (parts.mode.kind === "worker") parts.mode.primary.serving(port);
  }
  opened.stopCertificateMetric = followCertificateRenewals(parts, opened.workers);
  const reload = policyReloader(parts, engine, () => opened.scan, opened.workers);
  if (parts.opts.backgroundScan) opened.scan = startBackgroundScan(parts, parts.opts.backgroundScan, engine);
  changed = () => void reload();
  if (changedWhileStarting) changed();
  return { engine, port, tls, reload };
}

/** The workers of serve --workers, given the first policies and the certificate; resolves once every one serves. */
async function startWorkers(parts: ServerParts, mode: Extract<ServeMode, { kind: "primary" }>, tls: ServingTls): Promise<WorkerPool> {
  const snapshot = mode.recording.snapshot(mode.version);
  if (!snapshot) throw new ImprimaturError("internal", "the primary started workers before it read any policy");
  const pool = new WorkerPool(
    { count: mode.workers, broker: mode.broker, metricsText: parts.metricsText, logger: parts.logger },
    { policies: snapshot, tls: tls.material },
  );
  mode.pool = pool;
  await pool.start();
  return pool;
}

/** A last line left unfinished by a crash, moved aside before several processes append to the log. */
async function mendSharedAuditLog({ opts, logger }: ServerParts): Promise<void> {
  const path = opts.config.auditLog ?? join(opts.stateDir, "audit.jsonl");
  const repair = await mendAuditLog(path).catch((e: unknown) => {
    logger.warn({ auditLog: path, err: (e as Error).message }, "cannot check the audit log for an unfinished record");
    return undefined;
  });
  if (repair) logger.warn({ auditLog: path, ...repair }, "the audit log ended in an unfinished record (a crash while writing it); moved aside");
}

/** The plain-HTTP port for /metrics, /healthz and /readyz (--metrics-port), when there is one. */
async function openMetricsPort(parts: ServerParts, readiness: Readiness): Promise<RunningMetricsServer | undefined> {
  const { opts, metrics } = parts;
  // Under serve --workers the primary alone opens it, and serves every process's metrics there.
  if (opts.metricsPort === undefined || parts.mode.kind === "worker") return undefined;
  return startMetricsServer({ host: opts.host, port: opts.metricsPort, metrics, text: parts.metricsText, notReady: () => readiness.notReady() });
}

/** The first policy set, with a warning when it holds nothing in force or exceptions that are not honoured. */
async function loadFirstPolicies(parts: ServerParts): Promise<PolicySet> {
  const { opts, logger } = parts;
  // Refuse to start on an invalid policy set (or an unknown --profile): throws PolicyLoadError with details.
  const initial = await parts.load(opts.allowEmptyPolicies === true);
  if (policyCount(initial) === 0) {
    logger.warn({ policies: parts.source.description }, nothingInForce(opts));
  }
  warnUnhonouredExceptions(initial, opts, logger);
  return initial;
}

/** Other clusters' own policy resources, loaded into the engine and kept current (serve --policy-crds with --cluster-kubeconfig). */
async function startOtherClustersPolicies(parts: ServerParts, engine: Engine): Promise<RunningClusterPolicies | undefined> {
  const { opts, logger, recorder } = parts;
  if (!opts.clusterPolicySources || opts.clusterPolicySources.size === 0) return undefined;
  return startClusterPolicies(opts.clusterPolicySources, { engine, logger, recorder, watch: opts.watchPolicies !== false });
}

/** The serving certificate, in place: its expiry in the metrics, and readiness told. */
async function servingCertificate(parts: ServerParts, readiness: Readiness): Promise<ServingTls> {
  const tls = parts.mode.kind === "worker" ? primaryCertificate(parts.mode.primary) : await servingTls(parts.opts);
  parts.metrics.setServingCertificate(tls.material.cert);
  readiness.certificateReady();
  return tls;
}

/** The HTTPS listener: the review handlers, and /metrics too unless the metrics port serves it. */
function startHttps(parts: ServerParts, tls: ServingTls, engine: Engine, readiness: Readiness, metricsServer: RunningMetricsServer | undefined) {
  const { opts, logger, recorder, metrics, callers, mode } = parts;
  // A worker's /metrics are every process's, from the primary; its certificate renewals come from there too.
  const primary = mode.kind === "worker" ? mode.primary : undefined;
  primary?.answerMetricsFrom(() => metrics.registry.getMetricsAsJSON());
  const tlsUpdates = primary ?? opts.tlsUpdates;
  return startHttpsServer({
    host: opts.host,
    port: opts.port,
    tls: tls.material,
    handlers: { engine },
    logger,
    recorder,
    // With --metrics-port, /metrics is served there (by the primary, under serve --workers), not here.
    metrics: metricsServer || opts.metricsPort !== undefined ? undefined : { text: parts.metricsText, contentType: metrics.registry.contentType },
    callers,
    maxBodyBytes: opts.config.maxRequestBytes,
    maxReviewsInFlight: opts.config.maxReviewsInFlight,
    defaultTimeoutMs: 10_000,
    ...(tlsUpdates ? { tlsUpdates } : {}),
    notReady: () => readiness.notReady(),
  });
}

/** A renewed certificate moves the expiry the alert watches, and goes to the workers; returns the unsubscribe. */
function followCertificateRenewals(parts: ServerParts, workers: WorkerPool | undefined): (() => void) | undefined {
  return parts.opts.tlsUpdates?.subscribe((next) => {
    parts.metrics.setServingCertificate(next.cert);
    workers?.certificateChanged({ cert: next.cert, key: next.key });
  });
}

/** Reloads the policies into the engine; keeps the last good set and returns the error when the new set fails to load. */
function policyReloader(
  parts: ServerParts,
  engine: Engine,
  scan: () => RunningBackgroundScan | undefined,
  workers: WorkerPool | undefined,
): () => Promise<PolicyLoadError | undefined> {
  const { opts, logger, recorder, source, mode } = parts;
  // One reload at a time: a slow load (thousands of objects) overtaken by a later one must not put an older set in
  // force after it. A reload asked for while one runs waits for it and then loads once for all who asked.
  let running: Promise<PolicyLoadError | undefined> | undefined;
  let next: Promise<PolicyLoadError | undefined> | undefined;
  const serialized = (): Promise<PolicyLoadError | undefined> => {
    if (!running) {
      running = reloadOnce().finally(() => (running = undefined));
      return running;
    }
    next ??= running.then(
      () => ((next = undefined), serialized()),
      () => ((next = undefined), serialized()),
    );
    return next;
  };
  const reloadOnce = async (): Promise<PolicyLoadError | undefined> => {
    try {
      const set = await parts.load();
      if (mode.kind === "primary") {
        // Numbered, and sent to every worker as read: they judge by this set from now on, and name its results alike.
        mode.version++;
        engine.setPolicies(set, mode.version);
        mode.broker.clear();
        const snapshot = mode.recording.snapshot(mode.version);
        if (snapshot) workers?.policiesChanged(snapshot);
      } else engine.setPolicies(set, mode.kind === "worker" ? mode.source.lastReadVersion : undefined);
      // The primary counts the reloads of serve --workers; its workers' would count each one again.
      if (mode.kind !== "worker") recorder.policyReload("success");
      logger.info({ policies: set.ImagePolicy.map((p) => p.name), podRestrictions: set.PodRestriction.map((p) => p.name) }, "policies reloaded");
      if (policyCount(set) === 0) logger.warn({ policies: source.description }, nothingInForce(opts));
      warnUnhonouredExceptions(set, opts, logger);
      scan()?.scanner.policiesChanged();
      await opts.onPoliciesReloaded?.(set);
      return undefined;
    } catch (e) {
      if (!(e instanceof PolicyLoadError)) throw e;
      recorder.policyReload("failure");
      // A worker that cannot load what its primary loaded would judge by another set than the others: it stops, and
      // the primary starts another with the set in force.
      if (mode.kind === "worker") {
        logger.error({ errors: e.errors }, "this worker cannot load the policies its primary put in force; stopping it");
        mode.primary.diverged(e.message);
        return e;
      }
      logger.error({ errors: e.errors }, "policy reload failed; keeping the last good policies");
      return e;
    }
  };
  return serialized;
}

/** Calls `changed` on every change of the policy source, unless told not to watch. */
function watchPolicies(parts: ServerParts, changed: () => void): { close(): void } | undefined {
  if (parts.opts.watchPolicies === false) return undefined;
  return parts.source.watch?.(changed, (err) => parts.logger.warn({ err }, "cannot watch the policy folder; reload with SIGHUP"));
}

/** The start-up line: what is served, by which policies and backends, to which callers. */
function logServing(parts: ServerParts, engine: Engine, port: number, metricsServer: RunningMetricsServer | undefined): void {
  const { opts, callers } = parts;
  const set = engine.policies();
  parts.logger.info(
    {
      port,
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
}

/** The running app as its users see it; `close` stops it. */
function runningApp(parts: ServerParts, started: Started, opened: OpenedByApp, close: (drainMs: number) => Promise<void>): App {
  const { engine, port, tls, reload } = started;
  return {
    port,
    metricsPort: opened.metricsServer?.port,
    caPem: tls.caPem,
    generatedCertificate: tls.generated,
    engine,
    cache: engine.cache,
    resolver: resolverOf(engine),
    metrics: parts.metrics,
    logger: parts.logger,
    policies: () => engine.policies().ImagePolicy,
    podRestrictions: () => engine.policies().PodRestriction,
    reload,
    close: (drainMs = 0) => close(drainMs),
  };
}

/** A server's engine is built online, so it has a resolver. */
function resolverOf(engine: Engine): DigestResolver {
  if (!engine.resolver) throw new ImprimaturError("internal", "the server's engine was built offline");
  return engine.resolver;
}

interface RunningBackgroundScan {
  scanner: AuditScanner;
  close(): Promise<void>;
}

/** The scanner of running pods, run by the replica that holds the Lease, writing reports in the chosen formats. */
function startBackgroundScan(parts: ServerParts, scanOpts: BackgroundScanOptions, engine: Engine): RunningBackgroundScan {
  const { opts, logger, metrics } = parts;
  if (!opts.kube) throw new ServerStartError("needs-kubernetes-api", "the background scan needs the Kubernetes API: give --kubeconfig, or run in a pod");
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

interface ServingTls {
  material: { cert: string; key: string };
  caPem: string | undefined;
  generated: boolean;
}

/** The configured certificate, or one issued by the CA kept in the state folder (created on first start). */
async function servingTls(opts: AppOptions): Promise<ServingTls> {
  if (opts.tls) return { material: { cert: opts.tls.cert, key: opts.tls.key }, caPem: opts.tls.ca, generated: false };
  const m = await ensureServingCertificate(opts.stateDir, opts.tlsHosts);
  return { material: { cert: m.certPem, key: m.keyPem }, caPem: m.caCertPem, generated: m.created };
}

/** A worker's certificate: the primary's, which it sends before the first policies. */
function primaryCertificate(primary: PrimaryChannel): ServingTls {
  const material = primary.certificate();
  if (!material) throw new ImprimaturError("internal", "the primary sent no serving certificate");
  return { material, caPem: undefined, generated: false };
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
function serverEngine({ opts, logger, recorder, mode }: ServerParts, policies: PolicySet): Promise<Engine> {
  // serve --workers: one verification per image across the processes; the audit log mended by the primary alone.
  const shared = mode.kind === "primary" ? mode.broker.local() : mode.kind === "worker" ? mode.primary : undefined;
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
    ...(shared ? { sharedVerifications: shared, auditLogMended: true } : {}),
  });
}
