// The temporary files writeFileAtomic leaves when its writer is killed mid-write are removed at the next start
// (serve, removeLeftTemporaries): another process's, never this one's own, nor any other file.
import assert from "node:assert/strict";
import { mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { removeLeftTemporaries, writeFileAtomic } from "../../../src/fs/write-file-atomic.ts";

test("a killed writer's temporary files are removed; this process's own, and every other file, are kept", async () => {
  const dir = await mkdtemp(join(tmpdir(), "imprimatur-left-temporaries-"));
  try {
    const others = ["ca.crt.4242.0123456789ab.tmp", "validating-webhook.yaml.7.abcdefabcdef.tmp"];
    const kept = [
      `ca.crt.${process.pid}.0123456789ab.tmp`,
      "ca.crt",
      "notes.tmp",
      "x.4242.0123456789a.tmp", // 11 hex digits: not writeFileAtomic's
      "x.4242.0123456789ab.tmp.bak",
    ];
    for (const name of [...others, ...kept]) await writeFile(join(dir, name), "");
    await writeFileAtomic(join(dir, "written.yaml"), "a: 1\n", 0o600);
    assert.deepEqual((await removeLeftTemporaries(dir)).sort(), [...others].sort());
    assert.deepEqual((await readdir(dir)).sort(), [...kept, "written.yaml"].sort());
    assert.deepEqual(await removeLeftTemporaries(join(dir, "missing")), []);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
