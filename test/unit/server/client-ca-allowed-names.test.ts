// `serve --client-ca FILE --client-ca-allowed-names NAME`: a certificate of the client CA is a caller only when its
// common name is listed. Kubelets hold certificates of the cluster CA (CN system:node:NAME), so a cluster CA given
// as --client-ca must not make every node a caller. The real command runs as a child.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { request } from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { podReview } from "../../support/admission.ts";
import { createClientCa } from "../../support/caller-credentials.ts";
import { startServeWithLines, type ServeWithLines } from "../../support/serve-lines.ts";

/** POSTs an AdmissionReview to /validate with a client certificate; the status and the parsed answer. */
function validate(port: number, ca: string, cert: { certPem: string; keyPem: string }, body: unknown): Promise<{ status: number; body: any }> {
  const data = JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: "127.0.0.1",
        port,
        path: "/validate",
        method: "POST",
        ca,
        agent: false,
        cert: cert.certPem,
        key: cert.keyPem,
        headers: { "content-type": "application/json", "content-length": String(Buffer.byteLength(data)) },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(Buffer.concat(chunks).toString("utf8")) }));
      },
    );
    req.on("error", reject);
    req.end(data);
  });
}

test("a certificate of the client CA whose CN is not on --client-ca-allowed-names is refused with 401 and the reason; a listed one is answered", async () => {
  const dir = await mkdtemp(join(tmpdir(), "imprimatur-allowed-names-"));
  const clusterCa = await createClientCa("kubernetes");
  let serve: ServeWithLines | undefined;
  try {
    const stateDir = join(dir, "state");
    serve = await startServeWithLines(
      ["--client-ca", clusterCa.certPath, "--client-ca-allowed-names", "apiserver-a", "--client-ca-allowed-names", "apiserver-b,apiserver-c"],
      { stateDir },
    );
    const ca = await readFile(join(stateDir, "ca.crt"), "utf8");
    const review = podReview({ images: ["registry.example.com/app:1"] });

    const kubelet = await clusterCa.issue("/CN=system:node:node-1/O=system:nodes");
    const refused = await validate(serve.port, ca, kubelet, review);
    assert.equal(refused.status, 401);
    assert.match(refused.body.message, /unauthorized: the client certificate's common name "system:node:node-1" is not one of the allowed caller names/);
    // The organization is not a way in: a certificate naming a listed caller in O only is refused too.
    const inOrganization = await clusterCa.issue("/CN=system:node:node-2/O=apiserver-a");
    assert.equal((await validate(serve.port, ca, inOrganization, review)).status, 401);

    for (const subject of ["/CN=apiserver-a/O=cluster-a", "/CN=apiserver-c"]) {
      const answered = await validate(serve.port, ca, await clusterCa.issue(subject), review);
      assert.equal(answered.status, 200, subject);
      assert.equal(answered.body.response.uid, review.request.uid);
    }
    assert.match(serve.lines.join("\n"), /not one of the allowed caller names","msg":"caller refused"/);
    assert.equal(await serve.stop(), 0);
  } finally {
    await serve?.kill();
    await clusterCa.remove();
    await rm(dir, { recursive: true, force: true });
  }
});
