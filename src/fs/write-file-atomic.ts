// A file replaced whole or not at all: readers (the server's own reload, an operator's kubectl apply) never see
// it half written.
import { randomBytes } from "node:crypto";
import { open, readdir, rename, rm } from "node:fs/promises";
import { join } from "node:path";

/** Write to a temporary file beside `file` (same mode, fsynced), then rename it over `file`. */
export async function writeFileAtomic(file: string, data: string, mode: number): Promise<void> {
  const tmp = `${file}.${process.pid}.${randomBytes(6).toString("hex")}.tmp`; // the name TEMPORARY below recognises
  try {
    const handle = await open(tmp, "wx", mode);
    try {
      await handle.chmod(mode);
      await handle.writeFile(data, "utf8");
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(tmp, file);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
}

/** A temporary file writeFileAtomic makes: the file's name, the writer's PID, 12 hex digits. */
const TEMPORARY = /\.(\d+)\.[0-9a-f]{12}\.tmp$/;

/**
 * Removes the temporary files a writer killed mid-write (kill -9, a power loss) left in `folder`: those of other
 * processes, since this one has written none yet. Returns their names. A folder that does not exist has none.
 */
export async function removeLeftTemporaries(folder: string): Promise<string[]> {
  let names: string[];
  try {
    names = await readdir(folder);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return [];
    throw err;
  }
  const left = names.filter((name) => Number(TEMPORARY.exec(name)?.[1] ?? process.pid) !== process.pid);
  await Promise.all(left.map((name) => rm(join(folder, name), { force: true })));
  return left;
}
