// A bug while answering (an exception the handlers do not expect) is a 500 with a Status, logged as an error, and
// the server keeps serving; the apiserver's failurePolicy then decides. The engine here is a stand-in that throws:
// no real component can be made to fail this way on purpose, which is the point of the test.
import { test } from "node:test";
import assert from "node:assert/strict";
import { pino } from "pino";
import { Writable } from "node:stream";
import { NO_RECORDER } from "../../../src/engine/recorder.ts";
import type { Engine } from "../../../src/engine/engine.ts";
import { startHttpsServer } from "../../../src/server/https-server.ts";
import { createCertificateAuthority, issueCertificate } from "../../../src/tls/tls-bootstrap.ts";
import { podReview } from "../../support/admission.ts";
import { getText, postJson } from "../../support/https-client.ts";

test("an exception while answering is a 500 with a Status, logged, and the next request is answered", async () => {
  const ca = await createCertificateAuthority("internal-error-test");
  const cert = await issueCertificate(ca, { commonName: "s", ipAddresses: ["127.0.0.1"] });
  const lines: Array<Record<string, unknown>> = [];
  const logger = pino(
    { level: "info" },
    new Writable({
      write(chunk: Buffer, _encoding, done) {
        lines.push(JSON.parse(chunk.toString("utf8")) as Record<string, unknown>);
        done();
      },
    }),
  );
  let calls = 0;
  const engine = {
    review: async () => {
      if (++calls === 1) throw new TypeError("a bug");
      return { decision: { allowed: true, violations: [], warnings: [], auditAnnotations: {} } };
    },
  } as unknown as Engine;
  const running = await startHttpsServer({
    host: "127.0.0.1",
    port: 0,
    tls: { cert: cert.certPem, key: cert.keyPem },
    handlers: { engine },
    logger,
    recorder: NO_RECORDER,
    metrics: undefined,
    maxBodyBytes: 1024 * 1024,
    maxReviewsInFlight: 10,
    defaultTimeoutMs: 10_000,
    notReady: () => undefined,
  });
  try {
    const base = `https://127.0.0.1:${running.port}`;
    const failed = await postJson(`${base}/validate`, ca.certPem, podReview({ images: ["a:1"] }));
    assert.equal(failed.status, 500);
    assert.deepEqual(failed.body, { apiVersion: "v1", kind: "Status", status: "Failure", code: 500, message: "internal error" });
    const logged = lines.find((l) => l.msg === "unhandled error while answering");
    assert.ok(logged, "the error is logged");
    assert.equal(logged.level, 50);
    assert.match(JSON.stringify(logged.err), /a bug/);
    assert.equal((await getText(`${base}/healthz`, ca.certPem)).status, 200);
    const next = await postJson(`${base}/validate`, ca.certPem, podReview({ images: ["a:1"] }));
    assert.equal(next.status, 200);
    assert.equal(next.body.response.allowed, true);
  } finally {
    await running.close();
  }
});
