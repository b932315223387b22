// One HTTP exchange with a registry, a token realm or wherever a registry redirects: timeouts, redirects
// followed by hand with the rules below, bounded body reads, and transport failures turned into RegistryErrors.
//
// Redirect rules (undici 7+ no longer follows redirects for request(), and its rules would not be ours):
// - at most MAX_REDIRECTS hops;
// - the Authorization header goes only to the origin it was meant for (scheme, host and port equal): a blob
//   redirect to a storage host must not carry the registry credential or token;
// - plain HTTP only to hosts listed insecure: an https → http downgrade is refused, and so is any other
//   plain-HTTP URL to an unlisted host;
// - every hop is a new connection through the host's agent, so a redirect to a local address (loopback,
//   link-local, metadata) is refused like a first request to one (guarded-connector.ts).
import type { IncomingHttpHeaders } from "node:http";
import { request } from "undici";
import type { DownloadBudget } from "./download-budget.ts";
import type { EndpointAgents } from "./endpoint-agents.ts";
import { AddressRefusedError, describeKind } from "./guarded-connector.ts";
import { RegistryError } from "./registry-error.ts";
import { hostOf, isInsecureHost, type RegistrySettings, type RegistrySettingsMap } from "./registry-settings.ts";

type UndiciBody = Awaited<ReturnType<typeof request>>["body"];

const MAX_REDIRECTS = 5;
const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);
const ERROR_BODY_LIMIT = 16 * 1024;

/** What onRoundTrip sees: one HTTP request and its status (0 when no response came). */
export interface RoundTrip {
  method: string;
  /** Origin and path only: query strings can carry signatures (pre-signed storage URLs). */
  url: string;
  status: number;
}

/** Who the exchange is for, so that errors name the registry and repository. */
export interface ExchangeContext {
  registry: string;
  repository: string;
}

export interface HttpRequest {
  method: "GET" | "HEAD" | "POST" | "PUT";
  url: URL;
  headers?: Record<string, string>;
  body?: string | Buffer;
  /** Sent only to `origin` ("https://host:port"), on the first hop and any redirect hop back to it. */
  authorization?: { value: string; origin: string };
  /** Settings of the registry that named this URL; unlisted hosts borrow its CA (see EndpointAgents). */
  namedBy?: RegistrySettings;
  /** What the URL is when it is not the registry API, for messages: "the token realm". */
  role?: string;
  followRedirects?: boolean;
  signal?: AbortSignal;
  context: ExchangeContext;
}

export interface HttpTransportOptions {
  agents: EndpointAgents;
  settings: RegistrySettingsMap;
  requestTimeoutMs: number;
  onRoundTrip?: (trip: RoundTrip) => void;
}

export class HttpTransport {
  readonly #options: HttpTransportOptions;

  constructor(options: HttpTransportOptions) {
    this.#options = options;
  }

  async exchange(req: HttpRequest): Promise<HttpResponse> {
    let url = req.url;
    let method = req.method;
    let body = req.body;
    let redirectedFrom: URL | undefined;
    for (let hop = 0; ; hop++) {
      this.#checkPlainHttp(url, req.context);
      const headers: Record<string, string> = { ...req.headers };
      if (req.authorization && url.origin === req.authorization.origin) headers.authorization = req.authorization.value;
      const timeout = AbortSignal.timeout(this.#options.requestTimeoutMs);
      const signal = req.signal ? AbortSignal.any([req.signal, timeout]) : timeout;
      const target = { url, redirectedFrom, role: req.role, namedBy: req.namedBy?.host };
      const failure = (e: unknown): RegistryError =>
        transportError(e, { ...target, context: req.context, caller: req.signal, timeout, timeoutMs: this.#options.requestTimeoutMs });

      let answer: Awaited<ReturnType<typeof request>>;
      try {
        answer = await request(url, {
          method,
          headers,
          body: body ?? null,
          signal,
          dispatcher: this.#options.agents.forHost(hostOf(url), req.namedBy),
        });
      } catch (e) {
        this.#options.onRoundTrip?.({ method, url: safeUrl(url), status: 0 });
        throw failure(e);
      }
      this.#options.onRoundTrip?.({ method, url: safeUrl(url), status: answer.statusCode });
      const response = new HttpResponse(answer.statusCode, answer.headers, url, answer.body, req.context, failure);

      const location = header(answer.headers, "location");
      if (!req.followRedirects || !REDIRECT_STATUSES.has(answer.statusCode) || location === undefined) return response;
      await response.discard();
      if (hop >= MAX_REDIRECTS) {
        throw new RegistryError("protocol", `${subject(req.context)}: more than ${MAX_REDIRECTS} redirects, the last from ${safeUrl(url)}`, {
          ...req.context,
          endpoint: hostOf(url),
        });
      }
      let next: URL;
      try {
        next = new URL(location, url);
      } catch {
        throw new RegistryError("protocol", `${subject(req.context)}: ${safeUrl(url)} redirected to an invalid URL`, { ...req.context, endpoint: hostOf(url) });
      }
      if (url.protocol === "https:" && next.protocol === "http:" && !isInsecureHost(this.#options.settings, hostOf(next))) {
        throw new RegistryError(
          "protocol",
          `${subject(req.context)}: refused the redirect from ${safeUrl(url)} to plain HTTP ${safeUrl(next)} (an HTTPS → HTTP downgrade); list ${hostOf(next)} with insecure: true in the registries file only if plain HTTP to it is intended`,
          { ...req.context, endpoint: hostOf(url) },
        );
      }
      if (answer.statusCode === 303 && method === "POST") {
        method = "GET";
        body = undefined;
      }
      redirectedFrom = url;
      url = next;
    }
  }

  #checkPlainHttp(url: URL, context: ExchangeContext): void {
    if (url.protocol === "https:") return;
    if (url.protocol === "http:" && isInsecureHost(this.#options.settings, hostOf(url))) return;
    const reason =
      url.protocol === "http:"
        ? `plain HTTP to ${hostOf(url)}, which is not listed with insecure: true in the registries file`
        : `the URL scheme ${JSON.stringify(url.protocol)}`;
    throw new RegistryError("protocol", `${subject(context)}: refused to contact ${safeUrl(url)}: ${reason}`, { ...context, endpoint: hostOf(url) });
  }
}

export class HttpResponse {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  /** The URL that answered, after redirects. */
  readonly url: URL;
  readonly #body: UndiciBody;
  readonly #context: ExchangeContext;
  readonly #failure: (e: unknown) => RegistryError;

  constructor(status: number, headers: IncomingHttpHeaders, url: URL, body: UndiciBody, context: ExchangeContext, failure: (e: unknown) => RegistryError) {
    this.status = status;
    this.headers = headers;
    this.url = url;
    this.#body = body;
    this.#context = context;
    this.#failure = failure;
  }

  header(name: string): string | undefined {
    return header(this.headers, name);
  }

  /**
   * The whole body, at most maxBytes of it: a larger Content-Length is rejected before reading, and bytes are
   * counted while reading, so a Content-Length that lies (or its absence) does not help. `what` names the
   * body in errors ("manifest latest", "blob sha256:…"). With a `budget`, the bytes are also taken from it,
   * the same way (code "download-limit" when it runs out).
   */
  async bytes(maxBytes: number, what: string, budget?: DownloadBudget): Promise<Buffer> {
    const tooLarge = (size: string): RegistryError => {
      this.#abandon();
      return new RegistryError("too-large", `${subject(this.#context)}: ${what} from ${safeUrl(this.url)} is ${size}; the limit is ${maxBytes} bytes`, {
        ...this.#context,
        endpoint: hostOf(this.url),
      });
    };
    const declared = this.header("content-length");
    if (declared !== undefined && /^\d+$/.test(declared) && Number(declared) > maxBytes) throw tooLarge(`${declared} bytes (Content-Length)`);
    const details = { ...this.#context, endpoint: hostOf(this.url) };
    const overBudget = (size: string): RegistryError => {
      this.#abandon();
      return budget!.exceeded(`${what} from ${safeUrl(this.url)} (${size})`, details);
    };
    if (budget && declared !== undefined && /^\d+$/.test(declared) && !budget.fits(Number(declared))) throw overBudget(`${declared} bytes, Content-Length`);
    const chunks: Buffer[] = [];
    let length = 0;
    try {
      for await (const chunk of this.#body) {
        const size = (chunk as Buffer).length;
        length += size;
        if (length > maxBytes) throw tooLarge(`more than ${maxBytes} bytes (counted while reading)`);
        if (budget && !budget.fits(size)) throw overBudget("counted while reading");
        budget?.take(size, what, details);
        chunks.push(chunk as Buffer);
      }
    } catch (e) {
      if (e instanceof RegistryError) throw e;
      throw this.#failure(e);
    }
    return Buffer.concat(chunks, length);
  }

  /** Stops reading: the connection is closed. undici reports that as an error event, which is expected here. */
  #abandon(): void {
    this.#body.on("error", () => {});
    this.#body.destroy();
  }

  /** Reads and drops the body so the connection can be reused; failures here do not matter. */
  async discard(): Promise<void> {
    try {
      await this.#body.dump({ limit: ERROR_BODY_LIMIT });
    } catch {
      // the connection is closed instead; nothing to report
    }
  }

  /**
   * A short summary of an OCI error body ({"errors":[{"code","message"}]}) for error messages, "" when there
   * is none. Registry error texts are bounded and stripped of control characters before they reach a message.
   */
  async errorSummary(): Promise<string> {
    let text: string;
    try {
      text = (await this.bytes(ERROR_BODY_LIMIT, "error body")).toString("utf8");
    } catch {
      return "";
    }
    let errors: unknown;
    try {
      errors = (JSON.parse(text) as { errors?: unknown }).errors;
    } catch {
      return "";
    }
    if (!Array.isArray(errors)) return "";
    const parts = errors.slice(0, 3).map((e) => {
      const { code, message } = (e ?? {}) as { code?: unknown; message?: unknown };
      return [typeof code === "string" ? code : "", typeof message === "string" ? message : ""].filter(Boolean).join(": ");
    });
    const summary = parts
      .filter(Boolean)
      .join("; ")
      .replace(/[\x00-\x1f\x7f]/g, " ");
    return summary.length > 200 ? summary.slice(0, 200) + "…" : summary;
  }
}

export function header(headers: IncomingHttpHeaders, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** "docker.io/library/nginx": how errors name what was asked for. */
export function subject(context: ExchangeContext): string {
  return `${context.registry}/${context.repository}`;
}

function safeUrl(url: URL): string {
  return url.origin + url.pathname;
}

const UNREACHABLE_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EPIPE",
  "UND_ERR_SOCKET",
  "UND_ERR_CLOSED",
]);
const TIMEOUT_CODES = new Set(["UND_ERR_CONNECT_TIMEOUT", "UND_ERR_HEADERS_TIMEOUT", "UND_ERR_BODY_TIMEOUT", "ETIMEDOUT"]);

interface FailedExchange {
  url: URL;
  redirectedFrom: URL | undefined;
  role: string | undefined;
  /** The host that named the URL (a token realm's registry). */
  namedBy: string | undefined;
  context: ExchangeContext;
  caller: AbortSignal | undefined;
  timeout: AbortSignal;
  timeoutMs: number;
}

function transportError(e: unknown, at: FailedExchange): RegistryError {
  if (e instanceof RegistryError) return e;
  const details = { ...at.context, endpoint: hostOf(at.url), cause: e };
  const refused = addressRefusal(e);
  if (refused) return new RegistryError("address-refused", `${subject(at.context)}: ${refusalMessage(refused, at)}`, details);
  const where = `${subject(at.context)}: ${at.url.origin}`;
  if (at.caller?.aborted) return new RegistryError("timeout", `${where}: gave up, the caller's deadline passed (request aborted)`, details);
  if (at.timeout.aborted) return new RegistryError("timeout", `${where}: no answer within ${at.timeoutMs} ms`, details);
  const code = errorCode(e);
  if (code !== undefined && TIMEOUT_CODES.has(code)) return new RegistryError("timeout", `${where}: timed out (${code})`, details);
  if (code !== undefined && isTlsCode(code)) {
    return new RegistryError(
      "unreachable",
      `${where}: TLS failed (${code}); if the registry uses a private CA, give it as ca in the registries file; if it speaks plain HTTP, list it with insecure: true`,
      { ...details, retryable: false },
    );
  }
  if (code !== undefined && UNREACHABLE_CODES.has(code)) return new RegistryError("unreachable", `${where}: cannot connect (${code})`, details);
  return new RegistryError("unreachable", `${where}: request failed (${code ?? (e as Error)?.message ?? String(e)})`, details);
}

/** An error and its causes, outermost first, at most five deep. */
function* causeChain(e: unknown): Generator<unknown> {
  for (let cur = e, depth = 0; cur && depth < 5; cur = (cur as { cause?: unknown }).cause, depth++) yield cur;
}

/** The guard's refusal, wherever undici put it among the error's causes. */
function addressRefusal(e: unknown): AddressRefusedError | undefined {
  for (const cur of causeChain(e)) if (cur instanceof AddressRefusedError) return cur;
  return undefined;
}

/**
 * "refused to connect to https://127.0.0.1:5000: 127.0.0.1:5000 is 127.0.0.1, a loopback address: refused; list …",
 * with what the URL was (a redirect target, a token realm) and the host to list to allow it.
 */
function refusalMessage(refused: AddressRefusedError, at: FailedExchange): string {
  const host = hostOf(at.url);
  let what = at.role === undefined ? at.url.origin : `${at.role} ${at.url.origin}${at.namedBy === undefined ? "" : ` named by ${at.namedBy}`}`;
  if (at.redirectedFrom !== undefined) what += ` (redirected from ${safeUrl(at.redirectedFrom)})`;
  // "localhost:5000 resolves to 127.0.0.1, a …", "127.0.0.1:5000 is 127.0.0.1, a …", "[::1] is a …".
  const address =
    refused.resolvedFrom !== undefined
      ? `${host} resolves to ${refused.address}, `
      : host === at.url.hostname
        ? `${host} is `
        : `${host} is ${refused.address}, `;
  return `refused to connect to ${what}: ${address}${describeKind(refused.kind)}: refused; list ${host} with allowLocalAddresses: true in the registries file if it is meant to be reached there`;
}

function errorCode(e: unknown): string | undefined {
  for (const cur of causeChain(e)) {
    const code = (cur as { code?: unknown }).code;
    if (typeof code === "string" && code !== "UND_ERR_ABORTED") return code;
  }
  return undefined;
}

function isTlsCode(code: string): boolean {
  return code.startsWith("ERR_SSL_") || code.startsWith("ERR_TLS_") || code === "EPROTO" || /CERT|SELF_SIGNED|UNABLE_TO_(GET|VERIFY)/.test(code);
}
