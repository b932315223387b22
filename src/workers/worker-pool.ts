// The primary's side of `serve --workers N`: N worker processes (node:cluster) sharing its HTTPS port, each judging
// with the policies and certificate the primary gives it. The primary keeps what must be done once: reading the
// policies (and writing their statuses), the background scan, the certificate kept in a Secret, the webhook files,
// the shared verification results (shared-verifications.ts) and /metrics of every process. A worker that exits
// while serving is started again (after a pause that doubles up to 30 s while they keep failing); a stop drains
// every worker, then waits for them.
import cluster, { type Worker } from "node:cluster";
import type { Logger } from "pino";
import { ImprimaturError } from "../errors/imprimatur-error.ts";
import type { PolicySnapshot } from "./policy-snapshot.ts";
import type { VerificationBroker } from "./shared-verifications.ts";
import { isImprimaturMessage, type TlsPair, type ToPrimary, type ToWorker } from "./worker-messages.ts";

export interface WorkerPoolOptions {
  count: number;
  broker: VerificationBroker;
  /** Every process's metrics as one exposition (the primary's and the workers', aggregated). */
  metricsText: () => Promise<string>;
  logger: Logger;
  /** How long the first start of every worker may take before the pool gives up. Default 60 s. */
  startTimeoutMs?: number;
}

/** The workers could not be started (one failed, or not all served in time). */
export class WorkerStartError extends ImprimaturError<"worker-failed" | "worker-timeout"> {}

const MAX_RESTART_PAUSE_MS = 30_000;
/** A worker that served this long before exiting restarts after the shortest pause again (it was no start-up failure loop). */
const HEALTHY_RUN_MS = 60_000;

export class WorkerPool {
  private readonly opts: WorkerPoolOptions;
  private readonly workers = new Map<number, { worker: Worker; startedAt: number }>();
  private policies: PolicySnapshot;
  private tls: TlsPair | undefined;
  private stopping = false;
  private restartPauseMs = 500;
  private nextRequest = 1;
  /** The port the workers serve (the first to serve says which: a port of 0 is chosen once for all). */
  port: number | undefined;

  constructor(opts: WorkerPoolOptions, first: { policies: PolicySnapshot; tls?: TlsPair }) {
    this.opts = opts;
    this.policies = first.policies;
    this.tls = first.tls;
  }

  /** Starts every worker; resolves once each serves, rejects (after stopping them) when one fails or time runs out. */
  async start(): Promise<void> {
    const serving = Array.from({ length: this.opts.count }, () => this.fork());
    let timer: NodeJS.Timeout | undefined;
    const timeoutMs = this.opts.startTimeoutMs ?? 60_000;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new WorkerStartError("worker-timeout", `not every worker served within ${timeoutMs / 1000} s`)), timeoutMs);
    });
    try {
      await Promise.race([Promise.all(serving), late]);
    } catch (e) {
      await this.stop(0);
      throw e;
    } finally {
      clearTimeout(timer);
    }
  }

  /** A new policy set: to every worker (and to those started later). */
  policiesChanged(snapshot: PolicySnapshot): void {
    this.policies = snapshot;
    this.broadcast({ imprimatur: "policies", snapshot });
  }

  /** A renewed certificate: to every worker (and to those started later). */
  certificateChanged(tls: TlsPair): void {
    this.tls = tls;
    this.broadcast({ imprimatur: "tls", tls });
  }

  /**
   * Every worker's own metrics (prom-client's JSON), for the primary to aggregate with its own. A worker that does not
   * answer within `timeoutMs` is left out, rather than holding every scrape.
   */
  async workerMetrics(timeoutMs = 5_000): Promise<unknown[][]> {
    const asked = [...this.workers.values()].map(
      ({ worker }) =>
        new Promise<unknown[] | undefined>((resolve) => {
          const id = this.nextRequest++;
          const timer = setTimeout(() => done(undefined), timeoutMs);
          const done = (metrics: unknown[] | undefined) => {
            clearTimeout(timer);
            worker.off("message", listener);
            resolve(metrics);
          };
          const listener = (message: unknown) => {
            if (isImprimaturMessage<ToPrimary>(message) && message.imprimatur === "own-metrics" && message.id === id) done(message.metrics);
          };
          worker.on("message", listener);
          send(worker, { imprimatur: "own-metrics?", id });
        }),
    );
    return (await Promise.all(asked)).filter((m): m is unknown[] => m !== undefined);
  }

  /** Drains every worker (each answers for `drainMs`, then exits); resolves when all have exited. */
  async stop(drainMs: number): Promise<void> {
    this.stopping = true;
    const exits = [...this.workers.values()].map(({ worker }) => exited(worker));
    this.broadcast({ imprimatur: "drain", drainMs });
    // A worker that does not exit after its drain and a grace period is ended.
    const force = setTimeout(() => {
      for (const { worker } of this.workers.values()) worker.process.kill("SIGKILL");
    }, drainMs + 10_000);
    await Promise.all(exits);
    clearTimeout(force);
  }

  private broadcast(message: ToWorker): void {
    for (const { worker } of this.workers.values()) send(worker, message);
  }

  /** Starts one worker and hands it the policies and certificate; resolves when it serves, rejects when it fails first. */
  private fork(): Promise<void> {
    const worker = cluster.fork();
    this.workers.set(worker.id, { worker, startedAt: Date.now() });
    const claimant = `worker-${worker.id}`;
    return new Promise((resolve, reject) => {
      let serving = false;
      worker.on("online", () => {
        // The certificate first: a worker starts its app once the policies arrive, and serves with it.
        if (this.tls) send(worker, { imprimatur: "tls", tls: this.tls });
        send(worker, { imprimatur: "policies", snapshot: this.policies });
      });
      worker.on("message", (message: unknown) => {
        if (!isImprimaturMessage<ToPrimary>(message)) return;
        if (message.imprimatur === "serving") {
          serving = true;
          this.port ??= message.port;
          resolve();
        } else if (message.imprimatur === "failed") reject(new WorkerStartError("worker-failed", `a worker could not start: ${message.reason}`));
        else if (message.imprimatur === "diverged")
          this.opts.logger.error({ worker: worker.id, reason: message.reason }, "a worker could not load the policies in force; it stops and another starts");
        else void this.answer(worker, claimant, message);
      });
      worker.on("exit", (code, signal) => {
        const ranMs = Date.now() - (this.workers.get(worker.id)?.startedAt ?? Date.now());
        this.workers.delete(worker.id);
        this.opts.broker.claimantGone(claimant);
        if (!serving) reject(new WorkerStartError("worker-failed", `a worker exited before serving (${signal ?? `exit code ${code}`})`));
        else if (!this.stopping) this.restart(worker, ranMs, code, signal);
      });
    });
  }

  private async answer(worker: Worker, claimant: string, message: ToPrimary): Promise<void> {
    switch (message.imprimatur) {
      case "claim": {
        const answer = await this.opts.broker.claim(message.key, claimant);
        send(worker, { imprimatur: "claimed", id: message.id, answer });
        return;
      }
      case "settle":
        if (message.result) this.opts.broker.settle(message.key, claimant, message.result, message.keepMs);
        else this.opts.broker.giveUp(message.key, claimant);
        return;
      case "metrics?":
        send(worker, { imprimatur: "metrics", id: message.id, text: await this.opts.metricsText().catch((e: unknown) => `# ${(e as Error).message}\n`) });
        return;
      default:
        return;
    }
  }

  private restart(gone: Worker, ranMs: number, code: number | null, signal: string | null): void {
    if (ranMs >= HEALTHY_RUN_MS) this.restartPauseMs = 500;
    const pause = this.restartPauseMs;
    this.restartPauseMs = Math.min(MAX_RESTART_PAUSE_MS, this.restartPauseMs * 2);
    this.opts.logger.error({ worker: gone.id, code, signal, restartInMs: pause }, "a worker exited; starting another");
    setTimeout(() => {
      if (this.stopping) return;
      this.fork().catch((e: unknown) => this.opts.logger.error({ err: (e as Error).message }, "a restarted worker could not start"));
    }, pause).unref();
  }
}

function send(worker: Worker, message: ToWorker): void {
  if (worker.isConnected()) worker.send(message);
}

function exited(worker: Worker): Promise<void> {
  if (worker.isDead()) return Promise.resolve();
  return new Promise((resolve) => worker.once("exit", () => resolve()));
}
