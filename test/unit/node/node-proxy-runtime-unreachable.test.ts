// `imprimatur node-proxy` when the container runtime cannot be reached (not up yet at boot, a wrong
// --runtime-endpoint): one sentence naming the endpoint and why, not gRPC's status text, and exit 2 so that the
// service manager starts it again. Run as the command, against sockets that are not there or accept nothing.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { imprimatur } from "../../support/cli-process.ts";

const dir = mkdtempSync(join(tmpdir(), "imprimatur-node-proxy-runtime-"));
after(() => rmSync(dir, { recursive: true, force: true }));

const SNAPSHOT_NOTE = "imprimatur node-proxy: no start has completed yet: the next start records the images then on the node as preloaded\n";

async function startAgainst(runtimeSocket: string, stateName: string) {
  return imprimatur([
    "node-proxy",
    "--listen",
    `unix://${join(dir, `${stateName}-proxy.sock`)}`,
    "--runtime-endpoint",
    `unix://${runtimeSocket}`,
    "--state-dir",
    join(dir, stateName),
  ]);
}

test("no socket at the runtime endpoint: the endpoint and the reason, exit 2", async () => {
  const socket = join(dir, "containerd.sock");
  const r = await startAgainst(socket, "absent");
  assert.equal(r.code, 2);
  assert.equal(
    r.stderr,
    `imprimatur node-proxy: the container runtime at unix://${socket} is not answering (there is no socket at ${socket}): start the runtime first, then start the proxy again\n` +
      SNAPSHOT_NOTE,
  );
});

test("something at the endpoint that accepts no connection: the endpoint and the reason, exit 2", async () => {
  const socket = join(dir, "not-a-socket.sock");
  writeFileSync(socket, "");
  const r = await startAgainst(socket, "refused");
  assert.equal(r.code, 2);
  assert.equal(
    r.stderr,
    `imprimatur node-proxy: the container runtime at unix://${socket} is not answering (nothing accepts connections on ${socket}): start the runtime first, then start the proxy again\n` +
      SNAPSHOT_NOTE,
  );
  assert.doesNotMatch(r.stderr, /UNAVAILABLE|Resolution note/);
});
