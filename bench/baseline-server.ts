// The baseline of bench/admission-throughput.ts: the least an HTTPS AdmissionReview webhook can do in Node.
// It reads the body, JSON.parses it and answers {apiVersion, kind, response: {uid, allowed: true}} — no
// validation, policy, metrics or logging. Run as its own process, like `imprimatur serve`, with the same TLS
// material, so that both servers are measured the same way.
//
//   node bench/baseline-server.ts --host 127.0.0.1 --port N --cert tls.crt --key tls.key [--after-turn]
//
// --after-turn answers as imprimatur serve does since 2026-11-30 (src/server/turn-batch.ts): after the event
// loop's turn has read every request that arrived in it. It shows what that technique alone gives a server that
// does nothing else, so the gain of imprimatur's own batching is not mistaken for less work.
import { readFileSync } from "node:fs";
import { createServer } from "node:https";
import type { IncomingMessage, ServerResponse } from "node:http";
import { parseArgs } from "node:util";
import { afterThisTurnsReads } from "../src/server/turn-batch.ts";

const { values } = parseArgs({
  options: {
    host: { type: "string", default: "127.0.0.1" },
    port: { type: "string" },
    cert: { type: "string" },
    key: { type: "string" },
    "after-turn": { type: "boolean", default: false },
  },
  strict: true,
});
if (!values.port || !/^\d+$/.test(values.port) || !values.cert || !values.key) {
  process.stderr.write("usage: node bench/baseline-server.ts --port N --cert FILE --key FILE [--host ADDR] [--after-turn]\n");
  process.exit(2);
}

const server = createServer({ cert: readFileSync(values.cert, "utf8"), key: readFileSync(values.key, "utf8"), minVersion: "TLSv1.2" }, handle);
// Same connection settings as src/server/https-server.ts.
server.keepAliveTimeout = 120_000; // as imprimatur serve: longer than the apiserver's 90 s idle timeout
server.headersTimeout = 30_000;
server.requestTimeout = 60_000;

function handle(req: IncomingMessage, res: ServerResponse) {
  if (req.method === "GET") {
    if (req.url === "/readyz") return send(res, 200, "ok", "text/plain; charset=utf-8");
    return send(res, 404, "not found", "text/plain; charset=utf-8");
  }
  const chunks: Buffer[] = [];
  req.on("data", (chunk: Buffer) => chunks.push(chunk));
  req.on("end", () => {
    let review: { apiVersion?: unknown; kind?: unknown; request?: { uid?: unknown } };
    try {
      review = JSON.parse(Buffer.concat(chunks).toString("utf8"));
    } catch {
      return send(res, 400, "not JSON", "text/plain; charset=utf-8");
    }
    const answer = { apiVersion: review.apiVersion, kind: review.kind, response: { uid: review.request?.uid, allowed: true } };
    if (values["after-turn"]) void afterThisTurnsReads().then(() => send(res, 200, JSON.stringify(answer), "application/json"));
    else send(res, 200, JSON.stringify(answer), "application/json");
  });
}

function send(res: ServerResponse, code: number, text: string, type: string) {
  res.writeHead(code, { "content-type": type, "content-length": Buffer.byteLength(text) });
  res.end(text);
}

server.once("error", (err) => {
  process.stderr.write(`baseline-server: ${err.message}\n`);
  process.exit(2);
});
server.listen(Number(values.port), values.host);

const stop = () => {
  server.close();
  server.closeIdleConnections();
};
process.once("SIGTERM", stop);
process.once("SIGINT", stop);
