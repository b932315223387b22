// A process that writes audit records until it is killed: `node audit-log-crash-child.ts PATH MODE`.
// MODE "loop": appends large records one after another and prints "acked N" once record N is durable.
// MODE "torn": appends two records, then half of a third straight to the file (what a write cut by a crash leaves)
// and SIGKILLs itself.
import { appendFileSync } from "node:fs";
import { AuditLog } from "../../src/audit/audit-log.ts";

const [path, mode] = process.argv.slice(2);
if (!path || (mode !== "loop" && mode !== "torn")) {
  process.stderr.write("usage: audit-log-crash-child.ts PATH loop|torn\n");
  process.exit(2);
}
const log = new AuditLog(path);
// Large records (256 KiB) make a kill in the middle of a write likely.
const padding = "x".repeat(256 * 1024);
const record = (i: number) => ({ time: new Date().toISOString(), event: "fail-open" as const, i, padding });

if (mode === "torn") {
  await log.append(record(0));
  await log.append(record(1));
  const line = `${JSON.stringify(record(2))}\n`;
  appendFileSync(path, line.slice(0, Math.floor(line.length / 2)));
  process.kill(process.pid, "SIGKILL");
} else {
  for (let i = 0; ; i++) {
    await log.append(record(i));
    process.stdout.write(`acked ${i}\n`);
  }
}
