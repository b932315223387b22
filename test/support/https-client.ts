// A small HTTPS JSON client for tests, trusting one CA.
import { request } from "node:https";

export interface HttpResult {
  status: number;
  body: any;
  text: string;
}

export function postJson(
  url: string,
  ca: string,
  payload: unknown,
  opts: { raw?: string | Buffer; headers?: Record<string, string> } = {},
): Promise<HttpResult> {
  const data = opts.raw ?? JSON.stringify(payload);
  return send(url, ca, "POST", data, { "content-type": "application/json", ...opts.headers });
}

export function getText(url: string, ca: string, headers: Record<string, string> = {}): Promise<HttpResult> {
  return send(url, ca, "GET", undefined, headers);
}

function send(url: string, ca: string, method: string, data: string | Buffer | undefined, headers: Record<string, string>): Promise<HttpResult> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method, ca, headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => {
        const text = Buffer.concat(chunks).toString("utf8");
        let body: unknown;
        try {
          body = JSON.parse(text);
        } catch {
          body = undefined;
        }
        resolve({ status: res.statusCode ?? 0, body, text });
      });
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end(data);
  });
}
