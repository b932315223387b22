// A file replaced whole or not at all: readers (the server's own reload, an operator's kubectl apply) never see
// it half written.
import { randomBytes } from "node:crypto";
import { open, rename, rm } from "node:fs/promises";

/** Write to a temporary file beside `file` (same mode, fsynced), then rename it over `file`. */
export async function writeFileAtomic(file: string, data: string, mode: number): Promise<void> {
  const tmp = `${file}.${process.pid}.${randomBytes(6).toString("hex")}.tmp`;
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
