// Prometheus metrics, on a registry of our own so tests can run several servers in one process.
import { Counter, Histogram, Registry, collectDefaultMetrics } from "prom-client";

export function createMetrics() {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  return {
    registry,
    decisions: new Counter({
      name: "imprimatur_decisions_total",
      help: "Admission decisions by endpoint and outcome.",
      labelNames: ["endpoint", "outcome"] as const,
      registers: [registry],
    }),
    duration: new Histogram({
      name: "imprimatur_request_duration_seconds",
      help: "Time to answer a review, by endpoint.",
      labelNames: ["endpoint"] as const,
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [registry],
    }),
    backendResults: new Counter({
      name: "imprimatur_backend_results_total",
      help: "Answers of remote ImageReview backends (allowed, denied, cached, unavailable).",
      labelNames: ["backend", "outcome"] as const,
      registers: [registry],
    }),
    badRequests: new Counter({
      name: "imprimatur_bad_requests_total",
      help: "Requests rejected as malformed.",
      labelNames: ["endpoint"] as const,
      registers: [registry],
    }),
    digestResolutions: new Counter({
      name: "imprimatur_digest_resolutions_total",
      help: "Tags of digestMutate images resolved to digests (pinned, recorded) or not (failed).",
      labelNames: ["outcome"] as const,
      registers: [registry],
    }),
    registryRequests: new Counter({
      name: "imprimatur_registry_requests_total",
      help: "HTTP exchanges with container registries and their token services, by method and status (0: no answer).",
      labelNames: ["method", "status"] as const,
      registers: [registry],
    }),
    policyReloads: new Counter({
      name: "imprimatur_policy_reloads_total",
      help: "Policy reloads by result.",
      labelNames: ["result"] as const,
      registers: [registry],
    }),
  };
}

export type Metrics = ReturnType<typeof createMetrics>;
