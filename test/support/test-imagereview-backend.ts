// A tiny third-party ImageReview backend for tests. It stands in for a vendor's scanner service, which no
// real component here provides. It denies images whose name contains "blocked", requires a bearer token,
// counts the reviews it answers, and can be stopped and started again on the same port.
import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";

export interface TestBackend {
  port: number;
  url: string;
  reviews: Array<{ spec: { containers: Array<{ image: string }>; annotations?: Record<string, string>; namespace?: string } }>;
  stop(): Promise<void>;
  start(): Promise<void>;
}

export async function startTestBackend(tls: { cert: string; key: string }, token: string, port = 0): Promise<TestBackend> {
  const reviews: TestBackend["reviews"] = [];
  let server: Server | undefined;
  const listen = (p: number) =>
    new Promise<Server>((resolve, reject) => {
      const s = createServer(tls, (req, res) => {
        const chunks: Buffer[] = [];
        req.on("data", (c: Buffer) => chunks.push(c));
        req.on("end", () => {
          if (req.headers.authorization !== `Bearer ${token}`) {
            res.writeHead(401).end();
            return;
          }
          const review = JSON.parse(Buffer.concat(chunks).toString("utf8"));
          reviews.push(review);
          const blocked = review.spec.containers.map((c: { image: string }) => c.image).filter((i: string) => i.includes("blocked"));
          review.status = blocked.length
            ? { allowed: false, reason: `scanner found critical CVEs in ${blocked.join(", ")}` }
            : { allowed: true, auditAnnotations: { scanned: "clean" } };
          res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(review));
        });
      });
      s.once("error", reject);
      s.listen(p, "127.0.0.1", () => resolve(s));
    });
  server = await listen(port);
  const actualPort = (server.address() as AddressInfo).port;
  return {
    port: actualPort,
    url: `https://127.0.0.1:${actualPort}/review`,
    reviews,
    stop: async () => {
      const s = server;
      server = undefined;
      if (!s) return;
      s.closeAllConnections();
      await new Promise<void>((r) => s.close(() => r()));
    },
    start: async () => {
      server ??= await listen(actualPort);
    },
  };
}
