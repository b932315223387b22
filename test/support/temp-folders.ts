// Temporary folders of one test file, removed once every test of the file has run (each test file is a process of
// its own, so this module's list is the file's): a run leaves nothing in the temporary folder.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after } from "node:test";

const made: string[] = [];
after(() => Promise.all(made.map((dir) => rm(dir, { recursive: true, force: true }))));

/** A new folder in the temporary folder, named `prefix` and six random characters; removed after the file's tests. */
export async function tempFolder(prefix: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  made.push(dir);
  return dir;
}
