// The writer's refusals that need no apiserver: a bad scan is refused before any request, no format is refused
// at construction, and an apiserver that does not answer is `unavailable`. (Everything that needs an apiserver is
// in test/e2e/policy-reports.test.ts, against a real one.)
import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:net";
import { KubeClient } from "../../../src/kube/kube-client.ts";
import { PolicyReportWriter } from "../../../src/kube/policy-report-writer.ts";
import { hasErrorCode } from "../../../src/errors/imprimatur-error.ts";

/** A loopback port nothing listens on: taken from the OS, then released. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

async function kubeConfigTo(port: number): Promise<KubeClient> {
  return new KubeClient({ server: `http://127.0.0.1:${port}`, insecureSkipTlsVerify: true, namespace: "default", origin: "test", token: "t" });
}

const POD = { apiVersion: "v1", kind: "Pod", name: "web-0", namespace: "shop", uid: "4f1c2a8e-1d2b-4c3d-9e8f-0a1b2c3d4e5f" };
const finding = { policy: "p", result: "fail" as const, message: "m", timestamp: { seconds: 1, nanos: 0 } };

test("an invalid scan is refused (a rejected promise, invalid-scan) before any request", async () => {
  const writer = new PolicyReportWriter(await kubeConfigTo(await closedPort()));
  const pending = writer.write({ resource: POD, results: [{ ...finding, result: "denied" as never }] });
  await assert.rejects(pending, (e: unknown) => hasErrorCode(e, "invalid-scan"));
  await assert.rejects(writer.clear({ uid: "" }), (e: unknown) => hasErrorCode(e, "invalid-scan"));
});

test("a writer with no format is refused", async () => {
  const kc = await kubeConfigTo(await closedPort());
  assert.throws(
    () => new PolicyReportWriter(kc, { formats: [] }),
    (e: unknown) => hasErrorCode(e, "invalid-format"),
  );
  assert.deepEqual(new PolicyReportWriter(kc).formats, ["wgpolicyk8s"], "the default");
});

test("an apiserver that does not answer gives unavailable, naming the request", async () => {
  const port = await closedPort();
  const indexed = new PolicyReportWriter(await kubeConfigTo(port), { formats: ["openreports"] });
  // The first operation fills the index: a list of the reports Imprimatur manages.
  await assert.rejects(
    indexed.write({ resource: POD, results: [finding] }),
    (e: unknown) => hasErrorCode(e, "unavailable") && /list (Report|ClusterReport) \(all, app\.kubernetes\.io\/managed-by=imprimatur\)/.test(e.message),
  );
  // A failed fill is tried again by the next operation.
  await assert.rejects(indexed.clear(POD), (e: unknown) => hasErrorCode(e, "unavailable") && /list /.test(e.message));
  const direct = new PolicyReportWriter(await kubeConfigTo(port), { formats: ["openreports"], index: false });
  await assert.rejects(
    direct.write({ resource: POD, results: [finding] }),
    (e: unknown) => hasErrorCode(e, "unavailable") && /read Report shop\/4f1c2a8e/.test(e.message),
  );
  await assert.rejects(direct.clear(POD), (e: unknown) => hasErrorCode(e, "unavailable") && /delete Report shop\//.test(e.message));
  await Promise.all([indexed.flush(), direct.flush()]);
});
