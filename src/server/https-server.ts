// The HTTPS edge: routing, body limits, deadlines, health, metrics and graceful shutdown. Handlers translate
// wire formats; deciding is the engine's (src/engine/engine.ts).
import { createServer, type Server } from "node:https";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { Logger } from "pino";
import { UNAUTHENTICATED, type Caller } from "../audit/caller.ts";
import type { Recorder } from "../engine/recorder.ts";
import type { CallerAuthenticator } from "../caller-auth/caller-auth.ts";
import { CallerConnections } from "../caller-auth/caller-connections.ts";
import { HttpError, parseTimeoutParam, readJsonBody } from "./http-body.ts";
import { handleAdmissionReview, handleImageReview, handleMutate, type HandlerContext } from "./review-handlers.ts";
import { afterThisTurnsReads } from "./turn-batch.ts";

export interface ServerOptions {
  host: string;
  port: number;
  tls: { cert: string; key: string };
  handlers: HandlerContext;
  logger: Logger;
  recorder: Recorder;
  /** The Prometheus exposition for GET /metrics; undefined when it is served on its own port (--metrics-port). */
  metrics: { text(): Promise<string>; contentType: string } | undefined;
  /** Who may call the review endpoints (and /metrics here); undefined: anyone, marked unauthenticated. */
  callers?: CallerAuthenticator;
  maxBodyBytes: number;
  /** Reviews answered at once; past it a review gets the failure policy's answer without being judged. */
  maxReviewsInFlight: number;
  /** Deadline used when the caller sends no ?timeout= (the ImagePolicyWebhook does not). */
  defaultTimeoutMs: number;
  /** Why the server is not ready (policies not loaded yet), or undefined when it is. */
  notReady(): string | undefined;
  /** Later serving certificates (self-managed TLS, certificate files): each one is used for new connections, without a restart. */
  tlsUpdates?: TlsUpdates;
}

export interface TlsUpdates {
  /** Calls `listener` with every new certificate and key; returns the unsubscribe. */
  subscribe(listener: (tls: { cert: string; key: string }) => void): () => void;
  /** Why no usable certificate is in place (none loaded yet, or the one served has expired), for /readyz. */
  notReady?(): string | undefined;
}

export interface RunningServer {
  server: Server;
  port: number;
  /**
   * Graceful stop: /readyz answers 503 at once so load balancers stop sending, requests keep being answered for
   * `drainMs`, then the listener closes and idle connections are dropped.
   */
  close(drainMs?: number): Promise<void>;
}

const ENDPOINTS = new Map<string, "imagereview" | "validate" | "mutate">([
  ["/imagereview", "imagereview"],
  ["/validate", "validate"],
  ["/mutate", "mutate"],
]);

/** Time kept back from the caller's deadline to write the audit record and the answer. */
const ANSWER_MARGIN_MS = 300;

export async function startHttpsServer(opts: ServerOptions): Promise<RunningServer> {
  const state: ServingState = { draining: false, inFlight: 0 };
  // With a client CA, TLS asks for a certificate but does not insist: health probes come without one, and a
  // caller without one gets a 401 it can read instead of a failed handshake.
  const clientAuth = opts.callers?.clientCaPem === undefined ? {} : { requestCert: true, rejectUnauthorized: false };
  // The certificate and the client CA in use; either may be replaced while serving.
  let serving = opts.tls;
  const secureContext = () => ({
    cert: serving.cert,
    key: serving.key,
    minVersion: "TLSv1.2" as const,
    ...(opts.callers?.clientCaPem === undefined ? {} : { ca: opts.callers.clientCaPem }),
  });
  const callers = opts.callers;
  // Connections of callers whose CA or token is removed are closed, not left for later requests.
  const connections = callers ? new CallerConnections((presented) => callers.holds(presented), opts.logger) : undefined;
  const server = createServer({ ...secureContext(), ...clientAuth }, (req, res) => {
    connections?.requestStarted(req, res);
    route(opts, state, req, res, connections).catch((e) => {
      opts.logger.error({ err: e }, "unhandled error while answering");
      if (!res.headersSent) sendJson(res, 500, status(500, "internal error"));
      else res.destroy();
    });
  });
  // Connections already open keep the certificate and client CA they were made with.
  const renewContext = (what: string): boolean => {
    try {
      server.setSecureContext(secureContext());
      return true;
    } catch (e) {
      opts.logger.error({ err: e }, `the new ${what} is not usable for TLS; new connections still get the previous one`);
      return false;
    }
  };
  const unsubscribeTls = opts.tlsUpdates?.subscribe((next) => {
    const previous = serving;
    serving = next;
    if (!renewContext("serving certificate")) serving = previous;
  });
  const unsubscribeClientCa = callers?.onClientCaChange(() => renewContext("client CA"));
  const unsubscribeCallers = callers?.onChange(() => connections?.credentialsChanged());
  // Longer than the idle timeout of kube-apiserver's webhook clients (Go's 90 s IdleConnTimeout), so the apiserver,
  // not this server, closes an idle connection: the apiserver does not retry a POST that fails with EOF on a
  // connection this server is closing, and with failurePolicy Fail that admission would be refused.
  server.keepAliveTimeout = 120_000;
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
    close: async (drainMs = 0) => {
      state.draining = true;
      unsubscribeTls?.();
      unsubscribeClientCa?.();
      unsubscribeCallers?.();
      if (drainMs > 0) await new Promise((r) => setTimeout(r, drainMs));
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections();
      });
    },
  };
}

/** Whether the server is stopping, and how many reviews it is answering. */
interface ServingState {
  draining: boolean;
  inFlight: number;
}

async function route(
  opts: ServerOptions,
  state: ServingState,
  req: IncomingMessage,
  res: ServerResponse,
  connections: CallerConnections | undefined,
): Promise<void> {
  const path = (req.url ?? "/").split("?")[0];
  if (req.method === "GET" || req.method === "HEAD") {
    if (path === "/healthz" || path === "/livez") return sendText(res, 200, "ok");
    if (path === "/readyz") {
      const why = state.draining ? "shutting down" : opts.notReady();
      return why === undefined ? sendText(res, 200, "ok") : sendText(res, 503, why);
    }
    if (path === "/metrics" && opts.metrics) {
      if (!authenticated(opts, req, res, connections)) return;
      return sendText(res, 200, await opts.metrics.text(), opts.metrics.contentType);
    }
  }
  const endpoint = ENDPOINTS.get(path ?? "");
  if (!endpoint) return sendJson(res, 404, status(404, `no route for ${req.method} ${path}`));
  if (req.method !== "POST") return sendJson(res, 405, status(405, `${path} accepts POST only`));
  const caller = authenticated(opts, req, res, connections);
  if (!caller) return;

  const started = process.hrtime.bigint();
  const timeoutMs = parseTimeoutParam(req.url) ?? opts.defaultTimeoutMs;
  const deadline = Date.now() + Math.max(100, timeoutMs - ANSWER_MARGIN_MS);
  let judging = false;
  try {
    const body = await readJsonBody(req, opts.maxBodyBytes);
    // Past the limit a review is answered at once with the failure policy's result, before its deadline, rather
    // than queued behind the others to be answered after the apiserver stopped waiting. Counted once its body is
    // read: a client that sends slowly holds a connection, not a place among the reviews being judged.
    const overloaded =
      state.inFlight >= opts.maxReviewsInFlight
        ? `the server is overloaded: ${state.inFlight} reviews in flight, the limit is ${opts.maxReviewsInFlight}`
        : Date.now() >= deadline
          ? `the server is overloaded: the request was read after its deadline (${timeoutMs} ms)`
          : undefined;
    judging = overloaded === undefined;
    if (judging) {
      state.inFlight++;
      await afterThisTurnsReads();
    }
    const handle = endpoint === "imagereview" ? handleImageReview : endpoint === "validate" ? handleAdmissionReview : handleMutate;
    const result = await handle(opts.handlers, body, { deadline, caller, ...(overloaded ? { overloaded } : {}) });
    // The engine records the decisions it makes; a request with nothing to review is counted here.
    if (!result.decision) opts.recorder.decision(endpoint, undefined);
    sendJson(res, 200, result.body);
  } catch (e) {
    if (!(e instanceof HttpError)) throw e;
    opts.recorder.badRequest(endpoint);
    opts.logger.warn({ endpoint, status: e.status, error: e.message }, "bad request");
    sendJson(res, e.status, status(e.status, e.message));
  } finally {
    if (judging) state.inFlight--;
    opts.recorder.requestDuration(endpoint, Number(process.hrtime.bigint() - started) / 1e9);
  }
}

/** The caller, or undefined once a 401 is sent: before the body is read, on a connection that is then closed. */
function authenticated(opts: ServerOptions, req: IncomingMessage, res: ServerResponse, connections: CallerConnections | undefined): Caller | undefined {
  if (!opts.callers) return UNAUTHENTICATED;
  const result = opts.callers.authenticate(req);
  if (result.ok) {
    connections?.authenticated(req.socket, result.presented);
    return result.caller;
  }
  const path = (req.url ?? "/").split("?")[0] ?? "/";
  opts.recorder.callerRefused(path);
  opts.logger.warn({ path, remote: req.socket.remoteAddress, reason: result.reason }, "caller refused");
  sendJson(res, 401, status(401, `unauthorized: ${result.reason}`), { "www-authenticate": 'Bearer realm="imprimatur"', connection: "close" });
  return undefined;
}

/** A metav1.Status-shaped error body, which kube clients know how to show. */
function status(code: number, message: string) {
  return { apiVersion: "v1", kind: "Status", status: "Failure", code, message };
}

function sendJson(res: ServerResponse, code: number, body: unknown, headers: Record<string, string> = {}) {
  const text = JSON.stringify(body);
  res.writeHead(code, { ...headers, "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}

function sendText(res: ServerResponse, code: number, text: string, type = "text/plain; charset=utf-8") {
  res.writeHead(code, { "content-type": type, "content-length": Buffer.byteLength(text) });
  res.end(text);
}
