// Creating a folder and its missing parents, one level at a time. Node's `mkdir(path, { recursive: true })` never
// returns for some paths (under /proc it gets ENOENT for a parent that exists, creates that parent again, and
// loops), so a state folder on an unusable path would spin the CPU instead of failing.
import { mkdir, stat } from "node:fs/promises";
import { dirname, resolve } from "node:path";
import { ImprimaturError } from "../errors/imprimatur-error.ts";
import { fileProblem } from "./file-problem.ts";

/** A folder that cannot be created or used: the message names the path and says why. */
export class DirectoryError extends ImprimaturError<"unusable-directory"> {
  readonly path: string;

  constructor(path: string, reason: string, cause?: unknown) {
    super("unusable-directory", `cannot use the folder ${path}: ${reason}`, { cause });
    this.path = path;
  }
}

/**
 * Makes `path` a folder, creating missing parents with `mode`. Returns the first folder it created (as
 * `mkdir(…, { recursive: true })` does), undefined when `path` was already a folder. Throws DirectoryError.
 */
export async function makeDirectory(path: string, mode = 0o777): Promise<string | undefined> {
  const target = resolve(path);
  const missing: string[] = [];
  // Walk up to the nearest thing that exists; it must be a folder.
  for (let at = target; ; at = dirname(at)) {
    let isDirectory: boolean;
    try {
      isDirectory = (await stat(at)).isDirectory();
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      // ENOTDIR: a parent is a file, which the walk up reaches and names.
      if ((code === "ENOENT" || code === "ENOTDIR") && at !== dirname(at)) {
        missing.unshift(at);
        continue;
      }
      throw new DirectoryError(path, fileProblem(e), e);
    }
    if (!isDirectory) throw new DirectoryError(path, at === target ? "it is a file, not a folder" : `${at} is a file, not a folder`);
    break;
  }
  for (const dir of missing) {
    try {
      await mkdir(dir, { mode });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === "EEXIST" && (await stat(dir).catch(() => undefined))?.isDirectory()) continue; // made meanwhile
      // Creating inside an existing folder failed: say so, not a bare ENOENT about a parent that is there.
      const reason = (e as NodeJS.ErrnoException).code === "ENOENT" ? `${dirname(dir)} does not allow creating folders in it` : fileProblem(e);
      throw new DirectoryError(path, reason, e);
    }
  }
  return missing[0];
}
