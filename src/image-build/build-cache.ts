// The image build's cache folder (compressed layers, compiled JavaScript): files named by what they were made from,
// so a file there is either whole or absent. Written beside their name and renamed into it, so a build stopped
// half-way, or two builds at once, never leave a partial file under a name another build trusts.
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";

/** The cached file's content, or undefined when it was never made. */
export function readCached(path: string): Buffer | undefined {
  return existsSync(path) ? readFileSync(path) : undefined;
}

/** Keeps `content` under `path` (its folder made when missing). */
export function keepCached(path: string, content: Buffer | string): void {
  mkdirSync(dirname(path), { recursive: true });
  const partial = `${path}.${process.pid}.partial`;
  writeFileSync(partial, content);
  renameSync(partial, path);
}
