// `imprimatur serve`: the HTTPS ImageReview backend (/imagereview), validating webhook (/validate) and
// tag→digest pinning webhook (/mutate).
import cluster from "node:cluster";
import { pino } from "pino";
import { DEFAULT_SERVER_CONFIG, loadServerConfig, type ServerConfig } from "../config/server-config.ts";
import { loadNamespacesFile } from "../config/namespaces-file.ts";
import type { NamespaceLabelSource } from "../core/namespace-labels.ts";
import type { KubeClient } from "../kube/kube-client.ts";
import { loadKubeClient } from "../kube/kube-connection.ts";
import { podNamespace } from "../kube/leader-election.ts";
import { backgroundScanOptions, SCAN_FLAG_USAGE, type BackgroundScanOptions } from "../scan/scan-flags.ts";
import { podSecurityContext } from "../policy/pod-security-context.ts";
import type { PodSecurityContext } from "../core/pod-security/psa-evaluate.ts";
import { NamespaceLabelCache } from "../kube/namespace-label-cache.ts";
import { policyResourceSource } from "../policy-resources/resource-watch.ts";
import { PolicyFolder } from "../policy/policy-source.ts";
import { PolicyLoadError } from "../policy/policy-error.ts";
import { policySetSource } from "../policy/policy-set.ts";
import { startApp, type App, type AppOptions } from "../server/app.ts";
import { selfManagedTlsFromFlags } from "../tls/tls-secret-flags.ts";
import type { RunningSelfManagedTls } from "../tls/tls-secret-manager.ts";
import type { CallerAuthOptions } from "../caller-auth/caller-auth.ts";
import { watchCallerFiles, type WatchedCallerFiles } from "../caller-auth/caller-files.ts";
import { connectClusters, unreadableCallerClusters, type ConnectedClusters } from "../server/cluster-flags.ts";
import type { CallerTokens } from "../caller-auth/caller-tokens.ts";
import { watchCertificateFiles, type ServingPair } from "../tls/certificate-files.ts";
import type { WatchedFiles } from "../fs/file-reload.ts";
import { removeLeftTemporaries } from "../fs/write-file-atomic.ts";
import type { PolicySet } from "../core/policy-set/policy-kinds.ts";
import { EMBEDDED_POLICIES, errorText, usageFailure } from "./args.ts";
import { registryAccess } from "./registry-access.ts";
import { layConfigFlags, readServeFlags, ServeFlagError, type CallerFlags, type ServeOptions } from "./serve-flags.ts";
import { catchServeSignals, StartupStopped, type ServeSignals } from "./serve-signals.ts";
import { WebhookConfigurationFiles, webhookRules } from "./serve-webhook-files.ts";
import { PrimaryChannel, processChannel } from "../workers/primary-channel.ts";

export const SERVE_USAGE = `Usage: imprimatur serve [options]

  --policies DIR       policy folder or file (default: the embedded default policy, unless --policy-crds)
  --policy-crds        read ImagePolicy, PodRestriction and TrustRoot custom resources (imprimatur.dev/v1alpha1)
                       through --kubeconfig or in-cluster, watch them, and write each one's status; with
                       --policies the folder is read too, as part of the same set. Starting with no
                       policy is allowed then (a fresh install has none yet)
  --require-policies   until at least one policy is in force (or --pod-security is on), /readyz says not
                       ready and every review is denied, naming this flag: with --policy-crds, a server
                       whose policies are not there yet never admits everything (set in deploy/)
  --exceptions-namespace NS
                       honour the PolicyExceptions of this namespace (repeatable): for the workloads they
                       match, the policies, rules and checks they name are set aside, with a warning, an audit
                       record and a skip in reports. By default none is honoured; give the namespace only to
                       those who may exempt workloads (RBAC on policyexceptions there)
  --host ADDR          listen address (default 0.0.0.0)
  --port N             HTTPS port (default 8443)
  --state-dir DIR      state folder: generated CA (ca.crt), serving certificate, audit log (default ./.state)
  --tls-cert FILE      serving certificate (PEM); with --tls-key. Without them a self-signed CA and
  --tls-key FILE       certificate are created in the state folder on first start. Both files are
                       reread every few seconds: a renewed pair is used without a restart
  --tls-san NAME       extra DNS name or IP for the generated certificate (repeatable)
  --tls-secret NS/NAME
                       keep the CA and serving certificate in this Secret, shared by all replicas, and
                       rotate them without a restart (needs --kubeconfig or a pod's service account; see
                       docs/tls.md). One replica, chosen by a Lease, writes it and the caBundle
  --tls-timeline SPEC  lifetimes and renewal margins for --tls-secret, e.g. ca=8760h/720h,cert=3600h/360h,
                       propagation=60s (the defaults); shorter ones rehearse a rotation
  --tls-sync-interval DUR
                       how often each replica re-reads the Secret (default 5s)
  --webhook-configuration NAME
                       the Validating- and MutatingWebhookConfiguration whose caBundle --tls-secret keeps
                       current (default imprimatur)
  --leader-election-namespace NS
                       namespace of the Lease (default: the pod's namespace, else the Secret's)
  --leader-election-id NAME
                       name of the Lease (default imprimatur)
  --url URL            base URL kube-apiserver uses to reach this server, for the printed configuration
                       (default https://127.0.0.1:PORT)
  --config FILE        ServerConfig YAML: remote backends, failurePolicy, cache TTLs, audit log
  --fail-open          admit when a remote backend is unreachable (default: fail closed)
  --allow-ttl DUR      cache allowed decisions of remote backends (default 1h)
  --deny-ttl DUR       cache denied decisions of remote backends (default 30s)
  --audit-log FILE     append-only JSON-lines audit log (default STATE_DIR/audit.jsonl)
  --namespaces FILE    namespace labels (map or Namespace list) for namespaceSelector, instead of
                       reading them from the Kubernetes API
  --kubeconfig FILE    read namespace labels from this cluster (default: in-cluster when running in a
                       pod; without either, namespaceSelector bindings cannot be decided)
  --profile NAME       bind a shipped PodRestriction profile (baseline, restricted) to every namespace
                       (repeatable; see "imprimatur profiles"); NAME@v1.25 is the profile at a Pod Security
                       Standards policy version (v1.0 to v1.37, or latest)
  --registries FILE    RegistryConfig: per-registry CA, client certificate, insecure (plain HTTP), mirrors, the
                       hosts on local addresses that may be reached (allowLocalAddresses; others are refused),
                       and where namespaced policies may use --authfile (serverCredentialsForNamespacedPolicies)
  --authfile FILE      the server's own registry credentials ({"auths": {host: {auth|username/password}}}),
                       tried after a pod's pull secrets when resolving tags to digests
  --digest-mode MODE   mutate (default): /mutate pins digestMutate images to tag@sha256:...;
                       record: resolve and record only (no rewrite, no drift from Git)
  --allow-empty        start even when the policy folder holds no policy (by default that is refused, as
                       check and test refuse it: an empty set admits everything)
  --allow-empty-policies
                       the same as --allow-empty (its older name)
  --client-ca FILE     accept callers (kube-apiservers) presenting a client certificate issued by this CA
                       (PEM): its CN names the caller, its O the cluster (default: the CN); reread
                       every few seconds, so a CA rotation needs no restart. Needs one of:
  --client-ca-allowed-names NAME
                       the callers' common names (CN) a certificate of that CA may carry (repeatable,
                       or comma-separated); any other certificate of the CA is refused with 401
  --client-ca-any-name
                       every certificate of the CA is a caller: only with a CA dedicated to the webhook's
                       callers (a cluster CA also signs every kubelet's certificate)
  --caller-tokens FILE
                       accept callers presenting a bearer token listed in this CallerTokens file
                       (tokens or their SHA-256, each with a caller and a cluster name); reread
                       every few seconds
  --cluster-name NAME  the name of the cluster --kubeconfig (or the in-cluster config) and --namespaces
                       belong to: its callers' reviews read them, and the background scan judges its
                       pods by the policies spec.clusters gives it
  --cluster-kubeconfig NAME=FILE
                       another cluster's kubeconfig (repeatable): its callers' reviews read its namespace
                       labels, pull secrets, k8s:// keys and pods there, and with --policy-crds its own
                       policy resources, which judge its requests only; a caller's cluster with neither
                       flag gets a review that needs such a read refused, never answered from another
                       cluster
  --allow-unauthenticated
                       with --client-ca or --caller-tokens, still admit callers that present no
                       credentials (marked unauthenticated in audit records); without either flag every
                       caller is let in, as unauthenticated
  --metrics-port N     serve /metrics, /healthz and /readyz over plain HTTP on this port (on --host),
                       and not /metrics on the HTTPS port
  --pod-security       honour the namespaces' pod-security.kubernetes.io/enforce|warn|audit labels (and their
                       -version labels) with the shipped profiles, as Pod Security Admission does, in its
                       words (docs/pod-security-admission.md)
  --pod-security-config FILE
                       Pod Security Admission's PodSecurityConfiguration (defaults for unlabelled
                       namespaces, exemptions), or an AdmissionConfiguration holding one; implies
                       --pod-security
${SCAN_FLAG_USAGE}  --workers N          processes serving the port (default 1; auto: one per CPU the process may run on, which
                       in a pod is not its CPU limit: give the limit as N). The first process keeps the
                       policy source, the certificate, the background scan and the metrics port, and gives
                       the workers the policies and certificate it holds; an image is verified once across them
  --drain DUR          on SIGTERM, answer /readyz with 503 and keep serving for this long before closing
                       the listener, so endpoints stop routing here first (default 5s; 0 to stop at once)
  -h, --help           show this help

Signals: SIGHUP reloads the policies; SIGTERM and SIGINT drain, then stop. Both are handled from the start:
SIGTERM or SIGINT during start-up stops it and exits 0; a SIGHUP then reloads once serving.
`;

/** A start-up abandoned on SIGTERM may be waiting on something that cannot be cancelled (the shared Secret). */
const ABANDONED_STARTUP_EXIT_MS = 2000;

export async function runServe(argv: string[]): Promise<number> {
  const signals = catchServeSignals();
  try {
    return await serve(argv, signals);
  } finally {
    signals.dispose();
  }
}

async function serve(argv: string[], signals: ServeSignals): Promise<number> {
  const flags = readServeFlags(argv);
  if ("problem" in flags) return usageFailure("serve", flags.problem);
  const { options } = flags;
  // serve --workers: node:cluster starts each worker as this command with the same flags.
  if (cluster.isWorker) return serveAsWorker(options, signals);
  let settings: ServerSettings;
  try {
    settings = await loadServerSettings(options);
  } catch (e) {
    process.stderr.write(`imprimatur serve: ${errorText(e)}\n`);
    return 2;
  }
  // A kill -9 mid-write (a reload rewriting the webhook files, a certificate renewal) leaves a temporary file.
  const left = await removeLeftTemporaries(options.stateDir).catch(() => []);
  if (left.length > 0) process.stderr.write(`imprimatur serve: removed ${left.length} unfinished file(s) left in ${options.stateDir} by a previous run\n`);
  const webhookFiles = new WebhookConfigurationFiles(
    options.stateDir,
    webhookRules(settings.config, { policyCrds: options.policyCrds, podSecurity: settings.podSecurity !== undefined }),
  );
  const opened = new OpenedForServing();
  let app: App;
  try {
    app = await startServing(options, settings, signals, opened, { onPoliciesReloaded: (set) => webhookFiles.policiesReloaded(set) });
  } catch (e) {
    await opened.close();
    return startupFailure(e);
  }
  if (app.caPem) await writeWebhookConfiguration(app, app.caPem, options, webhookFiles);
  await serveUntilStopped(app, options.drainMs, signals);
  await opened.close();
  return 0;
}

/**
 * A worker of serve --workers: the same start-up as a server's, except what the primary does once for all (the policy
 * source, the certificate, the background scan, the webhook files, the metrics port); serves until the primary says
 * to drain (or a stop signal reaches the worker itself), and stops when the primary is gone.
 */
async function serveAsWorker(options: ServeOptions, signals: ServeSignals): Promise<number> {
  const primary = new PrimaryChannel(processChannel(), () => {
    process.stderr.write("imprimatur serve: worker: the primary process is gone; stopping\n");
    process.exit(1);
  });
  const opened = new OpenedForServing();
  let app: App;
  try {
    const settings = await loadServerSettings(options);
    app = await startServing(options, { ...settings, backgroundScan: undefined }, signals, opened, { primary });
  } catch (e) {
    primary.failed(errorText(e));
    await opened.close();
    primary.close();
    return e instanceof StartupStopped ? 0 : 2;
  }
  const stop = await Promise.race([new Promise<number | "diverged">((resolve) => primary.onDrain(resolve)), signals.stopped().then(() => options.drainMs)]);
  await app.close(stop === "diverged" ? options.drainMs : stop);
  await opened.close();
  primary.close();
  // A worker that diverged ends with an error: its primary starts another in its place.
  return stop === "diverged" ? 1 : 0;
}

/** The server's configuration (its file, with the flags laid over it) and what the flags turn on beside it. */
interface ServerSettings {
  config: ServerConfig;
  backgroundScan: BackgroundScanOptions | undefined;
  podSecurity: PodSecurityContext | undefined;
}

/** Reads the config file and the Pod Security configuration; throws for either, and for a flag laid over them. */
async function loadServerSettings(options: ServeOptions): Promise<ServerSettings> {
  // A deep copy: the flags laid over it change nested settings, and the shared default must stay as it is.
  const fromFile = options.configFile !== undefined ? await loadServerConfig(options.configFile) : structuredClone(DEFAULT_SERVER_CONFIG);
  const config = layConfigFlags(fromFile, options.configFlags);
  const backgroundScan = backgroundScanOptions(options.scan, podNamespace());
  const podSecurity = options.podSecurity ? await podSecurityContext(options.podSecurity.configFile) : undefined;
  return { config, backgroundScan, podSecurity };
}

/** What start-up opened, closed in this order when start-up fails or serving ends. */
class OpenedForServing {
  /** Files reread while serving: replacing them rotates the certificate, the client CA or the tokens. */
  certificateFiles: WatchedFiles<ServingPair> | undefined;
  callerFiles: WatchedCallerFiles | undefined;
  selfManagedTls: RunningSelfManagedTls | undefined;
  namespaceCache: NamespaceLabelCache | undefined;
  otherClusters: ConnectedClusters | undefined;
  policyResources: ReturnType<typeof policyResourceSource> | undefined;
  /** Other clusters' own policy resources, each read from its cluster (--policy-crds with --cluster-kubeconfig). */
  readonly clusterPolicyResources = new Map<string, ReturnType<typeof policyResourceSource>>();

  async close(): Promise<void> {
    this.certificateFiles?.close();
    this.callerFiles?.close();
    await this.selfManagedTls?.close();
    await this.namespaceCache?.close();
    await this.otherClusters?.close();
    await this.policyResources?.close();
    await Promise.all([...this.clusterPolicyResources.values()].map((r) => r.close()));
  }
}

/** The start-up steps in turn (a stop signal abandons the one waiting); what they open goes into `opened`, for the caller to close. */
async function startServing(
  options: ServeOptions,
  settings: ServerSettings,
  signals: ServeSignals,
  opened: OpenedForServing,
  role: { onPoliciesReloaded: (set: PolicySet) => Promise<void> | undefined } | { primary: PrimaryChannel },
): Promise<App> {
  if (signals.stopRequested) throw new StartupStopped(signals.stopRequested);
  // A worker reads no policy resources and keeps no certificate: its primary gives it both.
  const worker = "primary" in role;
  const { kube, namespaces } = await connectToOwnCluster({ ...options, policyCrds: options.policyCrds && !worker }, settings, signals, opened);
  const otherClusters = await connectToOtherClusters({ ...options, policyCrds: options.policyCrds && !worker }, signals, opened);
  const callers = await watchCallers(options.callers, options.clusters, opened);
  const certificate = worker ? {} : await startServingCertificate(options, kube, signals, opened);
  const appOptions: AppOptions = {
    policies: options.policies ?? EMBEDDED_POLICIES,
    // The source `check` and `test` read from the same --policies (src/policy/policy-set.ts).
    policySource: opened.policyResources?.source ?? policySetSource(options.policies === undefined ? undefined : [options.policies]),
    host: options.host,
    port: options.port,
    stateDir: options.stateDir,
    ...certificate,
    tlsHosts: options.tlsHosts,
    config: settings.config,
    ...(namespaces ? { namespaces } : {}),
    profiles: options.profiles,
    // With --policy-crds policies arrive through the API at any time: a fresh install starts with none.
    allowEmptyPolicies: options.allowEmptyPolicies || options.policyCrds,
    requirePolicies: options.requirePolicies,
    exceptionNamespaces: options.exceptionNamespaces,
    ...(kube ? { kube } : {}),
    clusters: otherClusters.connections,
    ...(opened.clusterPolicyResources.size > 0
      ? { clusterPolicySources: new Map([...opened.clusterPolicyResources].map(([name, r]) => [name, r.source])) }
      : {}),
    ...(await registryAccess(settings.config)),
    callers,
    ...(options.metricsPort !== undefined ? { metricsPort: options.metricsPort } : {}),
    ...("primary" in role ? { primary: role.primary } : { onPoliciesReloaded: role.onPoliciesReloaded, workers: options.workers }),
    ...(settings.backgroundScan ? { backgroundScan: settings.backgroundScan } : {}),
    ...(settings.podSecurity ? { podSecurity: settings.podSecurity } : {}),
  };
  return signals.during(startApp(appOptions), (late) => late.close());
}

/** The server's own cluster: its API, its policy resources (--policy-crds) and its namespaces' labels. */
async function connectToOwnCluster(
  options: ServeOptions,
  settings: ServerSettings,
  signals: ServeSignals,
  opened: OpenedForServing,
): Promise<{ kube: KubeClient | undefined; namespaces: NamespaceLabelSource | undefined }> {
  const namespacesFile = options.namespacesFile ?? settings.config.namespacesFile;
  const kubeconfig = options.kubeconfig ?? settings.config.kubeconfig;
  const kube = kubeconfig || process.env.KUBERNETES_SERVICE_HOST ? loadKubeClient(kubeconfig) : undefined;
  if (options.policyCrds) {
    if (!kube) throw new ServeFlagError("needs-kubernetes-api", "--policy-crds needs the Kubernetes API: give --kubeconfig, or run in a pod");
    const folder = options.policies ? new PolicyFolder(options.policies) : undefined;
    opened.policyResources = policyResourceSource(kube, {
      logger: startupLogger(),
      exceptionNamespaces: options.exceptionNamespaces,
      ...(folder ? { folder } : {}),
    });
  }
  let namespaces: NamespaceLabelSource | undefined;
  if (namespacesFile) namespaces = await signals.during(loadNamespacesFile(namespacesFile));
  else if (kube) {
    // Namespace labels from the API, kept current by a watch; startup waits for the first list.
    const namespaceCache = new NamespaceLabelCache(kube, { logger: startupLogger() });
    opened.namespaceCache = namespaceCache;
    await signals.during(namespaceCache.start());
    namespaces = namespaceCache;
  }
  // Pod Security Admission judges by the namespace's labels: without them every pod would be refused.
  if (settings.podSecurity && !namespaces)
    throw new ServeFlagError(
      "needs-namespace-labels",
      "--pod-security needs the namespaces' labels: give --kubeconfig (or run in a pod), or --namespaces FILE",
    );
  return { kube, namespaces };
}

/** The other clusters (--cluster-kubeconfig): their namespaces' labels, and with --policy-crds their own policy resources. */
async function connectToOtherClusters(options: ServeOptions, signals: ServeSignals, opened: OpenedForServing): Promise<ConnectedClusters> {
  const { home, files } = options.clusters;
  const otherClusters = await signals.during(connectClusters(home, files, startupLogger()), (late) => void late.close());
  opened.otherClusters = otherClusters;
  if (options.policyCrds)
    for (const [name, connection] of otherClusters.connections.others)
      if (connection.kube)
        opened.clusterPolicyResources.set(
          name,
          policyResourceSource(connection.kube, { logger: startupLogger().child({ cluster: name }), exceptionNamespaces: options.exceptionNamespaces }),
        );
  return otherClusters;
}

/** Who may call: the client CA's and the tokens' files, watched, and what the flags say about them. */
async function watchCallers(flags: CallerFlags, clusters: ServeOptions["clusters"], opened: OpenedForServing): Promise<CallerAuthOptions> {
  const callerFiles = await watchCallerFiles({ clientCa: flags.clientCa, tokens: flags.tokens }, startupLogger());
  opened.callerFiles = callerFiles;
  const warnUnreadable = (tokens: CallerTokens | undefined) => {
    const unknown = unreadableCallerClusters(tokens?.values() ?? [], clusters.home, clusters.files);
    if (unknown.length > 0)
      startupLogger().warn(
        { clusters: unknown, clusterName: clusters.home ?? null },
        "caller tokens: these callers' clusters are neither --cluster-name nor a --cluster-kubeconfig, so their reviews that read the cluster (namespace labels, pull secrets, break-glass) are refused",
      );
  };
  warnUnreadable(callerFiles.initial.tokens);
  callerFiles.updates.subscribe((next) => {
    if (next.tokens) warnUnreadable(next.tokens);
  });
  return {
    ...callerFiles.initial,
    updates: callerFiles.updates,
    allowUnauthenticated: flags.allowUnauthenticated,
    ...(flags.allowedNames ? { allowedNames: flags.allowedNames } : {}),
  };
}

/** The serving certificate from the shared Secret (--tls-secret) or from files (--tls-cert); neither: the app uses the state folder's. */
async function startServingCertificate(
  options: ServeOptions,
  kube: KubeClient | undefined,
  signals: ServeSignals,
  opened: OpenedForServing,
): Promise<Pick<AppOptions, "tls" | "tlsUpdates">> {
  // --tls-secret: the certificate comes from the shared Secret (created by the leader when empty), and is
  // swapped in without a restart when the leader rotates it.
  if (options.selfManagedTls) {
    const started = selfManagedTlsFromFlags(options.selfManagedTls, kube, options.tlsHosts, startupLogger(), signals.stopping);
    opened.selfManagedTls = await signals.during(started, (late) => late.close());
  }
  if (options.certificateFiles) opened.certificateFiles = await watchCertificateFiles(options.certificateFiles, startupLogger());
  // The two are alternatives (tlsSecretFlagProblem).
  if (opened.certificateFiles) return { tls: opened.certificateFiles.current(), tlsUpdates: opened.certificateFiles };
  if (opened.selfManagedTls)
    return { tls: { cert: opened.selfManagedTls.initial.cert, key: opened.selfManagedTls.initial.key }, tlsUpdates: opened.selfManagedTls.tls };
  return {};
}

/** How a start-up that never got to serving ends: 0 when a stop signal ended it, 2 when something failed. */
function startupFailure(e: unknown): number {
  if (e instanceof StartupStopped) {
    process.stderr.write(`imprimatur serve: ${e.message}: stopped before serving\n`);
    // The abandoned step may hold the process open (a wait that cannot be cancelled): exit regardless, soon.
    setTimeout(() => process.exit(0), ABANDONED_STARTUP_EXIT_MS).unref();
    return 0;
  }
  if (e instanceof PolicyLoadError) {
    process.stderr.write(`imprimatur serve: refusing to start: ${e.message}\n`);
    return 2;
  }
  process.stderr.write(`imprimatur serve: ${errorText(e)}\n`);
  return 2;
}

/** For the state folder's CA: the webhook configuration to apply, and what callers must bring when they authenticate. */
async function writeWebhookConfiguration(app: App, caPem: string, options: ServeOptions, webhookFiles: WebhookConfigurationFiles): Promise<void> {
  const baseUrl = options.url ?? `https://127.0.0.1:${app.port}`;
  await webhookFiles.write(baseUrl, caPem, app.engine.policies(), app.generatedCertificate, app.logger);
  // The printed kubeconfigs carry no credentials: said here, so a 401 does not come as a surprise.
  if (options.callers.clientCa || options.callers.tokens) {
    process.stderr.write(
      `Callers must authenticate${options.callers.allowUnauthenticated ? " (or are let in as unauthenticated)" : ""}: add kube-apiserver's client certificate or token to these kubeconfigs (docs/server.md, "Authenticated callers").\n`,
    );
  }
}

/** Serves until SIGTERM or SIGINT (SIGHUP reloads the policies), then drains for `drainMs` and closes the app. */
async function serveUntilStopped(app: App, drainMs: number, signals: ServeSignals): Promise<void> {
  signals.serving(() => void app.reload());
  app.logger.info({ signal: await signals.stopped() }, "shutting down");
  // Not ready at once; keep answering while endpoints stop routing here, then close the listener.
  await app.close(drainMs);
}

function startupLogger() {
  return pino({ name: "imprimatur", level: process.env.IMPRIMATUR_LOG_LEVEL ?? "info" });
}
