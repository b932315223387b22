// The server's log as `kubectl logs` sees it: the real `imprimatur serve` as a child process writing to a pipe.
// The start-up line arrives while the server runs (not when it exits); a routine line arrives without waiting for
// more lines to fill the batch; warnings and errors arrive at once and in order.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { logMessage, startServeWithLines, type ServeWithLines } from "../../support/serve-lines.ts";

const POLICY = `apiVersion: imprimatur.dev/v1alpha1
kind: ImagePolicy
metadata: { name: any }
spec:
  rules: [{ action: allow, images: ["*"] }]
`;

/** Reads the stdout lines in order: each call, the next line whose message is `msg`; the child must still be running when it arrives. */
function messagesInOrder(serve: ServeWithLines): (msg: string) => Promise<Record<string, unknown>> {
  let read = 0;
  return async (msg) => {
    const found = serve.lines.indexOf(await serve.line(logMessage(msg), read), read);
    // Every line on the way is a JSON log entry too.
    const entries = serve.lines.slice(read, found + 1).map((l) => JSON.parse(l) as Record<string, unknown>);
    read = found + 1;
    assert.equal(serve.child.exitCode, null, "the line arrived while the server runs");
    return entries.at(-1)!;
  };
}

test("the start-up line, routine lines and errors reach stdout while the server runs", async () => {
  const dir = await mkdtemp(join(tmpdir(), "imprimatur-logs-"));
  await writeFile(join(dir, "policy.yaml"), POLICY);
  let serve: ServeWithLines | undefined;
  try {
    serve = await startServeWithLines(["--policies", join(dir, "policy.yaml")], { stateDir: join(dir, "state") });
    const next = messagesInOrder(serve);
    const serving = await next("serving");
    assert.equal(serving.level, 30);
    assert.deepEqual(serving.policies, ["any"]);

    // A routine (info) line, alone: nothing else fills the batch, so it is the one-second flush that sends it.
    // The server watches its policy file (a signal could arrive before serve handles SIGHUP).
    await writeFile(join(dir, "policy.yaml"), POLICY.replace("name: any", "name: any-changed"));
    assert.equal((await next("policies reloaded")).level, 30);

    // An error line goes out at once, after the routine line written just before it.
    await writeFile(join(dir, "policy.yaml"), "apiVersion: imprimatur.dev/v1alpha1\nkind: ImagePolicy\nmetadata: { name: broken }\nspec: {}\n");
    assert.equal((await next("policy reload failed; keeping the last good policies")).level, 50);
    assert.equal(await serve.stop(), 0);
  } finally {
    await serve?.kill();
    await rm(dir, { recursive: true, force: true });
  }
});

test("a long error line is written whole at once, not left partly in the batch", async () => {
  // 17,000 bytes: longer than a batch and than one write chunk (16 KiB).
  const loggerUrl = new URL("../../../src/server/logger.ts", import.meta.url).href;
  const script = `import { createServerLogger } from ${JSON.stringify(loggerUrl)};
const { logger } = createServerLogger("info");
logger.info("routine");
logger.error({ detail: "x".repeat(17000) }, "long error");
setInterval(() => {}, 60000);`;
  const child = spawn(process.execPath, ["--input-type=module", "-e", script], { stdio: ["ignore", "pipe", "inherit"] });
  try {
    const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
    const first = JSON.parse((await lines.next()).value as string) as Record<string, unknown>;
    assert.equal(first.msg, "routine", "the routine line before it comes first");
    const second = JSON.parse((await lines.next()).value as string) as Record<string, unknown>;
    assert.equal(second.msg, "long error");
    assert.equal((second.detail as string).length, 17000);
    assert.equal(child.exitCode, null, "while the process runs");
  } finally {
    child.kill("SIGKILL");
  }
});
