// `imprimatur serve`: the HTTPS ImageReview backend (/imagereview), validating webhook (/validate) and
// tag→digest pinning webhook (/mutate).
import { mkdir, rm } from "node:fs/promises";
import { join, resolve } from "node:path";
import { pino } from "pino";
import { DEFAULT_SERVER_CONFIG, loadServerConfig, type ServerConfig } from "../config/server-config.ts";
import { loadNamespacesFile } from "../config/namespaces-file.ts";
import type { NamespaceLabelSource } from "../core/namespace-labels.ts";
import { loadRegistriesFile } from "../config/registries-file.ts";
import type { CredentialLookup } from "../credentials/credential.ts";
import { loadAuthFile } from "../credentials/docker-config.ts";
import { CredentialKeyring } from "../credentials/keyring.ts";
import { loadKubeConfig } from "../kube/kube-config.ts";
import { podNamespace } from "../kube/leader-election.ts";
import { backgroundScanOptions, SCAN_FLAG_USAGE, type BackgroundScanOptions } from "../scan/scan-flags.ts";
import { podSecurityContext } from "../policy/pod-security-context.ts";
import type { PodSecurityContext } from "../core/pod-security/psa-evaluate.ts";
import type { RegistrySettingsMap } from "../registry/registry-settings.ts";
import { NamespaceLabelCache } from "../kube/namespace-label-cache.ts";
import { policyResourceSource } from "../policy-resources/resource-watch.ts";
import { PolicyFolder } from "../policy/policy-source.ts";
import { PolicyLoadError } from "../policy/policy-error.ts";
import { policySetSource } from "../policy/policy-set.ts";
import { parseDuration } from "../core/duration.ts";
import { startApp } from "../server/app.ts";
import { selfManagedTlsFromFlags, tlsSecretFlagProblem } from "../tls/tls-secret-flags.ts";
import { clientCaAllowedNames } from "../caller-auth/client-ca-flags.ts";
import type { RunningSelfManagedTls } from "../tls/tls-secret-manager.ts";
import { watchCallerFiles, type WatchedCallerFiles } from "../caller-auth/caller-files.ts";
import { clusterKubeconfigs, connectClusters, type ConnectedClusters } from "../server/cluster-flags.ts";
import { watchCertificateFiles, type ServingPair } from "../tls/certificate-files.ts";
import type { WatchedFiles } from "../fs/file-reload.ts";
import {
  renderAdmissionConfiguration,
  renderImagePolicyKubeconfig,
  imagePathResources,
  renderMutatingWebhookConfiguration,
  renderValidatingWebhookConfiguration,
  type WebhookOptions,
} from "../server/webhook-manifests.ts";
import { policyCount, type PolicySet } from "../core/policy-kinds.ts";
import { policiesMutate } from "../core/image-policy/image-policy.ts";
import { mayMatchResource, type WebhookResource } from "../core/request-match/request-scope.ts";
import { writeFileAtomic } from "../fs/write-file-atomic.ts";
import { EMBEDDED_POLICIES, errorText, parseCommandArgs, usageFailure, UsageError } from "./args.ts";
import { catchServeSignals, StartupStopped, type ServeSignals } from "./serve-signals.ts";

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
${SCAN_FLAG_USAGE}  --drain DUR          on SIGTERM, answer /readyz with 503 and keep serving for this long before closing
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
  let values;
  let allowedNames: string[] | undefined;
  let clusterFiles: { home: string | undefined; files: ReadonlyMap<string, string> };
  try {
    ({ values } = parseCommandArgs(argv, {
      policies: { type: "string" },
      host: { type: "string", default: "0.0.0.0" },
      port: { type: "string", default: "8443" },
      "state-dir": { type: "string", default: ".state" },
      "tls-cert": { type: "string" },
      "tls-key": { type: "string" },
      "tls-san": { type: "string", multiple: true, default: [] },
      "tls-secret": { type: "string" },
      "webhook-configuration": { type: "string" },
      "leader-election-namespace": { type: "string" },
      "leader-election-id": { type: "string" },
      // Hidden, for tests: a shortened rotation timeline and sync interval (docs/tls.md).
      "tls-timeline": { type: "string" },
      "tls-sync-interval": { type: "string" },
      url: { type: "string" },
      config: { type: "string" },
      "fail-open": { type: "boolean" },
      "allow-ttl": { type: "string" },
      "deny-ttl": { type: "string" },
      "audit-log": { type: "string" },
      namespaces: { type: "string" },
      kubeconfig: { type: "string" },
      profile: { type: "string", multiple: true, default: [] },
      registries: { type: "string" },
      authfile: { type: "string" },
      "digest-mode": { type: "string" },
      "allow-empty": { type: "boolean" },
      "require-policies": { type: "boolean" },
      "exceptions-namespace": { type: "string", multiple: true, default: [] },
      "allow-empty-policies": { type: "boolean" },
      "policy-crds": { type: "boolean" },
      drain: { type: "string", default: "5s" },
      "client-ca": { type: "string" },
      "client-ca-allowed-names": { type: "string", multiple: true },
      "client-ca-any-name": { type: "boolean" },
      "caller-tokens": { type: "string" },
      "cluster-name": { type: "string" },
      "cluster-kubeconfig": { type: "string", multiple: true },
      "allow-unauthenticated": { type: "boolean" },
      "metrics-port": { type: "string" },
      "pod-security": { type: "boolean" },
      "pod-security-config": { type: "string" },
      "background-scan": { type: "boolean" },
      "scan-reports": { type: "string" },
      "scan-rate": { type: "string" },
      "scan-interval": { type: "string" },
      "scan-lease": { type: "string" },
      "scan-exclude-namespace": { type: "string", multiple: true },
      "scan-error-retry": { type: "string" },
    }));
    if (!((parseDuration(values.drain!) ?? -1) >= 0)) throw new UsageError(`--drain must be a duration such as 5s, got ${values.drain}`);
    if (values["digest-mode"] !== undefined && !["mutate", "record"].includes(values["digest-mode"]))
      throw new UsageError(`--digest-mode must be mutate or record, got ${values["digest-mode"]}`);
    if (!/^\d+$/.test(values.port!) || Number(values.port) > 65535) throw new UsageError(`--port must be a port number, got ${values.port}`);
    const metricsPort = values["metrics-port"];
    if (metricsPort !== undefined && (!/^\d+$/.test(metricsPort) || Number(metricsPort) > 65535))
      throw new UsageError(`--metrics-port must be a port number, got ${metricsPort}`);
    if (Boolean(values["tls-cert"]) !== Boolean(values["tls-key"])) throw new UsageError("--tls-cert and --tls-key go together");
    const tlsSecretProblem = tlsSecretFlagProblem(values, Boolean(values["tls-cert"]));
    if (tlsSecretProblem !== undefined) throw new UsageError(tlsSecretProblem);
    const callerNames = clientCaAllowedNames(values);
    if ("problem" in callerNames) throw new UsageError(callerNames.problem);
    allowedNames = callerNames.allowedNames;
    const clusterFlags = clusterKubeconfigs(values);
    if ("problem" in clusterFlags) throw new UsageError(clusterFlags.problem);
    clusterFiles = clusterFlags;
  } catch (e) {
    if (e instanceof UsageError) return usageFailure("serve", e.message);
    throw e;
  }

  let config: ServerConfig;
  let backgroundScan: BackgroundScanOptions | undefined;
  let podSecurity: PodSecurityContext | undefined;
  try {
    // A deep copy: flags below change nested settings, and the shared default must stay as it is.
    config = values.config ? await loadServerConfig(values.config) : structuredClone(DEFAULT_SERVER_CONFIG);
    if (values["fail-open"]) config.failOpen = true;
    for (const [flag, key] of [
      ["allow-ttl", "allowTtlMs"],
      ["deny-ttl", "denyTtlMs"],
    ] as const) {
      const raw = values[flag];
      if (raw === undefined) continue;
      const ms = parseDuration(raw);
      if (ms === undefined || ms < 0) throw new Error(`--${flag}: not a duration: ${raw}`);
      config[key] = ms;
    }
    if (values["audit-log"]) config.auditLog = resolve(values["audit-log"]);
    if (values.registries) config.registries = resolve(values.registries);
    if (values.authfile) config.authFile = resolve(values.authfile);
    if (values["digest-mode"]) config.digests.mode = values["digest-mode"] as "mutate" | "record";
    backgroundScan = backgroundScanOptions(values, podNamespace());
    if (values["pod-security"] || values["pod-security-config"]) podSecurity = await podSecurityContext(values["pod-security-config"]);
  } catch (e) {
    process.stderr.write(`imprimatur serve: ${errorText(e)}\n`);
    return 2;
  }

  const stateDir = resolve(values["state-dir"]!);
  // Webhook rules for resources that no policy's matchConstraints reach are left out, unless something else
  // reviews every pod (a remote backend) or policies may arrive later without a reload here (--policy-crds).
  // Pod Security Admission judges every pod and workload, whatever the policies are for.
  const narrowRules = config.backends.length === 0 && values["policy-crds"] !== true && !podSecurity;
  // The webhooks never call for kube-system (a cluster that cannot start its own pods cannot recover) nor for the
  // server's own namespace (its replicas must start while it is down).
  const ownNamespace = podNamespace();
  const excludeNamespaces = ["kube-system", ...(ownNamespace && ownNamespace !== "kube-system" ? [ownNamespace] : [])];
  const webhookOptions = (set: PolicySet): WebhookOptions => ({
    excludeNamespaces,
    customResources: [...config.podTemplates, ...imagePathResources(set.ImagePolicy.flatMap((p) => p.imagePaths ?? []))],
    ...(narrowRules && policyCount(set) > 0 ? { mayMatch: (r: WebhookResource) => mayMatchResource(set, r) } : {}),
    ...(podSecurity ? { namespaces: true } : {}),
  });
  // Set once the webhook configuration files are written: rewrites them when reloaded policies need other rules.
  let reloadedWebhookFiles: ((set: PolicySet) => Promise<void>) | undefined;
  let app;
  let namespaceCache: NamespaceLabelCache | undefined;
  let selfManagedTls: RunningSelfManagedTls | undefined;
  let policyResources: ReturnType<typeof policyResourceSource> | undefined;
  // Other clusters' own policy resources, each read from its cluster (--policy-crds with --cluster-kubeconfig).
  const clusterPolicyResources = new Map<string, ReturnType<typeof policyResourceSource>>();
  // Files reread while serving: replacing them rotates the certificate, the client CA or the tokens.
  let certificateFiles: WatchedFiles<ServingPair> | undefined;
  let callerFiles: WatchedCallerFiles | undefined;
  let otherClusters: ConnectedClusters | undefined;
  try {
    if (signals.stopRequested) throw new StartupStopped(signals.stopRequested);
    const namespacesFile = values.namespaces ?? config.namespacesFile;
    const kubeconfig = values.kubeconfig ?? config.kubeconfig;
    let namespaces: NamespaceLabelSource | undefined;
    const kube = kubeconfig || process.env.KUBERNETES_SERVICE_HOST ? loadKubeConfig(kubeconfig) : undefined;
    if (values["policy-crds"]) {
      if (!kube) throw new Error("--policy-crds needs the Kubernetes API: give --kubeconfig, or run in a pod");
      const folder = values.policies ? new PolicyFolder(values.policies) : undefined;
      policyResources = policyResourceSource(kube, {
        logger: startupLogger(),
        exceptionNamespaces: values["exceptions-namespace"]!,
        ...(folder ? { folder } : {}),
      });
    }
    if (namespacesFile) namespaces = await signals.during(loadNamespacesFile(namespacesFile));
    else if (kube) {
      // Namespace labels from the API, kept current by a watch; startup waits for the first list.
      namespaceCache = new NamespaceLabelCache(kube, { logger: startupLogger() });
      await signals.during(namespaceCache.start());
      namespaces = namespaceCache;
    }
    // Pod Security Admission judges by the namespace's labels: without them every pod would be refused.
    if (podSecurity && !namespaces) throw new Error("--pod-security needs the namespaces' labels: give --kubeconfig (or run in a pod), or --namespaces FILE");
    otherClusters = await signals.during(connectClusters(clusterFiles.home, clusterFiles.files, startupLogger()), (late) => void late.close());
    if (values["policy-crds"])
      for (const [name, connection] of otherClusters.connections.others)
        if (connection.kube)
          clusterPolicyResources.set(
            name,
            policyResourceSource(connection.kube, { logger: startupLogger().child({ cluster: name }), exceptionNamespaces: values["exceptions-namespace"]! }),
          );
    callerFiles = await watchCallerFiles({ clientCa: values["client-ca"], tokens: values["caller-tokens"] }, startupLogger());
    const callers = {
      ...callerFiles.initial,
      updates: callerFiles.updates,
      allowUnauthenticated: values["allow-unauthenticated"] === true,
      ...(allowedNames ? { allowedNames } : {}),
    };
    // --tls-secret: the certificate comes from the shared Secret (created by the leader when empty), and is
    // swapped in without a restart when the leader rotates it.
    selfManagedTls = values["tls-secret"]
      ? await signals.during(selfManagedTlsFromFlags(values, kube, values["tls-san"] ?? [], startupLogger(), signals.stopping), (late) => late.close())
      : undefined;
    if (values["tls-cert"]) certificateFiles = await watchCertificateFiles({ cert: values["tls-cert"], key: values["tls-key"]! }, startupLogger());
    const tls = certificateFiles
      ? certificateFiles.current()
      : selfManagedTls
        ? { cert: selfManagedTls.initial.cert, key: selfManagedTls.initial.key }
        : undefined;
    app = await signals.during(
      startApp({
        policies: values.policies ?? EMBEDDED_POLICIES,
        // The source `check` and `test` read from the same --policies (src/policy/policy-set.ts).
        policySource: policyResources?.source ?? policySetSource(values.policies === undefined ? undefined : [values.policies]),
        host: values.host!,
        port: Number(values.port),
        stateDir,
        ...(tls ? { tls } : {}),
        tlsHosts: values["tls-san"] ?? [],
        config,
        ...(namespaces ? { namespaces } : {}),
        profiles: values.profile ?? [],
        // With --policy-crds policies arrive through the API at any time: a fresh install starts with none.
        allowEmptyPolicies: values["allow-empty"] === true || values["allow-empty-policies"] === true || values["policy-crds"] === true,
        requirePolicies: values["require-policies"] === true,
        exceptionNamespaces: values["exceptions-namespace"]!,
        ...(kube ? { kube } : {}),
        clusters: otherClusters.connections,
        ...(clusterPolicyResources.size > 0 ? { clusterPolicySources: new Map([...clusterPolicyResources].map(([name, r]) => [name, r.source])) } : {}),
        ...(await registryAccess(config)),
        ...(selfManagedTls ? { tlsUpdates: selfManagedTls.tls } : certificateFiles ? { tlsUpdates: certificateFiles } : {}),
        callers,
        ...(values["metrics-port"] !== undefined ? { metricsPort: Number(values["metrics-port"]) } : {}),
        onPoliciesReloaded: (set) => reloadedWebhookFiles?.(set),
        ...(backgroundScan ? { backgroundScan } : {}),
        ...(podSecurity ? { podSecurity } : {}),
      }),
      (late) => late.close(),
    );
  } catch (e) {
    certificateFiles?.close();
    callerFiles?.close();
    await selfManagedTls?.close();
    await namespaceCache?.close();
    await otherClusters?.close();
    await policyResources?.close();
    await Promise.all([...clusterPolicyResources.values()].map((r) => r.close()));
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

  if (app.caPem) {
    // Custom resources the webhooks must see: pod templates from the config, image locations from the policies.
    const initialSet = app.engine.policies();
    const generated = webhookConfigurationFiles(stateDir, values.url ?? `https://127.0.0.1:${app.port}`, app.caPem, webhookOptions(initialSet), initialSet);
    await printWebhookConfiguration(stateDir, generated, app.caPem, app.generatedCertificate);
    // What the webhooks must see changes with the policies (matchConstraints, imagePaths): the files are rewritten,
    // and the operator told to apply them again, since the apiserver keeps the configuration it was given.
    reloadedWebhookFiles = async (set) => {
      const next = webhookConfigurationFiles(stateDir, generated.baseUrl, generated.caPem, webhookOptions(set), set);
      const changed = (["validating-webhook.yaml", "mutating-webhook.yaml"] as const).filter((f) => next.files[f] !== generated.files[f]);
      if (changed.length === 0) return;
      for (const f of changed) await writeOrRemove(join(stateDir, f), next.files[f]);
      generated.files = next.files;
      const written = changed.filter((f) => next.files[f] !== undefined);
      if (written.length > 0)
        app?.logger.warn(
          { files: written.map((f) => join(stateDir, f)) },
          "the reloaded policies need other webhook rules: apply the rewritten configuration again (kubectl apply -f FILE), or the apiserver keeps sending what it sent before",
        );
      if (next.files["mutating-webhook.yaml"] === undefined)
        app?.logger.warn(
          { file: join(stateDir, "mutating-webhook.yaml") },
          "no reloaded policy pins or verifies images any more: the mutating webhook is not needed (kubectl delete mutatingwebhookconfiguration imprimatur)",
        );
    };
    // The printed kubeconfigs carry no credentials: said here, so a 401 does not come as a surprise.
    if (values["client-ca"] || values["caller-tokens"]) {
      process.stderr.write(
        `Callers must authenticate${values["allow-unauthenticated"] ? " (or are let in as unauthenticated)" : ""}: add kube-apiserver's client certificate or token to these kubeconfigs (docs/server.md, "Authenticated callers").\n`,
      );
    }
  }

  signals.serving(() => void app.reload());
  app.logger.info({ signal: await signals.stopped() }, "shutting down");
  // Not ready at once; keep answering while endpoints stop routing here, then close the listener.
  await app.close(parseDuration(values.drain!)!);
  certificateFiles?.close();
  callerFiles?.close();
  await selfManagedTls?.close();
  await namespaceCache?.close();
  await otherClusters?.close();
  await policyResources?.close();
  await Promise.all([...clusterPolicyResources.values()].map((r) => r.close()));
  return 0;
}

/** Generated webhook configurations and the ImagePolicyWebhook files, by file name. */
interface WebhookConfigurationFiles {
  baseUrl: string;
  caPem: string;
  files: Record<"validating-webhook.yaml" | "imagepolicy-kubeconfig.yaml" | "admission-configuration.yaml", string> & {
    /** Absent when no policy pins or verifies images: a mutating webhook would change nothing, and only add a way to fail. */
    "mutating-webhook.yaml"?: string;
  };
}

function webhookConfigurationFiles(stateDir: string, baseUrl: string, caPem: string, options: WebhookOptions, set: PolicySet): WebhookConfigurationFiles {
  const endpoint = { baseUrl, caPem };
  return {
    baseUrl,
    caPem,
    files: {
      "validating-webhook.yaml": renderValidatingWebhookConfiguration(endpoint, options),
      ...(policiesMutate(set.ImagePolicy) ? { "mutating-webhook.yaml": renderMutatingWebhookConfiguration(endpoint, options) } : {}),
      "imagepolicy-kubeconfig.yaml": renderImagePolicyKubeconfig(endpoint),
      "admission-configuration.yaml": renderAdmissionConfiguration({ kubeconfigPath: join(stateDir, "imagepolicy-kubeconfig.yaml") }),
    },
  };
}

/** Writes `text` to `path`, or removes the file when there is none (a configuration no longer generated). */
async function writeOrRemove(path: string, text: string | undefined): Promise<void> {
  if (text === undefined) await rm(path, { force: true });
  else await writeFileAtomic(path, text, 0o600);
}

/** Writes the ready-to-apply configuration into the state folder and prints where it is, with the caBundle. */
async function printWebhookConfiguration(stateDir: string, generated: WebhookConfigurationFiles, caPem: string, created: boolean) {
  await mkdir(stateDir, { recursive: true });
  const { files, baseUrl } = generated;
  for (const name of ["validating-webhook.yaml", "mutating-webhook.yaml", "imagepolicy-kubeconfig.yaml", "admission-configuration.yaml"] as const)
    await writeOrRemove(join(stateDir, name), files[name]);
  const caBundle = Buffer.from(caPem).toString("base64");
  const mutating = join(stateDir, "mutating-webhook.yaml");
  process.stderr.write(
    [
      created ? `Created a self-signed CA and serving certificate in ${stateDir} (ca.crt).` : `Using the CA in ${stateDir}/ca.crt.`,
      `caBundle: ${caBundle}`,
      `Webhook configuration for ${baseUrl} (kubectl apply -f ${join(stateDir, "validating-webhook.yaml")}):`,
      "---",
      files["validating-webhook.yaml"].trimEnd(),
      "---",
      files["mutating-webhook.yaml"] !== undefined
        ? `Tag→digest pinning and verified digests (digestMutate and attestor rules): kubectl apply -f ${mutating}`
        : "No policy pins or verifies images: no mutating webhook is needed (none written).",
      `ImagePolicyWebhook: --admission-control-config-file=${join(stateDir, "admission-configuration.yaml")} (kubeconfig: ${join(stateDir, "imagepolicy-kubeconfig.yaml")})`,
      "",
    ].join("\n"),
  );
}

/** Registry settings and the server's own credentials, from the files named in the config or flags. */
export async function registryAccess(opts: {
  registries?: string;
  authFile?: string;
}): Promise<{ registries?: RegistrySettingsMap; staticCredentials?: CredentialLookup }> {
  const registries = opts.registries ? await loadRegistriesFile(opts.registries) : undefined;
  let staticCredentials: CredentialLookup | undefined;
  if (opts.authFile) {
    const parsed = await loadAuthFile(opts.authFile);
    for (const problem of parsed.problems) process.stderr.write(`imprimatur: ${problem}\n`);
    staticCredentials = CredentialKeyring.of(parsed.entries).lookup;
  }
  return { ...(registries ? { registries } : {}), ...(staticCredentials ? { staticCredentials } : {}) };
}

function startupLogger() {
  return pino({ name: "imprimatur", level: process.env.IMPRIMATUR_LOG_LEVEL ?? "info" });
}
