// kill -9 of a process writing the audit log: every record it acknowledged (durable before the admission is
// answered) is there after the restart, every line reads as JSON, and a record cut mid-line is moved aside
// (into `<log>.torn`) before the next one is appended, so it cannot swallow it.
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, test } from "node:test";
import { AuditLog } from "../../src/audit/audit-log.ts";
import type { TornLineRepair } from "../../src/fs/torn-line.ts";

const CHILD = fileURLToPath(new URL("./audit-log-crash-child.ts", import.meta.url));

let root: string;
before(async () => {
  root = await mkdtemp(join(tmpdir(), "imprimatur-audit-crash-"));
});
after(async () => {
  await rm(root, { recursive: true, force: true });
});

/** Reopens the log as a restarted server does, appends one record, and returns every line parsed, and the repair. */
async function restart(path: string): Promise<{ records: Array<{ i: number }>; repair: TornLineRepair | undefined }> {
  let repair: TornLineRepair | undefined;
  const log = new AuditLog(path, { onTornLine: (r) => (repair = r) });
  await log.append({ time: new Date().toISOString(), event: "break-glass", i: -1 });
  await log.close();
  const text = await readFile(path, "utf8");
  assert.ok(text.endsWith("\n"));
  const records = text
    .slice(0, -1)
    .split("\n")
    .map((line, n) => {
      try {
        return JSON.parse(line) as { i: number };
      } catch {
        assert.fail(`line ${n + 1} of the audit log is not JSON after the restart: ${line.slice(0, 80)}…`);
      }
    });
  return { records, repair };
}

test("a record cut mid-line by a crash is moved aside on restart; the records before it and the next one are whole", async () => {
  const path = join(root, "torn", "audit.jsonl");
  const child = spawnSync(process.execPath, [CHILD, path, "torn"], { encoding: "utf8", timeout: 60_000 });
  assert.equal(child.signal, "SIGKILL", child.stderr);
  const { records, repair } = await restart(path);
  assert.deepEqual(
    records.map((r) => r.i),
    [0, 1, -1],
  );
  assert.ok(repair, "the repair is reported");
  assert.equal(repair.savedTo, `${path}.torn`);
  const torn = await readFile(`${path}.torn`, "utf8");
  assert.equal(torn.length, repair.droppedBytes + 1);
  assert.match(torn, /^\{"time":"[^"]+","event":"fail-open","i":2,"padding":"x+\n$/);
});

test("kill -9 at any moment of a stream of records: every acknowledged record survives and every line reads", { timeout: 240_000 }, async () => {
  for (let round = 0; round < 6; round++) {
    const path = join(root, `loop-${round}`, "audit.jsonl");
    const child = spawn(process.execPath, [CHILD, path, "loop"], { stdio: ["ignore", "pipe", "pipe"] });
    let acked = -1;
    let stderr = "";
    child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
    // Killed after a few acknowledged records, at a moment that varies from round to round within a write.
    const killed = new Promise<void>((resolve, reject) => {
      child.stdout.on("data", (c: Buffer) => {
        for (const m of c.toString().matchAll(/acked (\d+)/g)) acked = Number(m[1]);
        if (acked >= 3 && child.exitCode === null && !child.killed) setTimeout(() => child.kill("SIGKILL"), round % 3);
      });
      child.on("exit", (code, signal) => (signal === "SIGKILL" ? resolve() : reject(new Error(`the writer exited ${code}: ${stderr}`))));
    });
    await killed;
    const { records } = await restart(path);
    const written = records.map((r) => r.i).filter((i) => i >= 0);
    // Every record acknowledged before the kill is there, in order, with nothing between them lost.
    assert.deepEqual(
      written.slice(0, acked + 1),
      Array.from({ length: acked + 1 }, (_, i) => i),
    );
    assert.ok(written.length <= acked + 2, "at most the record in flight beyond the acknowledged ones");
    assert.equal(records.at(-1)!.i, -1);
  }
});

test("a whole log is left as it is, and an absent one is created", async () => {
  const path = join(root, "whole", "audit.jsonl");
  const log = new AuditLog(path);
  await log.append({ time: "t", event: "fail-open", i: 0 });
  await log.close();
  const before = await readFile(path, "utf8");
  const { records, repair } = await restart(path);
  assert.equal(repair, undefined);
  assert.equal((await readFile(path, "utf8")).startsWith(before), true);
  assert.deepEqual(
    records.map((r) => r.i),
    [0, -1],
  );
  assert.equal(existsSync(`${path}.torn`), false);
});

test("a log that is one unfinished line (the first record cut) is emptied into the torn file", async () => {
  const dir = join(root, "first");
  const path = join(dir, "audit.jsonl");
  await mkdir(dir);
  const fragment = '{"time":"t","event":"fail-open","i":0,"pad';
  await writeFile(join(dir, "audit.jsonl"), fragment);
  const { records, repair } = await restart(path);
  assert.deepEqual(
    records.map((r) => r.i),
    [-1],
  );
  assert.equal(repair?.droppedBytes, fragment.length);
  assert.equal(await readFile(`${path}.torn`, "utf8"), `${fragment}\n`);
});
