// Leader election on a coordination.k8s.io/v1 Lease, the way client-go's leaderelection package does it: the
// holder renews `renewTime` every retry period; another candidate takes the Lease over only when it has seen no
// change to it for a whole lease duration (measured on its own clock, so clock skew between pods does not matter),
// or when the holder released it. Every write carries the resourceVersion it read, so two candidates racing for
// the same Lease cannot both win. Used for the replica that writes the TLS Secret and the webhooks' caBundle.
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { hostname } from "node:os";
import type { Logger } from "pino";
import { describeApiError, hasStatus } from "./api-requests.ts";
import type { KubeClient } from "./kube-client.ts";
import { KubeError } from "./kube-error.ts";

export interface LeaderElectionOptions {
  kube: KubeClient;
  namespace: string;
  /** The Lease's name. */
  name: string;
  /** This candidate's holderIdentity (the pod name). */
  identity: string;
  /** How long a Lease nobody renews stays with its holder (default 15 s). */
  leaseDurationMs?: number;
  /** How long the leader keeps acting without a successful renewal (default 10 s, below the lease duration). */
  renewDeadlineMs?: number;
  /** How often to renew, or to try to acquire (default 5 s). */
  retryPeriodMs?: number;
  logger: Logger;
  /** Clock, for tests. */
  now?: () => number;
}

/** What the Lease says, reduced to what the decision needs. */
export interface LeaseRecord {
  holderIdentity: string | undefined;
  leaseDurationSeconds: number | undefined;
  resourceVersion: string | undefined;
}

/** When a candidate last saw the Lease change: its resourceVersion and the local time of that observation. */
export interface LeaseObservation {
  resourceVersion: string | undefined;
  at: number;
}

export type LeaseStep =
  { action: "create" } | { action: "renew" } | { action: "take-over"; reason: "released" | "expired" } | { action: "follow"; holder: string };

/**
 * The next step of a candidate, given the Lease it just read (undefined: none exists), when it first saw that
 * version of it, and the time. Pure: the elector does the writing.
 */
export function planLeaseStep(
  lease: LeaseRecord | undefined,
  identity: string,
  observation: LeaseObservation,
  now: number,
  defaultDurationMs: number,
): LeaseStep {
  if (lease === undefined) return { action: "create" };
  const holder = lease.holderIdentity ?? "";
  if (holder === identity) return { action: "renew" };
  if (holder === "") return { action: "take-over", reason: "released" };
  const durationMs = lease.leaseDurationSeconds !== undefined && lease.leaseDurationSeconds > 0 ? lease.leaseDurationSeconds * 1000 : defaultDurationMs;
  // Expiry is judged from when this candidate saw the Lease last change, not from renewTime: the holder's clock
  // may differ from ours.
  if (observation.at + durationMs <= now) return { action: "take-over", reason: "expired" };
  return { action: "follow", holder };
}

/** Advances the observation: a new resourceVersion restarts the clock. */
export function observeLease(previous: LeaseObservation | undefined, resourceVersion: string | undefined, now: number): LeaseObservation {
  if (previous !== undefined && previous.resourceVersion === resourceVersion) return previous;
  return { resourceVersion, at: now };
}

/** The pod's name (POD_NAME from the downward API), else the hostname with a suffix of this process's. */
export function defaultCandidateIdentity(): string {
  return process.env.POD_NAME || `${hostname()}_${PROCESS_SUFFIX}`;
}

// Outside a pod (no POD_NAME), two processes on one host share its name: as one identity, both would take the
// Lease as theirs and lead at once. Each process is a candidate of its own, as client-go's hostname_uuid is.
const PROCESS_SUFFIX = randomUUID().slice(0, 8);

const SERVICE_ACCOUNT_NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

/** The pod's namespace (POD_NAMESPACE, else the service account's namespace file), or undefined outside a pod. */
export function podNamespace(): string | undefined {
  if (process.env.POD_NAMESPACE) return process.env.POD_NAMESPACE;
  try {
    const text = readFileSync(SERVICE_ACCOUNT_NAMESPACE_FILE, "utf8").trim();
    return text === "" ? undefined : text;
  } catch {
    return undefined;
  }
}

type LeadershipListener = (leading: boolean) => void;

/** A coordination.k8s.io/v1 Lease as read; written back whole, with its spec changed. */
interface Lease {
  metadata?: { resourceVersion?: string } & Record<string, unknown>;
  spec?: {
    holderIdentity?: string;
    leaseDurationSeconds?: number;
    acquireTime?: string;
    renewTime?: string;
    leaseTransitions?: number;
  } & Record<string, unknown>;
}

/** A MicroTime as the API takes it: RFC 3339 with six fractional digits. */
export function microTime(ms: number): string {
  return new Date(ms).toISOString().replace(/Z$/, "000Z");
}

export class LeaderElector {
  private readonly kube: KubeClient;
  private readonly opts: Required<Omit<LeaderElectionOptions, "kube" | "logger" | "now">> & { logger: Logger; now: () => number };
  private observation: LeaseObservation | undefined;
  private leading = false;
  private lastRenewal = 0;
  private holder: string | undefined;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = false;
  private readonly listeners = new Set<LeadershipListener>();

  constructor(options: LeaderElectionOptions) {
    const leaseDurationMs = options.leaseDurationMs ?? 15_000;
    const renewDeadlineMs = options.renewDeadlineMs ?? Math.round((leaseDurationMs * 2) / 3);
    const retryPeriodMs = options.retryPeriodMs ?? Math.round(leaseDurationMs / 3);
    if (!(leaseDurationMs > renewDeadlineMs && renewDeadlineMs > retryPeriodMs && retryPeriodMs > 0))
      throw new KubeError("invalid-lease-timing", "leader election needs lease duration > renew deadline > retry period > 0");
    this.kube = options.kube;
    this.opts = {
      namespace: options.namespace,
      name: options.name,
      identity: options.identity,
      leaseDurationMs,
      renewDeadlineMs,
      retryPeriodMs,
      logger: options.logger,
      now: options.now ?? Date.now,
    };
  }

  /** Starts trying to acquire, then renewing, every retry period. */
  start(): void {
    if (this.running !== undefined || this.stopped) return;
    this.running = this.tick();
  }

  isLeader(): boolean {
    return this.leading && this.opts.now() - this.lastRenewal < this.opts.renewDeadlineMs;
  }

  /** The holder last seen (this candidate's identity when it leads). */
  currentHolder(): string | undefined {
    return this.holder;
  }

  get identity(): string {
    return this.opts.identity;
  }

  /** Called with true when this candidate starts leading, false when it stops. Returns the unsubscribe. */
  onLeadershipChange(listener: LeadershipListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Stops; with `release` (the default) a leader hands the Lease back so another candidate takes over at once. */
  async close(opts: { release?: boolean } = {}): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
    if (this.leading && opts.release !== false) await this.release();
    this.setLeading(false);
  }

  private async tick(): Promise<void> {
    try {
      await this.tryAcquireOrRenew();
    } catch (err) {
      this.opts.logger.warn({ lease: this.leaseName(), error: describeApiError(err) }, "leader election: cannot read or write the Lease");
    }
    // Without a renewal in time the leader steps down, so that it stops writing before another can take over.
    if (this.leading && !this.isLeader()) {
      this.opts.logger.warn({ lease: this.leaseName() }, "leader election: renewal deadline passed, stepping down");
      this.setLeading(false);
    }
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.running = this.tick();
    }, this.opts.retryPeriodMs);
  }

  private async tryAcquireOrRenew(): Promise<void> {
    const { namespace, name, identity } = this.opts;
    const lease = (await this.kube.read(this.leasePath())) as Lease | undefined;
    const now = this.opts.now();
    const record = lease
      ? { holderIdentity: lease.spec?.holderIdentity, leaseDurationSeconds: lease.spec?.leaseDurationSeconds, resourceVersion: lease.metadata?.resourceVersion }
      : undefined;
    this.observation = observeLease(this.observation, record?.resourceVersion, now);
    const step = planLeaseStep(record, identity, this.observation, now, this.opts.leaseDurationMs);
    if (step.action === "follow") {
      this.holder = step.holder;
      this.setLeading(false);
      return;
    }
    const seconds = Math.max(1, Math.round(this.opts.leaseDurationMs / 1000));
    const stamp = microTime(now);
    try {
      if (step.action === "create") {
        await this.kube.request("POST", this.leasesPath(), {
          body: {
            apiVersion: "coordination.k8s.io/v1",
            kind: "Lease",
            metadata: { name, namespace },
            spec: { holderIdentity: identity, leaseDurationSeconds: seconds, acquireTime: stamp, renewTime: stamp, leaseTransitions: 0 },
          },
        });
      } else {
        const spec = lease!.spec ?? {};
        const takingOver = step.action === "take-over";
        await this.kube.request("PUT", this.leasePath(), {
          body: {
            ...lease!,
            spec: {
              ...spec,
              holderIdentity: identity,
              leaseDurationSeconds: seconds,
              renewTime: stamp,
              acquireTime: takingOver ? stamp : (spec.acquireTime ?? stamp),
              leaseTransitions: (spec.leaseTransitions ?? 0) + (takingOver ? 1 : 0),
            },
          },
        });
        if (takingOver)
          this.opts.logger.info({ lease: this.leaseName(), previous: spec.holderIdentity, reason: step.reason }, "leader election: took over the Lease");
      }
    } catch (err) {
      // 409: another candidate wrote first (the resourceVersion moved on); the next read tells who leads.
      if (hasStatus(err, 409)) return;
      throw err;
    }
    this.lastRenewal = now;
    this.holder = identity;
    this.setLeading(true);
  }

  private async release(): Promise<void> {
    const { identity } = this.opts;
    try {
      // A GET, not read(): a Lease gone is a release that could not be made, and logged as one.
      const lease = (await this.kube.request("GET", this.leasePath())) as Lease;
      if (lease.spec?.holderIdentity !== identity) return;
      await this.kube.request("PUT", this.leasePath(), {
        body: { ...lease, spec: { ...lease.spec, holderIdentity: "", leaseDurationSeconds: 1, renewTime: microTime(this.opts.now()) } },
      });
      this.opts.logger.info({ lease: this.leaseName() }, "leader election: released the Lease");
    } catch (err) {
      this.opts.logger.warn({ lease: this.leaseName(), error: describeApiError(err) }, "leader election: could not release the Lease; it expires on its own");
    }
  }

  private setLeading(leading: boolean): void {
    if (leading === this.leading) return;
    this.leading = leading;
    if (leading) this.opts.logger.info({ lease: this.leaseName(), identity: this.opts.identity }, "leader election: leading");
    else this.opts.logger.info({ lease: this.leaseName(), identity: this.opts.identity }, "leader election: not leading");
    for (const listener of this.listeners) listener(leading);
  }

  private leaseName(): string {
    return `${this.opts.namespace}/${this.opts.name}`;
  }

  private leasesPath(): string {
    return `/apis/coordination.k8s.io/v1/namespaces/${encodeURIComponent(this.opts.namespace)}/leases`;
  }

  private leasePath(): string {
    return `${this.leasesPath()}/${encodeURIComponent(this.opts.name)}`;
  }
}
