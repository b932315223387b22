// kill -9 while the state folder's certificates are being written (a new CA, a re-issued serving certificate): the
// restart always finds or makes a CA and a serving certificate that belong together, and a TLS server with them
// is trusted through ca.crt alone. The files are written by rename (write-file-atomic.ts), and a pair left
// mismatched by a kill between two renames is detected and re-issued (tls-bootstrap.ts).
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { createServer, request } from "node:https";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, test } from "node:test";
import { ensureServingCertificate } from "../../../src/tls/tls-bootstrap.ts";

const CHILD = fileURLToPath(new URL("./tls-bootstrap-crash-child.ts", import.meta.url));

let root: string;
before(async () => {
  root = await mkdtemp(join(tmpdir(), "imprimatur-tls-crash-"));
});
after(async () => {
  await rm(root, { recursive: true, force: true });
});

function get(port: number, ca: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port, path: "/", method: "GET", agent: false, ca: [ca] }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => (body += chunk));
      res.on("end", () => resolve(body));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end();
  });
}

test("kill -9 at any moment of certificate writes: the restart serves a pair trusted through ca.crt", { timeout: 240_000 }, async () => {
  for (let round = 0; round < 8; round++) {
    const dir = join(root, `round-${round}`);
    const child = spawn(process.execPath, [CHILD, dir], { stdio: ["ignore", "pipe", "pipe"] });
    let issued = -1;
    let stderr = "";
    child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
    // Killed after a few rounds, at a moment that varies from round to round (key generation and writes take
    // milliseconds, so a few milliseconds' difference lands in different steps).
    const killed = new Promise<void>((resolve, reject) => {
      child.stdout.on("data", (c: Buffer) => {
        for (const m of c.toString().matchAll(/issued (\d+)/g)) issued = Number(m[1]);
        if (issued >= 2 + (round % 3) && child.exitCode === null && !child.killed) setTimeout(() => child.kill("SIGKILL"), round * 3);
      });
      child.on("exit", (code, signal) => (signal === "SIGKILL" ? resolve() : reject(new Error(`the writer exited ${code}: ${stderr}`))));
    });
    await killed;

    // The restart: whatever the kill left, the material it gets is a CA and a serving certificate that belong together.
    const material = await ensureServingCertificate(dir, ["127.0.0.1"]);
    const server = createServer({ cert: material.certPem, key: material.keyPem }, (_req, res) => res.end("ok"));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    try {
      const caOnDisk = await readFile(join(dir, "ca.crt"), "utf8");
      assert.equal(caOnDisk, material.caCertPem, `round ${round}: ca.crt is the CA served`);
      assert.equal(await get((server.address() as AddressInfo).port, caOnDisk), "ok", `round ${round}`);
    } finally {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  }
});
