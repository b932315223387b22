// The program inside the small cluster's test pods (built into an image by node-image.ts; Node builtins only,
// run by Node's type stripping). Two modes:
//
//   webhook — an HTTPS validating admission webhook on :8443 with the certificate mounted at /tls: it refuses a
//             ConfigMap whose data.verdict is "deny" and admits everything else; GET /healthz answers 200.
//   whoami  — calls the apiserver through the `kubernetes` Service (KUBERNETES_SERVICE_HOST/PORT) with the pod's
//             service-account token, verifying the apiserver's certificate with the mounted ca.crt, reads its
//             own Pod, and prints one line: `WHOAMI {"status":…,"name":…}` or `WHOAMI-ERROR <message>`.

import { readFileSync } from "node:fs";
import { createServer } from "node:https";
import { request } from "node:https";
import { hostname } from "node:os";

const SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount";

function webhook(): void {
  const server = createServer({ cert: readFileSync("/tls/tls.crt"), key: readFileSync("/tls/tls.key") }, (req, res) => {
    if (req.method === "GET" && req.url === "/healthz") {
      res.writeHead(200).end("ok");
      return;
    }
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      let review: { request?: { uid?: string; object?: { data?: Record<string, string> } } };
      try {
        review = JSON.parse(Buffer.concat(chunks).toString("utf8"));
      } catch {
        res.writeHead(400).end("not JSON");
        return;
      }
      const denied = review.request?.object?.data?.verdict === "deny";
      console.log(`review ${review.request?.uid}: ${denied ? "denied" : "allowed"}`);
      res.writeHead(200, { "content-type": "application/json" }).end(
        JSON.stringify({
          apiVersion: "admission.k8s.io/v1",
          kind: "AdmissionReview",
          response: { uid: review.request?.uid, allowed: !denied, ...(denied ? { status: { code: 403, message: "refused by the probe webhook" } } : {}) },
        }),
      );
    });
  });
  server.listen(8443, () => console.log("webhook listening on 8443"));
  process.on("SIGTERM", () => server.close(() => process.exit(0)));
}

function whoami(): void {
  const host = process.env.KUBERNETES_SERVICE_HOST;
  const port = process.env.KUBERNETES_SERVICE_PORT;
  const read = (name: string) => readFileSync(`${SERVICE_ACCOUNT_DIR}/${name}`, "utf8").trim();
  const namespace = read("namespace");
  const req = request(
    {
      host,
      port,
      path: `/api/v1/namespaces/${namespace}/pods/${hostname()}`,
      ca: read("ca.crt"),
      headers: { authorization: `Bearer ${read("token")}` },
      timeout: 10_000,
    },
    (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (chunk: Buffer) => chunks.push(chunk));
      res.on("end", () => {
        const body = Buffer.concat(chunks).toString("utf8");
        let name: string | undefined;
        try {
          name = (JSON.parse(body) as { metadata?: { name?: string } }).metadata?.name;
        } catch {
          // reported as undefined
        }
        console.log(`WHOAMI ${JSON.stringify({ status: res.statusCode, name, server: `${host}:${port}` })}`);
      });
    },
  );
  req.on("timeout", () => req.destroy(new Error(`no answer from ${host}:${port}`)));
  req.on("error", (err) => console.log(`WHOAMI-ERROR ${err.message}`));
  req.end();
}

const mode = process.argv[2];
if (mode === "webhook") webhook();
else if (mode === "whoami") whoami();
else {
  console.error(`usage: main.ts webhook|whoami (got ${mode})`);
  process.exit(2);
}
