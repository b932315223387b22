// A JSON-lines file whose writer died mid-line (kill -9, power loss) ends without its newline: the next record
// appended would join the fragment and a line reader would lose both. The fragment was never acknowledged (a
// record is acknowledged once its whole line is on disk), so it is moved aside, into `<file>.torn`, and the file
// is cut back to its last whole line before anything is appended again.
import { open } from "node:fs/promises";

export interface TornLineRepair {
  /** Bytes of the unfinished last line, cut from the file. */
  droppedBytes: number;
  /** Where they were kept. */
  savedTo: string;
}

const CHUNK = 64 * 1024;

/** Cuts an unfinished last line from the file (keeping it in `<path>.torn`); undefined when the file is whole or absent. */
export async function repairTornLastLine(path: string): Promise<TornLineRepair | undefined> {
  let fh;
  try {
    fh = await open(path, "r+");
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw e;
  }
  try {
    const { size } = await fh.stat();
    if (size === 0) return undefined;
    const last = Buffer.alloc(1);
    await fh.read(last, 0, 1, size - 1);
    if (last[0] === 0x0a) return undefined;
    // Back from the end, a chunk at a time, to the last newline (none: the whole file is one unfinished line).
    let wholeUpTo = 0;
    for (let end = size; end > 0 && wholeUpTo === 0; end -= CHUNK) {
      const start = Math.max(0, end - CHUNK);
      const chunk = Buffer.alloc(end - start);
      await fh.read(chunk, 0, chunk.length, start);
      const newline = chunk.lastIndexOf(0x0a);
      if (newline >= 0) wholeUpTo = start + newline + 1;
    }
    const fragment = Buffer.alloc(size - wholeUpTo);
    await fh.read(fragment, 0, fragment.length, wholeUpTo);
    const savedTo = `${path}.torn`;
    const torn = await open(savedTo, "a", 0o600);
    try {
      await torn.appendFile(Buffer.concat([fragment, Buffer.from("\n")]));
      await torn.datasync();
    } finally {
      await torn.close();
    }
    // Kept first, then cut: a crash between the two leaves the fragment in both places, never in neither.
    await fh.truncate(wholeUpTo);
    await fh.datasync();
    return { droppedBytes: fragment.length, savedTo };
  } finally {
    await fh.close();
  }
}
