// A worker's side of `serve --workers`: what it learns from the primary (the policies, the certificate, when to
// stop) and asks of it (verification claims, every process's metrics), over node:cluster's IPC channel. A worker
// whose primary is gone (the channel closed) stops: it must not go on serving with a set nobody updates.
import { X509Certificate } from "node:crypto";
import type { Claim, SharedResult, SharedVerifications, VerificationResult } from "../verification/image-verifier.ts";
import { SnapshotPolicySource, type PolicySnapshot } from "./policy-snapshot.ts";
import { isImprimaturMessage, type TlsPair, type ToPrimary, type ToWorker } from "./worker-messages.ts";

/** The process's channel to its primary (node:cluster's, on `process`). */
export interface ChannelEnds {
  send(message: ToPrimary): void;
  onMessage(listener: (message: unknown) => void): void;
  onDisconnect(listener: () => void): void;
  /** Closes the channel (an open one keeps the process running). */
  disconnect(): void;
}

export function processChannel(): ChannelEnds {
  return {
    send: (message) => {
      if (process.connected) process.send?.(message);
    },
    onMessage: (listener) => void process.on("message", listener),
    onDisconnect: (listener) => void process.on("disconnect", listener),
    disconnect: () => {
      if (process.connected) process.disconnect?.();
    },
  };
}

/** Also what the HTTPS server takes as its certificate's updates (subscribe, notReady: src/server/https-server.ts's TlsUpdates). */
export class PrimaryChannel implements SharedVerifications {
  private readonly ends: ChannelEnds;
  private source: SnapshotPolicySource | undefined;
  private tls: TlsPair | undefined;
  private readonly tlsListeners = new Set<(tls: TlsPair) => void>();
  private readonly firstPolicies: Promise<void>;
  /** The newest snapshot received before the source was made. */
  private latest: PolicySnapshot | undefined;
  private nextId = 1;
  private readonly claims = new Map<number, (answer: SharedResult | { verify: true }) => void>();
  private readonly metricsAsked = new Map<number, (text: string) => void>();
  private drainListener: ((drainMs: number | "diverged") => void) | undefined;
  private ownMetrics: (() => Promise<unknown[]>) | undefined;
  private disconnected = false;
  private closing = false;
  /** The certificate's expiry (ms), read once per certificate. */
  private notAfter: number | undefined;

  constructor(ends: ChannelEnds, onPrimaryGone: () => void) {
    this.ends = ends;
    let first!: () => void;
    this.firstPolicies = new Promise((resolve) => (first = resolve));
    ends.onMessage((message) => {
      if (isImprimaturMessage<ToWorker>(message)) this.received(message, first);
    });
    ends.onDisconnect(() => {
      this.disconnected = true;
      // Claims and metrics asked for will get no answer: each verifies for itself, metrics say why they are missing.
      for (const answer of this.claims.values()) answer({ verify: true });
      this.claims.clear();
      for (const answer of this.metricsAsked.values()) answer("# the primary process is gone\n");
      this.metricsAsked.clear();
      if (!this.closing) onPrimaryGone();
    });
  }

  /** The policies the primary put in force, as a source the worker's app loads (and reloads when they change). */
  async policySource(): Promise<SnapshotPolicySource> {
    await this.firstPolicies;
    if (!this.source) {
      // firstPolicies resolves only once a snapshot has arrived.
      if (!this.latest) throw new Error("no policies from the primary");
      this.source = new SnapshotPolicySource(this.latest);
    }
    return this.source;
  }

  /** The certificate the primary gave; it sends one before the first policies (undefined until then). */
  certificate(): TlsPair | undefined {
    return this.tls;
  }

  /** Why the certificate cannot be served: none from the primary yet, or expired (then this worker takes no traffic). */
  notReady(): string | undefined {
    if (!this.tls) return "waiting for the serving certificate from the primary process";
    this.notAfter ??= new X509Certificate(this.tls.cert).validToDate.getTime();
    return this.notAfter <= Date.now() ? "the serving certificate has expired" : undefined;
  }

  subscribe(listener: (tls: TlsPair) => void): () => void {
    this.tlsListeners.add(listener);
    return () => this.tlsListeners.delete(listener);
  }

  /**
   * Called once when the worker is to stop: with how long to keep answering when the primary says so, or
   * "diverged" when the worker could not load the primary's policies (diverged()).
   */
  onDrain(listener: (drainMs: number | "diverged") => void): void {
    this.drainListener = listener;
  }

  /** This worker could not load the set the primary put in force: the primary is told, and the worker stops. */
  diverged(reason: string): void {
    this.ends.send({ imprimatur: "diverged", reason });
    this.drainListener?.("diverged");
    this.drainListener = undefined;
  }

  /** Where the primary's requests for this worker's own metrics are answered from (its registry's JSON). */
  answerMetricsFrom(ownMetrics: () => Promise<unknown[]>): void {
    this.ownMetrics = ownMetrics;
  }

  /** The worker has stopped serving: the channel closes, so that the process can exit. */
  close(): void {
    this.closing = true;
    this.ends.disconnect();
  }

  serving(port: number): void {
    this.ends.send({ imprimatur: "serving", port });
  }

  failed(reason: string): void {
    this.ends.send({ imprimatur: "failed", reason });
  }

  claim(key: string): Promise<Claim> {
    if (this.disconnected) return Promise.resolve({ verify: () => undefined });
    const id = this.nextId++;
    return new Promise<SharedResult | { verify: true }>((resolve) => {
      this.claims.set(id, resolve);
      this.ends.send({ imprimatur: "claim", id, key });
    }).then((answer) => {
      if ("result" in answer) return answer;
      let settled = false;
      return {
        verify: (result: VerificationResult | undefined, keepMs?: number) => {
          if (settled) return;
          settled = true;
          this.ends.send({ imprimatur: "settle", key, ...(result ? { result } : {}), ...(keepMs !== undefined ? { keepMs } : {}) });
        },
      };
    });
  }

  /** Every process's metrics, from the primary. */
  metricsText(): Promise<string> {
    if (this.disconnected) return Promise.resolve("# the primary process is gone\n");
    const id = this.nextId++;
    return new Promise((resolve) => {
      this.metricsAsked.set(id, resolve);
      this.ends.send({ imprimatur: "metrics?", id });
    });
  }

  private received(message: ToWorker, first: () => void): void {
    switch (message.imprimatur) {
      case "policies":
        if (this.source) this.source.replace(message.snapshot);
        else if (!this.latest || message.snapshot.version > this.latest.version) {
          this.latest = message.snapshot;
          first();
        }
        return;
      case "tls":
        this.tls = message.tls;
        this.notAfter = undefined;
        for (const listener of this.tlsListeners) listener(message.tls);
        return;
      case "claimed":
        this.claims.get(message.id)?.(message.answer);
        this.claims.delete(message.id);
        return;
      case "metrics":
        this.metricsAsked.get(message.id)?.(message.text);
        this.metricsAsked.delete(message.id);
        return;
      case "own-metrics?": {
        const id = message.id;
        void (this.ownMetrics?.() ?? Promise.resolve([])).then(
          (metrics) => this.ends.send({ imprimatur: "own-metrics", id, metrics }),
          () => this.ends.send({ imprimatur: "own-metrics", id, metrics: [] }),
        );
        return;
      }
      case "drain":
        this.drainListener?.(message.drainMs);
        this.drainListener = undefined;
        return;
    }
  }
}
