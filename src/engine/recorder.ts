// What the engine and the transports report for metrics, through one interface rather than per-handler
// callbacks. The Prometheus implementation is in src/server/metrics.ts; the CLI records nothing.
import type { Decision } from "../core/decision.ts";

export type Endpoint = "imagereview" | "validate" | "mutate" | "check" | "audit" | "pull";

export interface Recorder {
  /** A decision, or `undefined` when the request held nothing to review. */
  decision(endpoint: Endpoint, decision: Decision | undefined): void;
  backendResult(backend: string, outcome: "allowed" | "denied" | "cached" | "unavailable"): void;
  digestResolutions(outcome: "pinned" | "recorded" | "failed", count: number): void;
  registryRequest(method: string, status: number): void;
  /** A signature verification that ran (not a cache hit). */
  signatureVerification(outcome: "verified" | "denied" | "unavailable", seconds: number): void;
  policyReload(result: "success" | "failure"): void;
  badRequest(endpoint: Endpoint): void;
  /** A review answered with the failure policy's result without being judged: the server was overloaded. */
  reviewShed(endpoint: Endpoint): void;
  /** A caller refused with 401 (no or wrong credentials), by the path it asked for. */
  callerRefused(path: string): void;
  requestDuration(endpoint: Endpoint, seconds: number): void;
}

export const NO_RECORDER: Recorder = {
  decision() {},
  backendResult() {},
  digestResolutions() {},
  registryRequest() {},
  signatureVerification() {},
  policyReload() {},
  badRequest() {},
  reviewShed() {},
  callerRefused() {},
  requestDuration() {},
};
