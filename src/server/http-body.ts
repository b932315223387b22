// Reading a JSON request body with a size limit; every failure is a clear 4xx, never a crash.
import type { IncomingMessage } from "node:http";
import { parseDuration } from "../core/primitives/duration.ts";
import { ImprimaturError } from "../errors/imprimatur-error.ts";

export type HttpErrorCode =
  /** 400: the body is not what the endpoint takes (empty, not UTF-8, not JSON, nested too deep, wrong shape). */
  | "bad-request"
  /** 413: larger than the limit. */
  | "too-large"
  /** 415: a media type the endpoint does not take. */
  | "unsupported";

const CODE_OF_STATUS: ReadonlyMap<number, HttpErrorCode> = new Map([
  [413, "too-large"],
  [415, "unsupported"],
]);

/** A request the server refuses with a 4xx `status`; the message goes back to the client. */
export class HttpError extends ImprimaturError<HttpErrorCode> {
  readonly status: number;
  constructor(status: number, message: string, code: HttpErrorCode = CODE_OF_STATUS.get(status) ?? "bad-request") {
    super(code, message);
    this.status = status;
  }
}

/** How deep objects and arrays may nest in a request body. A pod's AdmissionReview nests about 15 deep (managedFields are its deepest part). */
export const MAX_JSON_DEPTH = 64;

// Strict: malformed UTF-8 is refused, not turned into U+FFFD (which could make two different bodies read alike).
// ignoreBOM keeps a byte-order mark in the text, where JSON.parse refuses it.
const UTF8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

export async function readJsonBody(req: IncomingMessage, maxBytes: number, maxDepth = MAX_JSON_DEPTH): Promise<unknown> {
  const declared = declaredLength(req.rawHeaders);
  if (Number.isFinite(declared) && declared > maxBytes) {
    req.resume(); // drain so the connection can be reused or closed cleanly
    throw new HttpError(413, `request body is ${declared} bytes; the limit is ${maxBytes}`);
  }
  // Plain listeners rather than `for await`: this is the hot path and the async iterator costs measurably more.
  const body = await new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (chunk: Buffer) => {
      if (size > maxBytes) return; // already failed; drain the rest
      size += chunk.length;
      if (size > maxBytes) reject(new HttpError(413, `request body exceeds the limit of ${maxBytes} bytes`));
      else chunks.push(chunk);
    });
    req.on("end", () => resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)));
    req.on("error", reject);
  });
  if (body.length === 0) throw new HttpError(400, "request body is empty; expected JSON");
  let text: string;
  try {
    text = UTF8.decode(body);
  } catch {
    throw new HttpError(400, "request body is not valid UTF-8");
  }
  if (nestsDeeperThan(text, maxDepth)) throw new HttpError(400, `request body nests JSON objects and arrays more than ${maxDepth} levels deep`);
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new HttpError(400, `request body is not valid JSON: ${(e as Error).message}`);
  }
}

/**
 * The Content-Length header's value as a number (NaN when absent). Read from the raw header list: the first read of
 * `req.headers` builds an object of every header (about 2 µs an admission in the admission-throughput profile), and
 * nothing else on the path needs it. Node's HTTP parser already refuses a request with two Content-Length values
 * that differ.
 */
export function declaredLength(rawHeaders: readonly string[]): number {
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!;
    if (name.length === 14 && name.toLowerCase() === "content-length") return Number(rawHeaders[i + 1]);
  }
  return NaN;
}

/**
 * Whether brackets outside strings nest deeper than `limit`. JSON.parse itself accepts any depth, and what
 * reads the value afterwards recurses; so the depth is checked first. Hand-written rather than a JSON
 * parser with a depth option because it runs on every request: one pass over the text, jumping over each
 * string with indexOf, allocating nothing. It does not validate: malformed text is left to JSON.parse.
 */
export function nestsDeeperThan(text: string, limit: number): boolean {
  let depth = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      // '"': jump to the closing quote, one not escaped by an odd run of backslashes.
      let end = i;
      for (;;) {
        end = text.indexOf('"', end + 1);
        if (end < 0) return false; // unterminated string: JSON.parse reports it
        let backslashes = 0;
        while (text.charCodeAt(end - 1 - backslashes) === 0x5c) backslashes++;
        if (backslashes % 2 === 0) break;
      }
      i = end;
    } else if (c === 0x5b || c === 0x7b) {
      if (++depth > limit) return true; // "[" or "{"
    } else if (c === 0x5d || c === 0x7d) {
      depth--; // "]" or "}"
    }
  }
  return false;
}

// kube-apiserver sends the same `timeout=` with every call of a webhook: the last one parsed is kept.
let lastTimeout: { raw: string; ms: number | undefined } = { raw: "", ms: undefined };

/** `?timeout=10s` as sent by kube-apiserver to admission webhooks, in ms; undefined when absent or invalid. */
export function parseTimeoutParam(url: string | undefined): number | undefined {
  // A regex instead of new URL(): this runs on every admission request.
  const m = url ? /[?&]timeout=([^&]*)/.exec(url) : null;
  if (!m) return undefined;
  const raw = m[1]!;
  if (raw !== lastTimeout.raw) lastTimeout = { raw, ms: timeoutMs(raw) };
  return lastTimeout.ms;
}

function timeoutMs(raw: string): number | undefined {
  let text: string;
  try {
    text = decodeURIComponent(raw);
  } catch {
    return undefined; // a malformed escape ("%", "%E0%A4%A") is an invalid timeout, not an error of the request
  }
  const ms = parseDuration(text);
  return ms !== undefined && ms >= 0 ? ms : undefined;
}
