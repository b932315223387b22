import { test } from "node:test";
import { tempFolder } from "../support/temp-folders.ts";
import assert from "node:assert/strict";
import { readFile, stat, writeFile, chmod } from "node:fs/promises";
import { join } from "node:path";
import { AuditLog } from "../../src/audit/audit-log.ts";

test("records are appended in order as JSON lines, across reopenings", async () => {
  const dir = await tempFolder("imprimatur-audit-");
  const path = join(dir, "sub", "audit.jsonl");
  const log = new AuditLog(path);
  await Promise.all(Array.from({ length: 50 }, (_, i) => log.append({ time: "t", event: "break-glass", i })));
  await log.close();
  const again = new AuditLog(path);
  await again.append({ time: "t", event: "fail-open", i: 50 });
  await again.close();
  const lines = (await readFile(path, "utf8"))
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l));
  assert.deepEqual(
    lines.map((l) => l.i),
    Array.from({ length: 51 }, (_, i) => i),
  );
  assert.equal((await stat(path)).mode & 0o777, 0o600);
});

test("a record that cannot be written rejects, and later records still go through once possible", async () => {
  const dir = await tempFolder("imprimatur-audit-");
  const blocker = join(dir, "blocked");
  await writeFile(blocker, "a file where a folder should be");
  const bad = new AuditLog(join(blocker, "audit.jsonl"));
  await assert.rejects(bad.append({ time: "t", event: "break-glass" }));
  await assert.rejects(bad.append({ time: "t", event: "break-glass" }));
  const path = join(dir, "audit.jsonl");
  await writeFile(path, "");
  await chmod(path, 0o600);
  const good = new AuditLog(path);
  await good.append({ time: "t", event: "break-glass" });
  assert.equal((await readFile(path, "utf8")).split("\n").length, 2);
});
