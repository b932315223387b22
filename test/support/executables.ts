// Finding the programs the harnesses run (installed by the provision scripts).
import { accessSync, constants as fsConstants } from "node:fs";
import { delimiter, join } from "node:path";

export function isExecutable(path: string): boolean {
  try {
    accessSync(path, fsConstants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** The first executable `name` on PATH, then in /usr/bin and /usr/sbin (Debian's places); null when none. */
export function findCommand(name: string): string | null {
  for (const entry of [...(process.env.PATH ?? "").split(delimiter), "/usr/bin", "/usr/sbin"]) {
    if (entry && isExecutable(join(entry, name))) return join(entry, name);
  }
  return null;
}
