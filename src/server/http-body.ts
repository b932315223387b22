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
  // Plain listeners rather than `for await`: this is the hot path and the async iterator costs measurably more.
  const text = await new Promise<string>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (chunk: Buffer) => {
      if (size > maxBytes) return; // already failed; drain the rest
      size += chunk.length;
      if (size > maxBytes) reject(new HttpError(413, `request body exceeds the limit of ${maxBytes} bytes`));
      else chunks.push(chunk);
    });
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    req.on("error", reject);
  });
  if (text.length === 0) throw new HttpError(400, "request body is empty; expected JSON");
  try {
    return JSON.parse(text);
  } catch (e) {
    // V8 reports both syntax errors and too-deep nesting here.
    throw new HttpError(400, `request body is not valid JSON: ${(e as Error).message}`);
  }
}

/** `?timeout=10s` as sent by kube-apiserver to admission webhooks, in ms; undefined when absent or invalid. */
export function parseTimeoutParam(url: string | undefined): number | undefined {
  // A regex instead of new URL(): this runs on every admission request.
  const m = url ? /[?&]timeout=([^&]*)/.exec(url) : null;
  return m ? parseDuration(decodeURIComponent(m[1]!)) : undefined;
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
