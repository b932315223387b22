// Reading a JSON request body with a size limit; every failure is a clear 4xx, never a crash.
import type { IncomingMessage } from "node:http";

export class HttpError extends Error {
  readonly status: number;
  constructor(status: number, message: string) {
    super(message);
    this.status = status;
  }
}

export async function readJsonBody(req: IncomingMessage, maxBytes: number): Promise<unknown> {
  const declared = Number(req.headers["content-length"]);
  if (Number.isFinite(declared) && declared > maxBytes) {
    req.resume(); // drain so the connection can be reused or closed cleanly
    throw new HttpError(413, `request body is ${declared} bytes; the limit is ${maxBytes}`);
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > maxBytes) {
      req.resume();
      throw new HttpError(413, `request body exceeds the limit of ${maxBytes} bytes`);
    }
    chunks.push(chunk);
  }
  if (size === 0) throw new HttpError(400, "request body is empty; expected JSON");
  const text = Buffer.concat(chunks).toString("utf8");
  try {
    return JSON.parse(text);
  } catch (e) {
    // V8 reports both syntax errors and too-deep nesting here.
    throw new HttpError(400, `request body is not valid JSON: ${(e as Error).message}`);
  }
}

/** `?timeout=10s` as sent by kube-apiserver to admission webhooks, in ms; undefined when absent or invalid. */
export function parseTimeoutParam(url: string | undefined): number | undefined {
  const raw = new URL(url ?? "/", "https://x").searchParams.get("timeout");
  if (!raw) return undefined;
  return parseDuration(raw);
}

/** Go-style durations: "500ms", "10s", "1m", "1h", "1h30m". */
export function parseDuration(text: string): number | undefined {
  const re = /(\d+(?:\.\d+)?)(ms|s|m|h)/gy;
  let total = 0;
  let matched = 0;
  let m: RegExpExecArray | null;
  while ((m = re.exec(text)) !== null) {
    const n = Number(m[1]);
    total += n * ({ ms: 1, s: 1000, m: 60_000, h: 3_600_000 } as const)[m[2] as "ms" | "s" | "m" | "h"];
    matched = re.lastIndex;
  }
  return matched === text.length && matched > 0 ? total : undefined;
}
