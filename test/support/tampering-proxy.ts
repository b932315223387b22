// An HTTPS reverse proxy on 127.0.0.1 in front of one real registry, for the end-to-end tests of what the
// registry client does when the bytes it gets are not the bytes the registry stored.
//
// No real registry serves a manifest whose bytes disagree with its digest, so the only way to test the client's
// verification against a real registry is to put something in between that lies: a compromised mirror, a
// caching proxy with a corrupt cache, a man in the middle holding a certificate the client trusts. This is that
// something. It terminates TLS with a certificate from its own CA (the client is told to trust it, as it would
// trust a mirror) and forwards every request to the registry unchanged, except in the tampering modes:
//   pass                   — forwards everything untouched (a well-behaved mirror);
//   alter-body             — in successful manifest GETs, changes one hex digit of the first digest in the body,
//                            keeping Content-Length and Docker-Content-Digest as the registry sent them;
//   alter-body-and-digest  — the same, and Docker-Content-Digest becomes the digest of the altered body, so the
//                            response is self-consistent and only a digest the client asked for can expose it.
// It records each request (method, path, whether it carried an Authorization header — never its value).
// A test may also make it a slow or stalled registry: `hold` keeps chosen requests waiting before they are forwarded
// (a blob that takes long to come, or never comes), and each record says whether the client hung up before its
// answer was complete (a pull cancelled, or a client that died).

import { createHash } from "node:crypto";
import { Agent as HttpAgent, request as httpRequest } from "node:http";
import type { IncomingHttpHeaders, IncomingMessage, OutgoingHttpHeaders, ServerResponse } from "node:http";
import { Agent as HttpsAgent, createServer, request as httpsRequest } from "node:https";
import type { AddressInfo } from "node:net";
import { createCertificateAuthority, issueCertificate } from "../../src/tls/tls-bootstrap.ts";
import { recordPrivateKey } from "./secret-ledger.ts";

export type TamperMode = "pass" | "alter-body" | "alter-body-and-digest";

export interface ProxiedRequest {
  method: string;
  path: string;
  status: number;
  /** Whether the client sent an Authorization header (its value is never kept). */
  authorization: boolean;
  tampered: boolean;
  /** Whether the request waited on `hold` before it was forwarded. */
  held: boolean;
  /** Whether the client closed the connection before the answer was complete (while held, or mid-body). */
  closedEarly: boolean;
}

/** Which requests wait, and for what: a promise delays the request until it settles; undefined forwards it at once. */
export type RequestHold = (request: { method: string; path: string }) => Promise<void> | undefined;

export interface TamperingProxy {
  /** "127.0.0.1:PORT", as image references name it. */
  host: string;
  /** The proxy's own CA: give it as the proxy host's `ca` in the registry settings. */
  caPem: string;
  /** What the proxy does to manifests from now on. */
  mode: TamperMode;
  /** Requests to keep waiting before they are forwarded (none by default). A client gone meanwhile is not forwarded. */
  hold: RequestHold | undefined;
  requests: ProxiedRequest[];
  stop(): Promise<void>;
}

export interface TamperingProxyOptions {
  /** The registry's base URL: "https://127.0.0.1:PORT" or "http://127.0.0.1:PORT". */
  upstream: string;
  /** CA the upstream's certificate chains to (HTTPS upstreams). */
  upstreamCa?: string;
}

const MANIFEST_PATH = /^\/v2\/.+\/manifests\/[^/]+$/;
// Hop-by-hop headers (RFC 9110 §7.6.1) are the proxy's own business, not forwarded.
const HOP_BY_HOP = new Set(["connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "te", "trailer", "host"]);

export async function startTamperingProxy(opts: TamperingProxyOptions): Promise<TamperingProxy> {
  const ca = await createCertificateAuthority(`imprimatur-test-tampering-proxy-ca@${process.pid}`);
  const serving = await issueCertificate(ca, { commonName: "imprimatur-test-tampering-proxy", ipAddresses: ["127.0.0.1"] });
  recordPrivateKey(ca.keyPem, "a tampering proxy's CA key");
  recordPrivateKey(serving.keyPem, "a tampering proxy's TLS key");
  const upstream = new URL(opts.upstream);
  const secure = upstream.protocol === "https:";
  const agent = secure ? new HttpsAgent({ keepAlive: true, ...(opts.upstreamCa ? { ca: opts.upstreamCa } : {}) }) : new HttpAgent({ keepAlive: true });

  const proxy: TamperingProxy = { host: "", caPem: ca.certPem, mode: "pass", hold: undefined, requests: [], stop: async () => {} };

  const forward = (req: IncomingMessage, res: ServerResponse): void => {
    const path = req.url ?? "/";
    const record: ProxiedRequest = {
      method: req.method ?? "GET",
      path: path.split("?")[0]!,
      status: 0,
      authorization: req.headers.authorization !== undefined,
      tampered: false,
      held: false,
      closedEarly: false,
    };
    proxy.requests.push(record);
    res.once("close", () => {
      if (!res.writableFinished) record.closedEarly = true;
    });
    const held = proxy.hold?.({ method: record.method, path: record.path });
    if (!held) {
      relay(req, res, record);
      return;
    }
    record.held = true;
    void held.then(
      () => {
        if (!record.closedEarly) relay(req, res, record);
      },
      () => res.destroy(),
    );
  };

  const relay = (req: IncomingMessage, res: ServerResponse, record: ProxiedRequest): void => {
    const path = req.url ?? "/";
    const send = secure ? httpsRequest : httpRequest;
    const upstreamReq = send(
      {
        protocol: upstream.protocol,
        hostname: upstream.hostname,
        port: upstream.port,
        method: req.method,
        path,
        headers: { ...endToEnd(req.headers), host: upstream.host },
        agent,
      },
      (upstreamRes) => {
        const status = upstreamRes.statusCode ?? 502;
        record.status = status;
        const headers = endToEnd(upstreamRes.headers);
        const tamper = proxy.mode !== "pass" && req.method === "GET" && status === 200 && MANIFEST_PATH.test(record.path);
        if (!tamper) {
          res.writeHead(status, headers);
          upstreamRes.pipe(res);
          return;
        }
        const chunks: Buffer[] = [];
        upstreamRes.on("data", (c: Buffer) => chunks.push(c));
        upstreamRes.on("error", () => res.destroy());
        upstreamRes.on("end", () => {
          const altered = alterFirstDigest(Buffer.concat(chunks));
          record.tampered = true;
          // Same length as the original, so the registry's Content-Length still holds.
          const out: OutgoingHttpHeaders = { ...headers, "content-length": String(altered.length) };
          if (proxy.mode === "alter-body-and-digest") out["docker-content-digest"] = `sha256:${createHash("sha256").update(altered).digest("hex")}`;
          res.writeHead(status, out);
          res.end(altered);
        });
      },
    );
    // A client gone mid-answer stops the upstream request too.
    res.once("close", () => {
      if (!res.writableFinished) upstreamReq.destroy();
    });
    upstreamReq.on("error", (err) => {
      record.status = 502;
      if (!res.headersSent) res.writeHead(502, { "content-type": "text/plain" });
      res.end(`tampering proxy: upstream failed: ${err.message}\n`);
    });
    req.pipe(upstreamReq);
  };

  const server = createServer({ cert: serving.certPem, key: serving.keyPem }, forward);
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen({ host: "127.0.0.1", port: 0 }, () => resolve());
  });
  proxy.host = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  proxy.stop = async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    agent.destroy();
  };
  return proxy;
}

function endToEnd(headers: IncomingHttpHeaders): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(headers)) if (value !== undefined && !HOP_BY_HOP.has(name)) out[name] = value;
  return out;
}

/**
 * The body with one hex digit of its first `"sha256:…"` string value changed (in a manifest: the config's
 * digest, so the altered manifest is still valid JSON that points at other content). Length is unchanged.
 */
export function alterFirstDigest(body: Buffer): Buffer {
  const marker = Buffer.from('"sha256:');
  const at = body.indexOf(marker);
  if (at < 0) throw new Error("tampering proxy: the manifest has no sha256 digest to alter");
  const altered = Buffer.from(body);
  const i = at + marker.length;
  altered[i] = altered[i] === 0x30 /* "0" */ ? 0x31 /* "1" */ : 0x30;
  return altered;
}
