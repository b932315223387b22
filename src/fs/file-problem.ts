// What went wrong with a file or folder, in words: "no such file or folder" rather than
// "ENOENT: no such file or directory, open '…'", for messages that already name the path.

const REASONS: Record<string, string> = {
  ENOENT: "no such file or folder",
  ENOTDIR: "a part of the path is not a folder",
  EISDIR: "it is a folder, not a file",
  EACCES: "permission denied",
  EPERM: "not permitted",
  EROFS: "the file system is read-only",
  ENOSPC: "no space left on the device",
  ELOOP: "too many symbolic links",
  ENAMETOOLONG: "the name is too long",
  EMFILE: "too many open files",
};

/** The reason of a file-system error, without the path (the caller's message names it). */
export function fileProblem(e: unknown): string {
  const code = (e as NodeJS.ErrnoException | undefined)?.code;
  if (typeof code === "string" && REASONS[code]) return REASONS[code];
  const message = e instanceof Error ? e.message : String(e);
  // Node's messages end with ", open '/the/path'": the caller names the path already.
  return message.replace(/, [a-z]+ '[^']*'(?: -> '[^']*')?$/, "");
}
