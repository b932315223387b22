// Prometheus metrics, on a registry of our own so tests can run several servers in one process; and the
// plain-HTTP listener of `serve --metrics-port`, for Prometheus and probes that need no client credentials.
import { X509Certificate } from "node:crypto";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import type { ScanRecorder, ViolationCounts } from "../scan/audit-scanner.ts";
import type { Recorder } from "../engine/recorder.ts";

// Taken, not imported: an import of node:http loads Node.js's own undici (eslint.config.js).
const { createServer } = process.getBuiltinModule("node:http");

export function createMetrics() {
  const registry = new Registry();
  // The running scanner's counts, read when /metrics is scraped; none until a scanner starts.
  let violationSource: () => ViolationCounts = () => new Map();
  // The Leases this replica runs for, by name: whether it holds each, read when /metrics is scraped.
  const leases = new Map<string, () => boolean>();
  collectDefaultMetrics({ register: registry });
  return {
    registry,
    decisions: new Counter({
      name: "imprimatur_decisions_total",
      help: "Admission decisions by endpoint and outcome (allowed, denied, fail-open, break-glass, skipped).",
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
    reviewsShed: new Counter({
      name: "imprimatur_reviews_shed_total",
      help: "Reviews answered with the failure policy's result without being judged, the server being overloaded.",
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
    policyResults: new Counter({
      name: "imprimatur_policy_results_total",
      help: "Policies, rules and checks that applied to an admission, by kind, policy and result (pass, fail).",
      labelNames: ["kind", "policy", "result"] as const,
      registers: [registry],
    }),
    signatureVerifications: new Histogram({
      name: "imprimatur_signature_verifications_seconds",
      help: "Signature verifications that ran (cache misses), by outcome (verified, denied, unavailable), and how long each took.",
      labelNames: ["outcome"] as const,
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [registry],
    }),
    callersRefused: new Counter({
      name: "imprimatur_callers_refused_total",
      help: "Requests refused with 401 because the caller presented no credentials, or wrong ones, by path.",
      labelNames: ["path"] as const,
      registers: [registry],
    }),
    policyReloads: new Counter({
      name: "imprimatur_policy_reloads_total",
      help: "Policy reloads by result.",
      labelNames: ["result"] as const,
      registers: [registry],
    }),
    scannedPods: new Counter({
      name: "imprimatur_scan_pods_total",
      help: "Running pods judged by the background scan, by outcome (pass, fail, error).",
      labelNames: ["outcome"] as const,
      registers: [registry],
    }),
    scanViolations: new Gauge({
      name: "imprimatur_scan_results",
      help: "Results the background scan holds now for the pods in view that are not passes, by policy and result (fail, warn, error).",
      labelNames: ["policy", "result"] as const,
      registers: [registry],
      collect() {
        this.reset();
        for (const { policy, result, count } of violationSource().values()) this.set({ policy, result }, count);
      },
    }),
    scanDuration: new Histogram({
      name: "imprimatur_scan_duration_seconds",
      help: "How long a full background scan took, from its start until every pod in view was judged.",
      buckets: [1, 5, 15, 30, 60, 120, 300, 600, 1200, 3600],
      registers: [registry],
    }),
    scanWatchRestarts: new Counter({
      name: "imprimatur_scan_watch_restarts_total",
      help: "Pod lists and watches of the background scan that failed and were started again.",
      registers: [registry],
    }),
    scanReportWriteFailures: new Counter({
      name: "imprimatur_scan_report_write_failures_total",
      help: "Policy reports the background scan could not write (retried at the pod's next change or rescan).",
      registers: [registry],
    }),
    scanReportsSquatted: new Counter({
      name: "imprimatur_policy_report_squatted_total",
      help: "Reports at a pod's report name that Imprimatur had not written, by format and outcome (overwritten, left: RBAC forbids the update).",
      labelNames: ["format", "outcome"] as const,
      registers: [registry],
    }),
    // client-go's name for the same thing (kube-controller-manager and kube-scheduler export it), so the
    // alerts and dashboards operators have for those read it too.
    leaderElection: new Gauge({
      name: "leader_election_master_status",
      help: "Whether this replica holds the Lease (1) or not (0), by the Lease's name.",
      labelNames: ["name"] as const,
      registers: [registry],
      collect() {
        this.reset();
        for (const [name, holds] of leases) this.set({ name }, holds() ? 1 : 0);
      },
    }),
    servingCertificateExpiry: new Gauge({
      name: "imprimatur_serving_certificate_expiration_timestamp_seconds",
      help: "When the serving certificate in use expires (its notAfter), in seconds since the Unix epoch.",
      registers: [registry],
      // serve --workers: every process serves the one certificate; the exposition names it once, not summed.
      aggregator: "max",
    }),
    /** Reports on every scrape whether this replica holds the Lease `name`. */
    watchLease(name: string, holds: () => boolean): void {
      leases.set(name, holds);
    },
    /** The certificate now served (PEM): its expiry, for the alert that it is close. */
    setServingCertificate(certPem: string): void {
      try {
        this.servingCertificateExpiry.set(Math.floor(new X509Certificate(certPem).validToDate.getTime() / 1000));
      } catch {
        // Not a certificate this process can read: the gauge keeps the last one it could.
      }
    },
    /** Where the scan-results gauge reads its counts (the running scanner, when there is one). */
    setScanResultsSource(source: () => ViolationCounts): void {
      violationSource = source;
    },
  };
}

/** The background scan's observations, as Prometheus metrics. */
export function prometheusScanRecorder(m: Metrics): ScanRecorder {
  return {
    podScanned: (outcome) => m.scannedPods.inc({ outcome }),
    fullScan: (seconds) => m.scanDuration.observe(seconds),
    watchRestarted: () => m.scanWatchRestarts.inc(),
    reportWriteFailed: () => m.scanReportWriteFailures.inc(),
    reportSquatted: (format, outcome) => m.scanReportsSquatted.inc({ format, outcome }),
  };
}

export type Metrics = ReturnType<typeof createMetrics>;

/** The engine's and the transports' observations, as Prometheus metrics. */
export function prometheusRecorder(m: Metrics): Recorder {
  return {
    decision(endpoint, decision) {
      // An admission the failure policy let through is counted apart, so dashboards and the post-creation audit see it.
      const outcome = !decision ? "skipped" : decision.breakGlass ? "break-glass" : !decision.allowed ? "denied" : decision.failOpen ? "fail-open" : "allowed";
      m.decisions.inc({ endpoint, outcome });
      if (!decision) return;
      // One count per policy per admission and result, however many images or fields it covered. Passes and
      // violations of one policy come one after another, so most repeats are the entry just counted.
      let seen: Set<string> | undefined;
      let last = "";
      const count = (kind: string, policy: string, result: "pass" | "fail") => {
        const key = `${kind}\u0000${policy}\u0000${result}`;
        if (key === last || seen?.has(key)) return;
        if (last !== "") (seen ??= new Set()).add(last);
        last = key;
        m.policyResults.inc({ kind, policy, result });
      };
      if (decision.passes) for (const p of decision.passes) count(p.kind ?? "ImagePolicy", p.policy, "pass");
      for (const v of decision.violations) count(v.kind ?? "ImagePolicy", v.policy, "fail");
    },
    backendResult: (backend, outcome) => m.backendResults.inc({ backend, outcome }),
    digestResolutions: (outcome, n) => m.digestResolutions.inc({ outcome }, n),
    registryRequest: (method, status) => m.registryRequests.inc({ method, status: String(status) }),
    signatureVerification: (outcome, seconds) => m.signatureVerifications.observe({ outcome }, seconds),
    policyReload: (result) => m.policyReloads.inc({ result }),
    badRequest: (endpoint) => m.badRequests.inc({ endpoint }),
    reviewShed: (endpoint) => m.reviewsShed.inc({ endpoint }),
    callerRefused: (path) => m.callersRefused.inc({ path }),
    requestDuration: (endpoint, seconds) => m.duration.observe({ endpoint }, seconds),
  };
}

export interface MetricsServerOptions {
  host: string;
  port: number;
  metrics: Metrics;
  /** The exposition served; by default the registry's (serve --workers: every process's). */
  text?: () => Promise<string>;
  /** Why the server is not ready (policies not loaded, no certificate yet, draining), or undefined when it is. */
  notReady(): string | undefined;
}

export interface RunningMetricsServer {
  port: number;
  close(): Promise<void>;
}

/**
 * GET /metrics, /healthz and /readyz over plain HTTP. It opens before the policies load, so /readyz here says
 * why the server is not ready yet; it serves nothing that decides or changes anything, hence no credentials.
 */
export async function startMetricsServer(opts: MetricsServerOptions): Promise<RunningMetricsServer> {
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0];
    const reply = (code: number, text: string, type = "text/plain; charset=utf-8") => {
      res.writeHead(code, { "content-type": type, "content-length": Buffer.byteLength(text) });
      res.end(text);
    };
    if (req.method !== "GET" && req.method !== "HEAD") return reply(405, "GET only\n");
    if (path === "/healthz" || path === "/livez") return reply(200, "ok");
    if (path === "/readyz") {
      const why = opts.notReady();
      return why === undefined ? reply(200, "ok") : reply(503, why);
    }
    if (path !== "/metrics") return reply(404, `no route for ${path}\n`);
    (opts.text ?? (() => opts.metrics.registry.metrics()))().then(
      (text) => reply(200, text, opts.metrics.registry.contentType),
      (e: unknown) => reply(500, `metrics unavailable: ${(e as Error).message}\n`),
    );
  });
  server.headersTimeout = 10_000;
  server.requestTimeout = 30_000;
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(opts.port, opts.host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections();
      }),
  };
}
