// Self-managed TLS for `serve --tls-secret NAMESPACE/NAME`: the CA and the serving certificate live in one Secret
// shared by every replica. Every replica reads the Secret and the webhooks' caBundle every sync interval and serves
// the Secret's certificate (swapped in without a restart) once the caBundle it reads back holds the CA that signed
// it (tls-serving-choice.ts); the leader (a Lease, src/kube/leader-election.ts) also creates and rotates what the
// Secret holds and writes the CA bundle into the webhook configurations, one step at a time as tls-rotation-plan.ts
// orders them. Every write carries the resourceVersion read, and the caBundle is written only while the Secret it
// came from is unchanged, so a stale leader loses the race instead of putting back an older bundle.
import { X509Certificate } from "node:crypto";
import type { Logger } from "pino";
import { describeApiError, hasStatus } from "../kube/api-requests.ts";
import type { KubeClient } from "../kube/kube-client.ts";
import { LeaderElector } from "../kube/leader-election.ts";
import { WebhookCaBundleClient, type WebhookCaBundles } from "../kube/webhook-ca-bundle.ts";
import { normalizeHosts } from "./tls-bootstrap.ts";
import { TlsError } from "./tls-error.ts";
import { contentsAfterStep, trustInPlace } from "./tls-secret-contents.ts";
import { chooseServingCertificate, fingerprintsInEveryBundle, observeTrustedCas, type CertificateState } from "./tls-serving-choice.ts";
import {
  bundleFingerprints,
  caCertificates,
  issuerOf,
  keyMatches,
  DEFAULT_TLS_ROTATION,
  formatTrustedSince,
  planTlsStep,
  rotationSettingsProblem,
  SECRET_KEYS,
  TRUSTED_SINCE_ANNOTATION,
  viewTlsSecret,
  type CaCertificate,
  type TlsRotationSettings,
  type TlsSecretView,
  type TlsStep,
} from "./tls-rotation-plan.ts";

export interface SecretName {
  namespace: string;
  name: string;
}

/** The Secret as the API sends it, as far as it is read here; written back whole (a PUT keeps what it does not name). */
interface SecretJson {
  metadata?: { resourceVersion?: string; labels?: Record<string, string>; annotations?: Record<string, string>; [field: string]: unknown };
  data?: Record<string, string>;
  [field: string]: unknown;
}

/** The certificate this replica serves, and the CAs that verify it. */
export interface ServingTls {
  cert: string;
  key: string;
  caBundle: string;
}

export interface SelfManagedTlsOptions {
  kube: KubeClient;
  secret: SecretName;
  webhooks: WebhookCaBundleClient;
  /** DNS names and IPs the serving certificate covers (localhost, 127.0.0.1 and ::1 are always added). */
  hosts: string[];
  /** Whether this replica may write (the Lease holder). */
  leader: { isLeader(): boolean };
  rotation?: TlsRotationSettings;
  /** How often the Secret is read (and, by the leader, reconciled); default 5 s. */
  syncIntervalMs?: number;
  logger: Logger;
  now?: () => number;
}

export const MANAGED_BY_LABEL = "app.kubernetes.io/managed-by";
const MANAGED_BY = "imprimatur";
/** Steps one leader round may take before it re-reads on the next tick (a full bootstrap takes four). */
const MAX_STEPS_PER_ROUND = 8;

/** `NAMESPACE/NAME` of --tls-secret; throws on anything else. */
export function parseSecretName(text: string): SecretName {
  const match = /^([a-z0-9]([-a-z0-9]*[a-z0-9])?)\/([a-z0-9]([-a-z0-9.]*[a-z0-9])?)$/.exec(text);
  if (!match) throw new TlsError("invalid-secret-name", `--tls-secret must be NAMESPACE/NAME (lowercase DNS names), got ${JSON.stringify(text)}`);
  return { namespace: match[1]!, name: match[3]! };
}

export class SelfManagedTls {
  private readonly kube: KubeClient;
  private readonly opts: SelfManagedTlsOptions & { rotation: TlsRotationSettings; syncIntervalMs: number; now: () => number };
  private serving: ServingTls | undefined;
  private servingNotAfter = 0;
  private readonly listeners = new Set<(tls: ServingTls) => void>();
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = false;
  private firstLoad: { promise: Promise<ServingTls>; resolve: (tls: ServingTls) => void };
  private warnedForeign = false;
  private inFlight = false;
  private again = false;
  /** Since when (local clock) each CA has been in every webhook's caBundle as last read; see tls-serving-choice.ts. */
  private trustedCas = new Map<string, number>();
  /** Those CAs' certificates. */
  private observedCas: CaCertificate[] = [];
  /** No webhook publishes a caBundle (no configuration installed): nothing to wait for. */
  private noCaBundles = true;
  /** Why the Secret's certificate is not served yet, and which one it is. */
  private heldBack: { cert: string; reason: string } | undefined;

  constructor(options: SelfManagedTlsOptions) {
    const rotation = options.rotation ?? DEFAULT_TLS_ROTATION;
    const problem = rotationSettingsProblem(rotation);
    if (problem !== undefined) throw new TlsError("invalid-rotation-settings", `TLS rotation settings: ${problem}`);
    normalizeHosts(options.hosts); // throws on a name that cannot be in a certificate
    this.kube = options.kube;
    this.opts = { ...options, rotation, syncIntervalMs: options.syncIntervalMs ?? 5_000, now: options.now ?? Date.now };
    let resolve!: (tls: ServingTls) => void;
    const promise = new Promise<ServingTls>((r) => (resolve = r));
    this.firstLoad = { promise, resolve };
  }

  /** Starts syncing every interval. */
  start(): void {
    if (this.running !== undefined || this.stopped) return;
    this.running = this.loop();
  }

  /** Resolves with the first usable serving certificate loaded from the Secret. */
  ready(): Promise<ServingTls> {
    return this.firstLoad.promise;
  }

  /** Why this replica cannot serve TLS yet (or any more), or undefined when it can. For /readyz. */
  notReady(): string | undefined {
    const held = this.heldBack ? ` (the Secret's certificate is not served: ${this.heldBack.reason})` : "";
    if (this.serving === undefined) return `waiting for the serving certificate in Secret ${this.secretName()}${held}`;
    if (this.servingNotAfter <= this.opts.now()) return `the serving certificate from Secret ${this.secretName()} has expired${held}`;
    return undefined;
  }

  current(): ServingTls | undefined {
    return this.serving;
  }

  /** Called with every new serving certificate (the HTTPS server swaps its secure context). */
  subscribe(listener: (tls: ServingTls) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  async close(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
  }

  /**
   * One round: read the Secret; as leader, bring it and the webhooks' caBundle up to date; read back what the
   * caBundle trusts; load the certificate if it is trusted.
   */
  async sync(): Promise<void> {
    let secret = await this.readSecret();
    if (this.opts.leader.isLeader()) secret = await this.reconcile(secret);
    this.observe(await this.opts.webhooks.read());
    if (secret !== undefined) this.load(secret);
  }

  /** Syncs now rather than at the next interval (this replica just became the leader). */
  syncSoon(): void {
    if (this.stopped || this.running === undefined) return;
    if (this.inFlight) {
      this.again = true;
      return;
    }
    clearTimeout(this.timer);
    this.running = this.loop();
  }

  private async loop(): Promise<void> {
    this.inFlight = true;
    try {
      await this.sync();
    } catch (err) {
      this.opts.logger.warn({ secret: this.secretName(), error: describeApiError(err) }, "self-managed TLS: sync failed; retrying");
    }
    this.inFlight = false;
    if (this.stopped) return;
    const delay = this.again ? 0 : this.opts.syncIntervalMs;
    this.again = false;
    this.timer = setTimeout(() => {
      this.running = this.loop();
    }, delay);
  }

  private async reconcile(initial: SecretJson | undefined): Promise<SecretJson | undefined> {
    let secret = initial;
    if (secret !== undefined && isForeign(secret)) {
      if (!this.warnedForeign)
        this.opts.logger.error(
          { secret: this.secretName() },
          `self-managed TLS: Secret ${this.secretName()} holds data and is not labelled ${MANAGED_BY_LABEL}=${MANAGED_BY}; refusing to overwrite it`,
        );
      this.warnedForeign = true;
      return secret;
    }
    for (let i = 0; i < MAX_STEPS_PER_ROUND; i++) {
      // Leadership is checked before every write: a replica that lost the Lease stops at once.
      if (!this.opts.leader.isLeader() || this.stopped) return secret;
      const data = decodeData(secret);
      const view = viewTlsSecret(data, secret?.metadata?.annotations?.[TRUSTED_SINCE_ANNOTATION]);
      const webhooks = await this.opts.webhooks.read();
      const now = this.opts.now();
      const step = planTlsStep({
        secret: view,
        webhookBundles: webhooks.bundles.map(bundleFingerprints),
        hosts: this.opts.hosts,
        now,
        settings: this.opts.rotation,
      });
      if (step.action === "wait") return secret;
      const next = await this.apply(step, secret, data, view, now, webhooks);
      if (next === "conflict") return await this.readSecret();
      secret = next;
    }
    return secret;
  }

  /** Does one step; returns the Secret as written (or as it stands), or "conflict" when someone else wrote first. */
  private async apply(
    step: Exclude<TlsStep, { action: "wait" }>,
    secret: SecretJson | undefined,
    data: Record<string, string>,
    view: TlsSecretView | undefined,
    now: number,
    webhooks: WebhookCaBundles,
  ): Promise<SecretJson | "conflict"> {
    const result = await contentsAfterStep(step, { data, trustedSince: view?.trustedSince ?? {} }, view, {
      now,
      settings: this.opts.rotation,
      hosts: this.opts.hosts,
      // A Secret made anew keeps the CAs the webhooks trust and the certificate served, so no replica serves an
      // untrusted one meanwhile and the switch to the new CA waits for the bundle that trusts it.
      ...(step.action === "create" ? { inPlace: trustInPlace(webhooks.bundles, this.serving, now) } : {}),
    });
    this.opts.logger.info(
      { secret: this.secretName(), configuration: this.opts.webhooks.configurationName, step: step.action },
      `self-managed TLS: ${result.summary}`,
    );
    if ("publish" in result) {
      // The bundle comes from the Secret as read: written only if that is still the Secret's version, checked
      // after the configurations were read (whose resourceVersions the writes carry). A leader that stalled here
      // and lost the Lease meanwhile must not put back the bundle of a Secret that was replaced.
      const planned = secret?.metadata?.resourceVersion;
      const stillCurrent = async () => (await this.readSecret())?.metadata?.resourceVersion === planned;
      try {
        if ((await this.opts.webhooks.write(result.publish, { stillCurrent })) === "stale") {
          this.opts.logger.warn(
            { secret: this.secretName(), configuration: this.opts.webhooks.configurationName },
            "self-managed TLS: the Secret changed since it was read; its bundle was not written",
          );
          return "conflict";
        }
      } catch (err) {
        if (hasStatus(err, 409)) return "conflict";
        throw err;
      }
      return secret!;
    }
    return this.writeSecret(secret, result.write.data, result.write.trustedSince);
  }

  private async writeSecret(
    existing: SecretJson | undefined,
    data: Record<string, string>,
    trustedSince: Record<string, number>,
  ): Promise<SecretJson | "conflict"> {
    const { namespace, name } = this.opts.secret;
    const secrets = `/api/v1/namespaces/${encodeURIComponent(namespace)}/secrets`;
    const encoded = Object.fromEntries(Object.entries(data).map(([k, v]) => [k, Buffer.from(v, "utf8").toString("base64")]));
    const annotations = { ...(existing?.metadata?.annotations ?? {}), [TRUSTED_SINCE_ANNOTATION]: formatTrustedSince(trustedSince) };
    const labels = { ...(existing?.metadata?.labels ?? {}), [MANAGED_BY_LABEL]: MANAGED_BY };
    try {
      if (existing === undefined) {
        return (await this.kube.request("POST", secrets, {
          body: { apiVersion: "v1", kind: "Secret", type: "kubernetes.io/tls", metadata: { name, namespace, labels, annotations }, data: encoded },
        })) as SecretJson;
      }
      // The type is immutable: an Opaque Secret created ahead (so RBAC can name it) stays Opaque.
      return (await this.kube.request("PUT", `${secrets}/${encodeURIComponent(name)}`, {
        body: { ...existing, metadata: { ...existing.metadata, labels, annotations }, data: encoded },
      })) as SecretJson;
    } catch (err) {
      if (hasStatus(err, 409)) return "conflict";
      throw err;
    }
  }

  private async readSecret(): Promise<SecretJson | undefined> {
    const { namespace, name } = this.opts.secret;
    return (await this.kube.read(`/api/v1/namespaces/${encodeURIComponent(namespace)}/secrets/${encodeURIComponent(name)}`)) as SecretJson | undefined;
  }

  /** Takes in what the webhooks' caBundle holds, as read back from the API. */
  private observe(webhooks: WebhookCaBundles): void {
    const bundles = webhooks.bundles.map(caCertificates);
    const every = fingerprintsInEveryBundle(bundles.map((b) => b.map((ca) => ca.fingerprint)));
    this.noCaBundles = every === undefined;
    this.trustedCas = observeTrustedCas(this.trustedCas, every ?? [], this.opts.now());
    this.observedCas = (bundles[0] ?? []).filter((ca) => this.trustedCas.has(ca.fingerprint));
  }

  /** A certificate and key as tls-serving-choice.ts judges them; throws on a certificate that cannot be read. */
  private certificateState(cert: string, key: string): CertificateState {
    const x = new X509Certificate(cert);
    const issuer = this.noCaBundles ? undefined : issuerOf(x, this.observedCas);
    return {
      notAfter: x.validToDate.getTime(),
      keyMatches: keyMatches(cert, key),
      trustedSince: this.noCaBundles ? -Infinity : issuer === undefined ? undefined : this.trustedCas.get(issuer),
    };
  }

  /**
   * Serves the Secret's certificate when it differs from the one served, is usable, and every webhook's caBundle
   * (as last read) trusts it — for long enough, while the one served still works.
   */
  private load(secret: SecretJson): void {
    const data = decodeData(secret);
    const cert = data[SECRET_KEYS.cert];
    const key = data[SECRET_KEYS.key];
    if (!cert || !key) return;
    if (this.serving !== undefined && this.serving.cert === cert && this.serving.key === key) {
      this.serving = { ...this.serving, caBundle: data[SECRET_KEYS.caCert] ?? "" };
      this.heldBack = undefined;
      return;
    }
    let candidate: CertificateState;
    try {
      candidate = this.certificateState(cert, key);
    } catch (err) {
      this.opts.logger.warn(
        { secret: this.secretName(), error: (err as Error).message },
        "self-managed TLS: the Secret's serving certificate is not usable; keeping the current one",
      );
      return;
    }
    const served = this.serving && this.certificateState(this.serving.cert, this.serving.key);
    const choice = chooseServingCertificate(served, candidate, this.opts.now(), this.opts.rotation.caBundlePropagationMs);
    if (choice.action === "keep") {
      if (this.heldBack?.cert !== cert || this.heldBack.reason !== choice.reason)
        this.opts.logger.info(
          { secret: this.secretName(), configuration: this.opts.webhooks.configurationName, reason: choice.reason },
          `self-managed TLS: the Secret's serving certificate is not served yet: ${choice.reason}`,
        );
      this.heldBack = { cert, reason: choice.reason };
      return;
    }
    this.heldBack = undefined;
    const notAfter = candidate.notAfter;
    const first = this.serving === undefined;
    this.serving = { cert, key, caBundle: data[SECRET_KEYS.caCert] ?? "" };
    this.servingNotAfter = notAfter;
    this.opts.logger.info(
      { secret: this.secretName(), notAfter: new Date(notAfter).toISOString() },
      first ? "self-managed TLS: serving certificate loaded" : "self-managed TLS: serving certificate replaced",
    );
    for (const listener of this.listeners) listener(this.serving);
    if (first) this.firstLoad.resolve(this.serving);
  }

  private secretName(): string {
    return `${this.opts.secret.namespace}/${this.opts.secret.name}`;
  }
}

function decodeData(secret: SecretJson | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(secret?.data ?? {})) out[k] = Buffer.from(v, "base64").toString("utf8");
  return out;
}

/** A Secret with data that Imprimatur did not write (e.g. one cert-manager manages) is never overwritten. */
function isForeign(secret: SecretJson): boolean {
  const hasData = Object.keys(secret.data ?? {}).length > 0;
  return hasData && secret.metadata?.labels?.[MANAGED_BY_LABEL] !== MANAGED_BY;
}

export interface SelfManagedTlsSetup {
  kube: KubeClient;
  secret: SecretName;
  /** Name of the Validating- and MutatingWebhookConfiguration whose caBundle is written. */
  webhookConfiguration: string;
  lease: { namespace: string; name: string; identity: string; durationMs?: number };
  hosts: string[];
  rotation?: TlsRotationSettings;
  syncIntervalMs?: number;
  logger: Logger;
  /** Aborted when the process is asked to stop while it waits for the first certificate. */
  stop?: AbortSignal;
}

export interface RunningSelfManagedTls {
  tls: SelfManagedTls;
  elector: LeaderElector;
  /** The first serving certificate, loaded from the Secret. */
  initial: ServingTls;
  /** Stops syncing and (when leading) hands the Lease back. */
  close(opts?: { release?: boolean }): Promise<void>;
}

/**
 * Starts leader election and the Secret sync, and waits for the first serving certificate (the leader creates it
 * when the Secret is empty; the others wait for it).
 */
export async function startSelfManagedTls(setup: SelfManagedTlsSetup): Promise<RunningSelfManagedTls> {
  const elector = new LeaderElector({
    kube: setup.kube,
    namespace: setup.lease.namespace,
    name: setup.lease.name,
    identity: setup.lease.identity,
    ...(setup.lease.durationMs !== undefined ? { leaseDurationMs: setup.lease.durationMs } : {}),
    logger: setup.logger,
  });
  const tls = new SelfManagedTls({
    kube: setup.kube,
    secret: setup.secret,
    webhooks: new WebhookCaBundleClient(setup.kube, setup.webhookConfiguration),
    hosts: setup.hosts,
    leader: elector,
    ...(setup.rotation ? { rotation: setup.rotation } : {}),
    ...(setup.syncIntervalMs !== undefined ? { syncIntervalMs: setup.syncIntervalMs } : {}),
    logger: setup.logger,
  });
  elector.onLeadershipChange((leading) => {
    if (leading) tls.syncSoon();
  });
  tls.start();
  elector.start();
  const close = async (opts: { release?: boolean } = {}) => {
    await tls.close();
    await elector.close(opts);
  };
  try {
    setup.logger.info(
      { secret: `${setup.secret.namespace}/${setup.secret.name}`, identity: setup.lease.identity },
      "self-managed TLS: waiting for the serving certificate",
    );
    const initial = await untilStopped(tls.ready(), setup.stop);
    return { tls, elector, initial, close };
  } catch (err) {
    // Stopped or failed before serving: the Lease is handed back (close's default), so that another replica
    // takes over at once rather than after it expires.
    await close();
    throw err;
  }
}

/** `step`, or a rejection with the signal's reason as soon as `stop` is aborted. */
function untilStopped<T>(step: Promise<T>, stop: AbortSignal | undefined): Promise<T> {
  if (!stop) return step;
  if (stop.aborted) return Promise.reject(stop.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(stop.reason);
    stop.addEventListener("abort", onAbort, { once: true });
    step.then(resolve, reject).finally(() => stop.removeEventListener("abort", onAbort));
  });
}
