// A tiny third-party ImageReview backend for tests. It stands in for a vendor's scanner service, which no
// real component here provides. It denies images whose name contains "blocked", requires a bearer token,
// counts the reviews it answers, and can be stopped and started again on the same port.
import { writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { stringify } from "yaml";
import { createCertificateAuthority, issueCertificate } from "../../src/tls/tls-bootstrap.ts";
import { backendKubeconfig } from "./backend-kubeconfig.ts";
import { recordPrivateKey, recordSecret } from "./secret-ledger.ts";

export interface TestBackend {
  port: number;
  url: string;
  reviews: Array<{ spec: { containers: Array<{ image: string }>; annotations?: Record<string, string>; namespace?: string } }>;
  stop(): Promise<void>;
  start(): Promise<void>;
}

export async function startTestBackend(tls: { cert: string; key: string }, token: string, port = 0): Promise<TestBackend> {
  recordSecret("an ImageReview backend token", token);
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

/**
 * A test backend with its own CA, and the files `serve --config` reads to reach it, written into `dir`: the CA
 * (backend-ca.crt), a kubeconfig with the token (scanner.kubeconfig) and a ServerConfig naming the backend
 * "scanner" (config.yaml, returned as `configPath`).
 */
export async function startConfiguredTestBackend(
  dir: string,
  options: { token: string; timeout?: string; /** More ServerConfig fields. */ config?: Record<string, unknown> },
): Promise<{ backend: TestBackend; configPath: string }> {
  const ca = await createCertificateAuthority("test backend CA");
  const serving = await issueCertificate(ca, { commonName: "backend", ipAddresses: ["127.0.0.1"] });
  recordPrivateKey(ca.keyPem, "an ImageReview backend's CA key");
  recordPrivateKey(serving.keyPem, "an ImageReview backend's TLS key");
  const backend = await startTestBackend({ cert: serving.certPem, key: serving.keyPem }, options.token);
  await writeFile(join(dir, "backend-ca.crt"), ca.certPem);
  await writeFile(join(dir, "scanner.kubeconfig"), backendKubeconfig({ server: backend.url, caFile: "backend-ca.crt", user: { token: options.token } }));
  const configPath = join(dir, "config.yaml");
  await writeFile(
    configPath,
    stringify({
      apiVersion: "imprimatur.dev/v1alpha1",
      kind: "ServerConfig",
      backends: [{ name: "scanner", kubeconfig: "scanner.kubeconfig", ...(options.timeout ? { timeout: options.timeout } : {}) }],
      ...options.config,
    }),
  );
  return { backend, configPath };
}
