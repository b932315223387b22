// What the primary of `serve --workers` and its workers tell each other over node:cluster's IPC channel. Every
// message is plain data (structured clone); each carries `imprimatur` so that messages of other libraries on the
// same channel (prom-client's metrics requests) are told apart.
import type { SharedResult, VerificationResult } from "../verification/image-verifier.ts";
import type { PolicySnapshot } from "./policy-snapshot.ts";

export type TlsPair = { cert: string; key: string };

/** From the primary to a worker. */
export type ToWorker =
  /** The policies in force (the first one starts the worker's app), and every set that replaces them. */
  | { imprimatur: "policies"; snapshot: PolicySnapshot }
  /** The serving certificate: given with the first policies, and each renewal (--tls-secret). */
  | { imprimatur: "tls"; tls: TlsPair }
  /** The answer to a verification claim. */
  | { imprimatur: "claimed"; id: number; answer: SharedResult | { verify: true } }
  /** The metrics of every process, for a GET /metrics the worker answers. */
  | { imprimatur: "metrics"; id: number; text: string }
  /** The worker's own metrics, asked for to aggregate every process's. */
  | { imprimatur: "own-metrics?"; id: number }
  /** Stop: not ready at once, answer for `drainMs` more, then close and exit. */
  | { imprimatur: "drain"; drainMs: number };

/** From a worker to the primary. */
export type ToPrimary =
  /** The worker's app serves (its listener shares the primary's port). */
  | { imprimatur: "serving"; port: number }
  /** A verification key the worker's cache does not hold. */
  | { imprimatur: "claim"; id: number; key: string }
  /** A claimed verification's outcome: its result (kept `keepMs` when given), or none (given up). */
  | { imprimatur: "settle"; key: string; result?: VerificationResult; keepMs?: number }
  /** The metrics of every process, asked for by a GET /metrics on the worker's port. */
  | { imprimatur: "metrics?"; id: number }
  /** The worker's own metrics (prom-client's getMetricsAsJSON). */
  | { imprimatur: "own-metrics"; id: number; metrics: unknown[] }
  /** The worker could not start: why (the primary logs it and stops). */
  | { imprimatur: "failed"; reason: string }
  /** The worker could not load a set the primary put in force: it stops (the primary starts another). */
  | { imprimatur: "diverged"; reason: string };

/** One of ours (either way: each end receives only the other's kind), not another library's message on the channel. */
export function isImprimaturMessage<M extends ToWorker | ToPrimary>(message: unknown): message is M {
  return typeof message === "object" && message !== null && typeof (message as { imprimatur?: unknown }).imprimatur === "string";
}
