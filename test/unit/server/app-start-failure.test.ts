// A start-up that fails part-way closes what it opened before the failing step: the metrics port (opened
// first) when the HTTPS port cannot be had, and the HTTPS and metrics ports when the background scan is asked
// for without the Kubernetes API, so a refused start leaves nothing listening that would keep the process alive.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { get } from "node:http";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { EMBEDDED_POLICIES } from "../../../src/cli/args.ts";
import { hasErrorCode } from "../../../src/errors/imprimatur-error.ts";
import { ServerStartError } from "../../../src/server/app.ts";
import { startTestApp } from "../../support/in-process-app.ts";
import { freePorts } from "../../support/ports.ts";

/** Rejects with the connection error when nothing listens on the port. */
function connect(port: number): Promise<unknown> {
  return new Promise((resolve, reject) => {
    get(`http://127.0.0.1:${port}/healthz`, { agent: false }, (res) => (res.resume(), resolve(res.statusCode))).on("error", reject);
  });
}

function listen(port: number): Promise<Server> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen({ host: "127.0.0.1", port, exclusive: true }, () => resolve(server));
  });
}

async function withStateDir(run: (stateDir: string) => Promise<void>): Promise<void> {
  const stateDir = await mkdtemp(join(tmpdir(), "imprimatur-start-failure-"));
  try {
    await run(stateDir);
  } finally {
    await rm(stateDir, { recursive: true, force: true });
  }
}

test("the HTTPS port taken: the start is refused and the metrics port it opened first is closed", async () => {
  const [port, metricsPort] = await freePorts(2);
  const taken = await listen(port!);
  try {
    await withStateDir(async (stateDir) => {
      await assert.rejects(startTestApp({ policies: EMBEDDED_POLICIES, stateDir, port, metricsPort }), /EADDRINUSE/);
      await assert.rejects(connect(metricsPort!), /ECONNREFUSED/);
    });
  } finally {
    await new Promise((resolve) => taken.close(resolve));
  }
});

test("the background scan without the Kubernetes API: a typed refusal, and the HTTPS and metrics ports are closed", async () => {
  const [port, metricsPort] = await freePorts(2);
  await withStateDir(async (stateDir) => {
    const backgroundScan = {
      reports: [],
      podsPerSecond: 20,
      rescanIntervalMs: 3_600_000,
      lease: { namespace: "default", name: "imprimatur-scan" },
      excludeNamespaces: [],
      errorRetryMs: 30_000,
    };
    await assert.rejects(
      startTestApp({ policies: EMBEDDED_POLICIES, stateDir, port, metricsPort, backgroundScan }),
      (e: unknown) =>
        e instanceof ServerStartError &&
        hasErrorCode(e, "needs-kubernetes-api") &&
        e.message === "the background scan needs the Kubernetes API: give --kubeconfig, or run in a pod",
    );
    await assert.rejects(connect(port!), /ECONNREFUSED/);
    await assert.rejects(connect(metricsPort!), /ECONNREFUSED/);
  });
});
