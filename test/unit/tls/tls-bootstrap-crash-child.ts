// A process that re-issues the state folder's certificates until it is killed: `node tls-bootstrap-crash-child.ts DIR`.
// Each round asks for a new host name, which re-issues the serving certificate; every third round first removes
// ca.crt, which makes a new CA (key, then certificate). It prints "issued N" after each round.
import { rm } from "node:fs/promises";
import { join } from "node:path";
import { ensureServingCertificate } from "../../../src/tls/tls-bootstrap.ts";

const [dir] = process.argv.slice(2);
if (!dir) {
  process.stderr.write("usage: tls-bootstrap-crash-child.ts DIR\n");
  process.exit(2);
}
for (let i = 0; ; i++) {
  if (i % 3 === 2) await rm(join(dir, "ca.crt"), { force: true });
  await ensureServingCertificate(dir, [`host-${i}.example`, "127.0.0.1"]);
  process.stdout.write(`issued ${i}\n`);
}
