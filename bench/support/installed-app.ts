// `imprimatur` as the container image holds it: the app layer's files (src/ compiled to JavaScript, no .ts) written
// to a temporary folder, with the checkout's node_modules linked in. A benchmark of memory runs serve from here,
// because type stripping at start costs a server run from the checkout 20–30 MiB the installed one does not have.
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { appEntries, defaultLayerCache } from "../../src/image-build/build-image.ts";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));

export interface InstalledApp {
  /** bin/imprimatur.js of the installed tree (absolute). */
  entry: string;
  remove(): void;
}

/** Writes the image's app layer to a new temporary folder; remove() deletes it. */
export function installedApp(): InstalledApp {
  const dir = mkdtempSync(join(tmpdir(), "imprimatur-installed-app-"));
  try {
    for (const entry of appEntries(ROOT, defaultLayerCache())) {
      const path = join(dir, entry.path);
      if (entry.type === "dir") mkdirSync(path, { recursive: true });
      else if (entry.type === "symlink") symlinkSync(entry.target, path);
      else {
        mkdirSync(dirname(path), { recursive: true });
        writeFileSync(path, entry.content, { mode: entry.mode });
      }
    }
    symlinkSync(join(ROOT, "node_modules"), join(dir, "app", "node_modules"));
  } catch (e) {
    rmSync(dir, { recursive: true, force: true });
    throw e;
  }
  return { entry: join(dir, "app", "bin", "imprimatur.js"), remove: () => rmSync(dir, { recursive: true, force: true }) };
}
