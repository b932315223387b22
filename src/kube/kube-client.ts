// The project's Kubernetes API client: JSON requests and watches over one undici connection pool per API server
// and TLS identity, authenticated as the kubeconfig or service account says (kube-connection.ts).
//
// Written here rather than taken from @kubernetes/client-node: that library cost every process 89 MiB of RSS and
// 0.4 s of start-up, made a new TLS connection per request (2.x), and turned every answer into typed models that
// took longer to build than the request. Everything here reads and writes plain JSON, as the API serialises it.
import { readFile } from "node:fs/promises";
import { Agent, ProxyAgent, request, type Dispatcher } from "undici";
import { codeForHttpStatus, KubeApiError, type KubeStatusDetails } from "./api-requests.ts";
import type { ExecCredential, ExecCredentialSource } from "./exec-credentials.ts";

/** PEM text, given inline or in a file that is read again when it may have been rotated. */
export type PemSource = { pem: string } | { file: string };

/** Where the API is and how to authenticate to it, as kube-connection.ts resolved it. */
export interface KubeConnection {
  /** The API server's base URL, without a trailing slash: "https://10.0.0.1:6443". */
  server: string;
  ca?: PemSource;
  clientCert?: PemSource;
  clientKey?: PemSource;
  insecureSkipTlsVerify: boolean;
  /** Sent as SNI and checked against the server's certificate instead of the URL's host. */
  tlsServerName?: string;
  proxyUrl?: string;
  /** A bearer token given inline. */
  token?: string;
  /** A bearer token read from this file, again each minute (service account tokens are rotated by the kubelet). */
  tokenFile?: string;
  basicAuth?: { username: string; password: string };
  exec?: ExecCredentialSource;
  /** User to impersonate (`as:` in a kubeconfig). */
  impersonate?: string;
  /** The context's namespace, else the pod's, else "default". */
  namespace: string;
  /** Where this came from, for messages: "kubeconfig F, context C" or "the pod's service account". */
  origin: string;
}

export type QueryValue = string | number | boolean | undefined;

export interface KubeRequestOptions {
  query?: Record<string, QueryValue>;
  /** Sent as JSON (or as is, when a string). */
  body?: unknown;
  /** Default "application/json"; a patch names its kind: "application/merge-patch+json" and so on. */
  contentType?: string;
  signal?: AbortSignal;
}

export type WatchEventHandler = (type: string, object: unknown) => void;

/** Files and tokens read from disk are read again after this long, to follow rotation. */
const REREAD_MS = 60_000;
/** A watch quiet for this long is taken as a dead connection (ListWatch asks the server to end them after 25 s). */
const WATCH_IDLE_MS = 60_000;
/** A request whose answer has not begun in this long fails (a caller's signal may end it sooner). */
const DEFAULT_HEADERS_TIMEOUT_MS = 60_000;

interface TlsIdentity {
  key: string;
  dispatcher: Dispatcher;
}

export class KubeClient {
  readonly connection: KubeConnection;
  private readonly userAgent: string;
  private readonly rereadMs: number;
  /** Whether a CA, certificate or key comes from a file (then read again each rereadMs). */
  private readonly hasTlsFiles: boolean;
  private identity: TlsIdentity | undefined;
  private tlsCheckedAt = 0;
  private fileToken: { token: string; readAt: number } | undefined;
  private closed = false;

  /** `fileRereadMs`: how long a token file, CA or client certificate read from disk is used before it is read again (tests). */
  constructor(connection: KubeConnection, options: { userAgent?: string; fileRereadMs?: number } = {}) {
    this.connection = connection;
    this.userAgent = options.userAgent ?? "imprimatur";
    this.rereadMs = options.fileRereadMs ?? REREAD_MS;
    this.hasTlsFiles = [connection.ca, connection.clientCert, connection.clientKey].some((source) => source !== undefined && "file" in source);
  }

  /** The namespace of the kubeconfig's context or of the pod, else "default". */
  get namespace(): string {
    return this.connection.namespace;
  }

  /** The parsed answer of a successful request; throws a KubeApiError for any other answer or none. */
  async request(method: string, path: string, options: KubeRequestOptions = {}): Promise<unknown> {
    const answer = await this.send(method, path, options, "application/json");
    const text = await readText(answer, method, path, options.signal);
    if (answer.statusCode < 200 || answer.statusCode > 299) throw failedAnswer(answer.statusCode, text);
    if (text === "") return undefined;
    try {
      return JSON.parse(text) as unknown;
    } catch (e) {
      throw new KubeApiError("unavailable", `${method} ${path}: the answer is not JSON`, { cause: e, httpStatus: answer.statusCode });
    }
  }

  /** The object or list at `path`, parsed; undefined when the API says it does not exist (404). */
  async read(path: string, options: Omit<KubeRequestOptions, "body" | "contentType"> = {}): Promise<unknown> {
    try {
      return await this.request("GET", path, options);
    } catch (e) {
      if (e instanceof KubeApiError && e.httpStatus === 404) return undefined;
      throw e;
    }
  }

  /**
   * A watch of `path` (`watch=true` is added to `query`): each event's type and object to `onEvent`, in order. Resolves
   * when the server ends the stream; rejects with a KubeApiError when it refuses the watch, the connection fails or
   * falls silent, `onEvent` throws, or `signal` aborts it ("aborted").
   */
  async watch(path: string, query: Record<string, QueryValue>, onEvent: WatchEventHandler, signal?: AbortSignal): Promise<void> {
    const options: KubeRequestOptions = { query: { ...query, watch: true } };
    if (signal) options.signal = signal;
    const answer = await this.send("GET", path, options, "application/json", WATCH_IDLE_MS);
    if (answer.statusCode < 200 || answer.statusCode > 299) {
      throw failedAnswer(answer.statusCode, await readText(answer, "WATCH", path, signal));
    }
    const decoder = new TextDecoder();
    let pending = "";
    const deliver = (line: string) => {
      if (line.trim() === "") return;
      let event: { type?: unknown; object?: unknown };
      try {
        event = JSON.parse(line) as { type?: unknown; object?: unknown };
      } catch (e) {
        throw new KubeApiError("unavailable", `WATCH ${path}: an event is not JSON`, { cause: e });
      }
      if (typeof event?.type !== "string") throw new KubeApiError("unavailable", `WATCH ${path}: an event has no type`);
      onEvent(event.type, event.object);
    };
    try {
      for await (const chunk of answer.body) {
        pending += decoder.decode(chunk as Uint8Array, { stream: true });
        let newline = pending.indexOf("\n");
        while (newline >= 0) {
          const line = pending.slice(0, newline);
          pending = pending.slice(newline + 1);
          deliver(line);
          newline = pending.indexOf("\n");
        }
      }
      deliver(pending + decoder.decode());
    } catch (e) {
      discard(answer);
      if (e instanceof KubeApiError) throw e;
      throw transportError("WATCH", path, e, signal);
    }
  }

  /** Closes the connections; requests still running fail. */
  async close(): Promise<void> {
    this.closed = true;
    const identity = this.identity;
    this.identity = undefined;
    await identity?.dispatcher.destroy();
  }

  private async send(
    method: string,
    path: string,
    options: KubeRequestOptions,
    accept: string,
    idleMs?: number,
    retried = false,
  ): Promise<Dispatcher.ResponseData> {
    if (this.closed) throw new KubeApiError("unavailable", `${method} ${path}: the client is closed`);
    const url = new URL(this.connection.server + path);
    for (const [name, value] of Object.entries(options.query ?? {})) if (value !== undefined) url.searchParams.set(name, String(value));
    const signal = options.signal;
    let execCredential: ExecCredential | undefined;
    let answer: Dispatcher.ResponseData;
    try {
      execCredential = await this.connection.exec?.credential();
      const headers: Record<string, string> = { accept, "user-agent": this.userAgent, ...(await this.authHeaders(execCredential)) };
      let body: string | undefined;
      if (options.body !== undefined) {
        body = typeof options.body === "string" ? options.body : JSON.stringify(options.body);
        headers["content-type"] = options.contentType ?? "application/json";
      }
      const dispatcher = await this.dispatcher(execCredential);
      const sent = request(url, {
        method: method as Dispatcher.HttpMethod,
        headers,
        dispatcher,
        ...(body !== undefined ? { body } : {}),
        ...(signal ? { signal } : {}),
        headersTimeout: idleMs ?? DEFAULT_HEADERS_TIMEOUT_MS,
        ...(idleMs !== undefined ? { bodyTimeout: idleMs } : {}),
      });
      answer = signal ? await untilAborted(sent, signal) : await sent;
    } catch (e) {
      if (e instanceof KubeApiError) throw e;
      throw transportError(method, path, e, signal);
    }
    // An exec plugin's credential the API refuses is fetched anew once, as client-go does.
    if (answer.statusCode === 401 && execCredential && !retried) {
      discard(answer);
      this.connection.exec!.invalidate(execCredential);
      return this.send(method, path, options, accept, idleMs, true);
    }
    return answer;
  }

  private async authHeaders(execCredential: ExecCredential | undefined): Promise<Record<string, string>> {
    const c = this.connection;
    const headers: Record<string, string> = {};
    const token = execCredential?.token ?? c.token ?? (c.tokenFile !== undefined ? await this.tokenFromFile(c.tokenFile) : undefined);
    if (token) headers["authorization"] = `Bearer ${token}`;
    else if (c.basicAuth) headers["authorization"] = `Basic ${Buffer.from(`${c.basicAuth.username}:${c.basicAuth.password}`).toString("base64")}`;
    if (c.impersonate) headers["impersonate-user"] = c.impersonate;
    return headers;
  }

  private async tokenFromFile(file: string): Promise<string> {
    const now = Date.now();
    if (this.fileToken && now - this.fileToken.readAt < this.rereadMs) return this.fileToken.token;
    let token: string;
    try {
      token = (await readFile(file, "utf8")).trim();
    } catch (e) {
      // A token that was read stays in use while its file cannot be read (it may be being replaced).
      if (this.fileToken) return this.fileToken.token;
      throw new KubeApiError("unauthorized", `cannot read the token file ${file}: ${(e as Error).message}`, { cause: e });
    }
    this.fileToken = { token, readAt: now };
    return token;
  }

  /**
   * The pool for the current TLS identity. Files are read again at most once a minute; when what they hold changed
   * (a rotated client certificate), or an exec plugin gave another certificate, a new pool is made and the previous
   * one closes once its requests (a watch runs until it ends) are done.
   */
  private async dispatcher(execCredential: ExecCredential | undefined): Promise<Dispatcher> {
    const now = Date.now();
    const fromFiles = this.hasTlsFiles;
    if (this.identity && !execCredential?.clientCertificateData && (!fromFiles || now - this.tlsCheckedAt < this.rereadMs)) return this.identity.dispatcher;
    const c = this.connection;
    const [ca, fileCert, fileKey] = await Promise.all([pemOf(c.ca), pemOf(c.clientCert), pemOf(c.clientKey)]);
    this.tlsCheckedAt = now;
    const cert = execCredential?.clientCertificateData ?? fileCert;
    const key = execCredential?.clientKeyData ?? fileKey;
    const identityKey = JSON.stringify([ca ?? "", cert ?? "", key ?? ""]);
    if (this.identity?.key === identityKey) return this.identity.dispatcher;
    const connect = {
      ...(ca !== undefined ? { ca } : {}),
      ...(cert !== undefined ? { cert } : {}),
      ...(key !== undefined ? { key } : {}),
      ...(c.tlsServerName ? { servername: c.tlsServerName } : {}),
      rejectUnauthorized: !c.insecureSkipTlsVerify,
    };
    // Idle connections are kept 30 s (client-go keeps them 90 s; kube-apiserver closes them much later).
    const pool: Dispatcher = c.proxyUrl
      ? new ProxyAgent({ uri: c.proxyUrl, requestTls: connect, keepAliveTimeout: 30_000 })
      : new Agent({ connect, keepAliveTimeout: 30_000, keepAliveMaxTimeout: 600_000 });
    const previous = this.identity?.dispatcher;
    this.identity = { key: identityKey, dispatcher: pool };
    void previous?.close().catch(() => undefined);
    return pool;
  }
}

async function pemOf(source: PemSource | undefined): Promise<string | undefined> {
  if (source === undefined) return undefined;
  if ("pem" in source) return source.pem;
  try {
    return await readFile(source.file, "utf8");
  } catch (e) {
    throw new KubeApiError("unavailable", `cannot read ${source.file}: ${(e as Error).message}`, { cause: e });
  }
}

/**
 * Drops an answer's body unread. undici reports a body destroyed before its end as an "aborted" error event; with
 * nobody listening that would be an uncaught exception, so it is listened to (and ignored) first.
 */
function discard(answer: Dispatcher.ResponseData): void {
  answer.body.on("error", () => undefined);
  answer.body.destroy();
}

async function readText(answer: Dispatcher.ResponseData, method: string, path: string, signal: AbortSignal | undefined): Promise<string> {
  try {
    return await answer.body.text();
  } catch (e) {
    throw transportError(method, path, e, signal);
  }
}

/** A non-success answer: its Status body's message names what was wrong (a missing RBAC rule, a conflict). */
function failedAnswer(status: number, text: string): KubeApiError {
  let message = "";
  let reason: string | undefined;
  let details: KubeStatusDetails | undefined;
  try {
    const body = JSON.parse(text) as { message?: unknown; reason?: unknown; details?: unknown };
    if (typeof body.message === "string") message = body.message;
    if (typeof body.reason === "string" && body.reason !== "") reason = body.reason;
    if (typeof body.details === "object" && body.details !== null) {
      details = {};
      for (const key of ["kind", "name", "group"] as const) {
        const value = (body.details as Record<string, unknown>)[key];
        if (typeof value === "string" && value !== "") details[key] = value;
      }
    }
  } catch {
    message = text.slice(0, 200).trim();
  }
  // The caller's message says what was asked (the secret, the lease); the answer's is the Status message.
  return new KubeApiError(codeForHttpStatus(status), `HTTP ${status}${message ? `: ${message}` : ""}`, {
    httpStatus: status,
    ...(reason !== undefined ? { reason } : {}),
    ...(details !== undefined ? { details } : {}),
  });
}

/**
 * `sent`, or a rejection as soon as `signal` aborts: undici heeds a signal only once the connection is open, so a
 * stalled TLS handshake would otherwise hold the caller until the connect timeout (10 s). An answer that arrives
 * after the abort is discarded.
 */
function untilAborted(sent: Promise<Dispatcher.ResponseData>, signal: AbortSignal): Promise<Dispatcher.ResponseData> {
  if (signal.aborted) {
    void sent.then(discard, () => undefined);
    return Promise.reject(signal.reason as Error);
  }
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      void sent.then(discard, () => undefined);
      reject(signal.reason as Error);
    };
    signal.addEventListener("abort", onAbort, { once: true });
    sent.then(
      (answer) => {
        signal.removeEventListener("abort", onAbort);
        if (signal.aborted) discard(answer);
        else resolve(answer);
      },
      (e: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(e as Error);
      },
    );
  });
}

function transportError(method: string, path: string, e: unknown, signal: AbortSignal | undefined): KubeApiError {
  if (signal?.aborted) return new KubeApiError("aborted", `${method} ${path}: ${describeReason(signal.reason)}`, { cause: e });
  const code = (e as { code?: unknown }).code;
  if (code === "UND_ERR_HEADERS_TIMEOUT" || code === "UND_ERR_BODY_TIMEOUT")
    return new KubeApiError("timeout", `${method} ${path}: no answer in time`, { cause: e });
  const cause = (e as { cause?: unknown }).cause;
  const detail = cause instanceof Error && cause.message !== (e as Error).message ? ` (${cause.message})` : "";
  return new KubeApiError("unavailable", `${method} ${path}: ${(e as Error).message ?? String(e)}${detail}`, { cause: e });
}

function describeReason(reason: unknown): string {
  return reason instanceof Error ? reason.message : String(reason);
}
