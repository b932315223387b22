// The HTTPS edge: routing, body limits, deadlines, health, metrics and graceful shutdown.
import { createServer, type Server } from "node:https";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { Logger } from "pino";
import type { Decision } from "../core/decision.ts";
import type { Metrics } from "./metrics.ts";
import { HttpError, parseTimeoutParam, readJsonBody } from "./http-body.ts";
import { handleMutate } from "./mutate-handler.ts";
import { handleAdmissionReview, handleImageReview, type HandlerContext } from "./review-handlers.ts";

export interface ServerOptions extends HandlerContext {
  host: string;
  port: number;
  tls: { cert: string; key: string };
  metrics: Metrics;
  maxBodyBytes: number;
  /** Deadline used when the caller sends no ?timeout= (the ImagePolicyWebhook does not). */
  defaultTimeoutMs: number;
  isReady(): boolean;
}

export interface RunningServer {
  server: Server;
  port: number;
  close(): Promise<void>;
}

const ENDPOINTS = new Map<string, "imagereview" | "validate" | "mutate">([
  ["/imagereview", "imagereview"],
  ["/validate", "validate"],
  ["/mutate", "mutate"],
]);

/** Time kept back from the caller's deadline to write the audit record and the answer. */
const ANSWER_MARGIN_MS = 300;

export async function startHttpsServer(opts: ServerOptions): Promise<RunningServer> {
  const server = createServer({ cert: opts.tls.cert, key: opts.tls.key, minVersion: "TLSv1.2" }, (req, res) => {
    route(opts, req, res).catch((e) => {
      opts.logger.error({ err: e }, "unhandled error while answering");
      if (!res.headersSent) sendJson(res, 500, status(500, "internal error"));
      else res.destroy();
    });
  });
  server.keepAliveTimeout = 65_000; // longer than typical client idle timeouts, so clients close first
  server.headersTimeout = 30_000;
  server.requestTimeout = 60_000;
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(opts.port, opts.host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  return {
    server,
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections();
      }),
  };
}

async function route(opts: ServerOptions, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const path = (req.url ?? "/").split("?")[0];
  if (req.method === "GET" || req.method === "HEAD") {
    if (path === "/healthz" || path === "/livez") return sendText(res, 200, "ok");
    if (path === "/readyz") return opts.isReady() ? sendText(res, 200, "ok") : sendText(res, 503, "policies not loaded");
    if (path === "/metrics") return sendText(res, 200, await opts.metrics.registry.metrics(), opts.metrics.registry.contentType);
  }
  const endpoint = ENDPOINTS.get(path ?? "");
  if (!endpoint) return sendJson(res, 404, status(404, `no route for ${req.method} ${path}`));
  if (req.method !== "POST") return sendJson(res, 405, status(405, `${path} accepts POST only`));

  const started = process.hrtime.bigint();
  const timeoutMs = parseTimeoutParam(req.url) ?? opts.defaultTimeoutMs;
  const deadline = Date.now() + Math.max(100, timeoutMs - ANSWER_MARGIN_MS);
  try {
    const body = await readJsonBody(req, opts.maxBodyBytes);
    const result = endpoint === "imagereview"
      ? await handleImageReview(opts, body, deadline)
      : endpoint === "validate"
        ? await handleAdmissionReview(opts, body, deadline)
        : await handleMutate(opts, body, deadline);
    observe(opts, endpoint, result.decision);
    logDecision(opts.logger, endpoint, result.decision, result.body);
    sendJson(res, 200, result.body);
  } catch (e) {
    if (!(e instanceof HttpError)) throw e;
    opts.metrics.badRequests.inc({ endpoint });
    opts.logger.warn({ endpoint, status: e.status, error: e.message }, "bad request");
    sendJson(res, e.status, status(e.status, e.message));
  } finally {
    opts.metrics.duration.observe({ endpoint }, Number(process.hrtime.bigint() - started) / 1e9);
  }
}

function observe(opts: ServerOptions, endpoint: string, decision: Decision | undefined) {
  const outcome = !decision ? "skipped" : decision.breakGlass ? "break-glass" : decision.allowed ? "allowed" : "denied";
  opts.metrics.decisions.inc({ endpoint, outcome });
}

function logDecision(logger: Logger, endpoint: string, decision: Decision | undefined, body: unknown) {
  if (!decision) return;
  const uid = (body as { response?: { uid?: string } }).response?.uid;
  // Denials at info; plain admissions at debug (they are the bulk of traffic, and break-glass and fail-open
  // admissions are logged where they are recorded in the audit log).
  if (decision.allowed) {
    if (logger.isLevelEnabled("debug")) logger.debug({ endpoint, uid, allowed: true }, "admitted");
    return;
  }
  logger.info({ endpoint, uid, allowed: false, violations: decision.violations }, "denied");
}

/** A metav1.Status-shaped error body, which kube clients know how to show. */
function status(code: number, message: string) {
  return { apiVersion: "v1", kind: "Status", status: "Failure", code, message };
}

function sendJson(res: ServerResponse, code: number, body: unknown) {
  const text = JSON.stringify(body);
  res.writeHead(code, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}

function sendText(res: ServerResponse, code: number, text: string, type = "text/plain; charset=utf-8") {
  res.writeHead(code, { "content-type": type, "content-length": Buffer.byteLength(text) });
  res.end(text);
}
