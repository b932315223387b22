// A plain-HTTP reverse proxy on 127.0.0.1 in front of a real kube-apiserver, for the one client a test wants to
// stall: hold() makes every request that arrives from then on wait, unanswered, until release() sends them on in
// the order they came. A replica whose kubeconfig names the proxy is then "a leader paused between reading and
// writing" (a long GC pause, a frozen node, a slow network) at a moment the test chooses, which no real
// apiserver lets a test do otherwise. The client's own credentials (its bearer token) pass through unchanged;
// only the hop to the apiserver is TLS, verified with the apiserver's CA.
//
// cut() drops every connection and refuses new ones: the apiserver unreachable for that client alone.
//
// Each request is recorded with its method, path, whether it was held, the apiserver's status and the request body.

import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { Agent, request } from "node:https";
import type { AddressInfo } from "node:net";

export interface ProxiedApiRequest {
  method: string;
  path: string;
  /** It arrived while the proxy was holding. */
  held: boolean;
  /** The apiserver's answer (0 until it came, or when the hop failed, or when it was dropped). */
  status: number;
  /** A delayed request whose client was gone when it was due: never sent, as a write cut off by its writer's death. */
  dropped?: boolean;
  body: string;
}

export interface HoldingApiProxy {
  /** "http://127.0.0.1:PORT": the server to put in the stalled client's kubeconfig. */
  url: string;
  requests: ProxiedApiRequest[];
  /** From now on, requests wait unanswered. */
  hold(): void;
  /** Sends the held requests on, in order, and stops holding. */
  release(): void;
  /**
   * The apiserver gone for this client: every open connection (watches included) is dropped, and every new one is
   * closed as soon as it is made, until restore().
   */
  cut(): void;
  restore(): void;
  /**
   * From now on, requests `which` picks are answered by the proxy with `status` and a Status body, as an apiserver
   * that refuses them (a failing etcd, an admission plugin); refuse(undefined) stops.
   */
  refuse(which: ((r: { method: string; path: string }) => boolean) | undefined, status?: number): void;
  /**
   * From now on, requests `which` picks (given their URL with its query) are sent on `ms` late, unless their client
   * is gone by then (killed): those are dropped, never reaching the apiserver. delay(undefined) stops.
   */
  delay(which: ((r: { method: string; url: string }) => boolean) | undefined, ms?: number): void;
  stop(): Promise<void>;
}

// Hop-by-hop headers (RFC 9110 §7.6.1) are the proxy's own business, not forwarded.
const HOP_BY_HOP = new Set(["connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "te", "trailer", "host"]);

export async function startHoldingApiProxy(opts: { upstream: string; caPem: string }): Promise<HoldingApiProxy> {
  const upstream = new URL(opts.upstream);
  const agent = new Agent({ keepAlive: true, ca: opts.caPem });
  let holding = false;
  let cutOff = false;
  let waiting: Array<() => void> = [];
  let refusing: { which: (r: { method: string; path: string }) => boolean; status: number } | undefined;
  let delaying: { which: (r: { method: string; url: string }) => boolean; ms: number } | undefined;
  const requests: ProxiedApiRequest[] = [];

  const forward = (req: IncomingMessage, res: ServerResponse, body: Buffer, record: ProxiedApiRequest): void => {
    const headers = Object.fromEntries(Object.entries(req.headers).filter(([name]) => !HOP_BY_HOP.has(name)));
    const upstreamReq = request({ hostname: upstream.hostname, port: upstream.port, path: req.url, method: req.method, headers, agent }, (upstreamRes) => {
      record.status = upstreamRes.statusCode ?? 0;
      const out = Object.fromEntries(Object.entries(upstreamRes.headers).filter(([name]) => !HOP_BY_HOP.has(name)));
      res.writeHead(record.status, out);
      upstreamRes.pipe(res);
    });
    upstreamReq.on("error", (err) => {
      res.writeHead(502).end(`holding-api-proxy: ${err.message}`);
    });
    upstreamReq.end(body);
  };

  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      const record: ProxiedApiRequest = {
        method: req.method ?? "GET",
        path: (req.url ?? "/").split("?")[0]!,
        held: holding,
        status: 0,
        body: body.toString("utf8"),
      };
      requests.push(record);
      if (refusing?.which(record)) {
        record.status = refusing.status;
        const status = { kind: "Status", apiVersion: "v1", status: "Failure", message: "refused by holding-api-proxy", code: refusing.status };
        res.writeHead(refusing.status, { "content-type": "application/json" }).end(JSON.stringify(status));
        return;
      }
      const send = () => forward(req, res, body, record);
      if (holding) waiting.push(send);
      else if (delaying?.which({ method: record.method, url: req.url ?? "/" }))
        setTimeout(() => {
          if (req.socket.destroyed) record.dropped = true;
          else send();
        }, delaying.ms);
      else send();
    });
  });
  server.on("connection", (socket) => {
    if (cutOff) socket.destroy();
  });
  await new Promise<void>((resolve) => server.listen({ host: "127.0.0.1", port: 0 }, resolve));
  const port = (server.address() as AddressInfo).port;
  const release = () => {
    holding = false;
    const queued = waiting;
    waiting = [];
    for (const send of queued) send();
  };
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    hold() {
      holding = true;
    },
    release,
    cut() {
      cutOff = true;
      server.closeAllConnections();
    },
    restore() {
      cutOff = false;
    },
    refuse(which, status = 500) {
      refusing = which ? { which, status } : undefined;
    },
    delay(which, ms = 0) {
      delaying = which ? { which, ms } : undefined;
    },
    async stop() {
      release();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      agent.destroy();
    },
  };
}
