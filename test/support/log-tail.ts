// The end of a harness process's log, for assertion and startup-failure messages.
import { closeSync, fstatSync, openSync, readSync } from "node:fs";

/** The last lines of a (possibly large) log file. */
export function tailFile(path: string, maxLines = 60, maxBytes = 24 * 1024): string {
  let fd: number;
  try {
    fd = openSync(path, "r");
  } catch {
    return `(no log at ${path})`;
  }
  try {
    const size = fstatSync(fd).size;
    const length = Math.min(size, maxBytes);
    const buffer = Buffer.alloc(length);
    readSync(fd, buffer, 0, length, size - length);
    const lines = buffer.toString("utf8").split("\n");
    if (length < size) lines.shift(); // probably a partial line
    return lines.slice(-maxLines).join("\n");
  } finally {
    closeSync(fd);
  }
}
