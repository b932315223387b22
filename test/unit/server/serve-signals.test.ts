// Signals that reach `imprimatur serve` while it is still starting: SIGTERM and SIGINT stop the start-up and exit
// 0 (a pod deleted while it starts), SIGHUP is remembered and reloads the policies once serving. The real command
// runs as a child; it is held in start-up by a namespaces file that is a named pipe (FIFO), whose read waits
// until the test writes to it. The test knows the child is inside start-up when its own open of the pipe for
// writing returns, which happens only once the child has opened it for reading.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { constants, openSync, closeSync } from "node:fs";
import { mkdtemp, open, readdir, rm, type FileHandle } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { logMessage, startServeWithLines, type ServeWithLines } from "../../support/serve-lines.ts";

interface StartingServe extends ServeWithLines {
  stateDir: string;
  /** The namespaces pipe, open for writing: the child is blocked reading it until it is closed. */
  gate: FileHandle;
  cleanup(): Promise<void>;
}

/** Starts serve and returns once it is inside start-up, reading the namespaces pipe. */
async function startServeHeldInStartup(): Promise<StartingServe> {
  const dir = await mkdtemp(join(tmpdir(), "imprimatur-signals-"));
  const fifo = join(dir, "namespaces.yaml");
  execFileSync("mkfifo", [fifo]);
  const stateDir = join(dir, "state");
  const serve = await startServeWithLines(["--namespaces", fifo], { stateDir, waitForServing: false });
  // Opening a pipe for writing waits for a reader. Should the child die first, this test opens the reading end
  // itself so that the open returns (a blocked open would keep the test process from exiting).
  const releaseIfDead = serve.exited.then(() => closeSync(openSync(fifo, constants.O_RDONLY | constants.O_NONBLOCK)));
  const gate = await open(fifo, "w");
  if (!serve.running()) {
    await releaseIfDead;
    assert.fail(`serve exited before reading the namespaces file: ${serve.stderr()}`);
  }
  return {
    ...serve,
    stateDir,
    gate,
    cleanup: async () => {
      await gate.close().catch(() => undefined);
      await serve.kill();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** Whether a stdout line has message `msg`, now or before the child exits. */
function logs(serve: StartingServe, msg: string): Promise<boolean> {
  return serve.line(logMessage(msg)).then(
    () => true,
    () => false,
  );
}

/** The message of a JSON log line. */
function messageOf(line: string): string | undefined {
  try {
    return (JSON.parse(line) as { msg?: string }).msg;
  } catch {
    return undefined;
  }
}

/** Resolves once the child's stderr contains `text`, or it has exited. */
async function stderrShows(serve: StartingServe, text: string): Promise<void> {
  while (!serve.stderr().includes(text) && serve.running()) {
    await new Promise((r) => setTimeout(r, 50));
  }
}

for (const signal of ["SIGTERM", "SIGINT"] as const) {
  test(`${signal} during start-up stops it while a start-up step still waits, and exits 0 with nothing written`, async () => {
    const serve = await startServeHeldInStartup();
    try {
      serve.child.kill(signal);
      // Said while the namespaces file is still unread: the stop does not wait for start-up to get further.
      await stderrShows(serve, `${signal} during start-up`);
      assert.match(serve.stderr(), new RegExp(`${signal} during start-up: stopped before serving`));
      assert.equal(serve.child.signalCode, null, "not ended by the signal's default action");
      // A SIGHUP while it winds down neither reloads nor ends it by the default action.
      serve.child.kill("SIGHUP");
      // The read it abandoned may now end; the process then exits by itself.
      await serve.gate.close();
      assert.deepEqual(await serve.exited, { code: 0, signal: null });
      assert.ok(!serve.lines.some((l) => l.includes('"msg":"serving"')), "it never started serving");
      // Stopped before the certificate step: the state folder holds nothing, half-written or whole.
      assert.deepEqual(await readdir(serve.stateDir).catch(() => []), []);
    } finally {
      await serve.cleanup();
    }
  });
}

test("SIGHUP during start-up does not end the process: the policies are reloaded once it serves", async () => {
  const serve = await startServeHeldInStartup();
  try {
    serve.child.kill("SIGHUP");
    await serve.gate.close();
    assert.ok(await logs(serve, "serving"), `serve kept running and started: ${serve.stderr()}`);
    assert.ok(await logs(serve, "policies reloaded"), `the SIGHUP received during start-up reloads the policies: ${serve.stderr()}`);
    serve.child.kill("SIGTERM");
    assert.deepEqual(await serve.exited, { code: 0, signal: null });
    const reloads = serve.lines.filter((l) => messageOf(l) === "policies reloaded");
    assert.equal(reloads.length, 1, "one SIGHUP, one reload");
  } finally {
    await serve.cleanup();
  }
});
