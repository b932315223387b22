// The callers' files at start (src/caller-auth/caller-files.ts): a client CA that cannot be read, or holds no
// certificate, stops serve with an error by code that names the flag; a tokens file's problems keep their own.
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { pino } from "pino";
import { ClientCaError } from "../../../src/caller-auth/caller-auth.ts";
import { watchCallerFiles } from "../../../src/caller-auth/caller-files.ts";
import { FileReadError } from "../../../src/fs/file-reload.ts";

const logger = pino({ level: "silent" });
let dir: string;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), "imprimatur-caller-files-"));
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

test("a client CA that cannot be read is unreadable, one without a certificate invalid; both name the flag", async () => {
  const missing = join(dir, "missing-ca.crt");
  await assert.rejects(watchCallerFiles({ clientCa: missing }, logger), (e: Error) => {
    assert.equal(e.name, "CallerFilesError");
    assert.equal((e as { code?: string }).code, "unreadable");
    assert.equal(e.message, `--client-ca: cannot read ${missing}: ENOENT`);
    assert.ok(e.cause instanceof FileReadError && e.cause.code === "unreadable-file");
    return true;
  });
  const notPem = join(dir, "not-pem.crt");
  await writeFile(notPem, "not a certificate\n");
  await assert.rejects(watchCallerFiles({ clientCa: notPem }, logger), (e: Error) => {
    assert.equal(e.name, "CallerFilesError");
    assert.equal((e as { code?: string }).code, "invalid");
    assert.equal(e.message, `--client-ca: ${notPem} holds no PEM certificate`);
    assert.ok(e.cause instanceof ClientCaError);
    return true;
  });
});
