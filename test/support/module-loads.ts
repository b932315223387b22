// What modules a child Node.js process loads: a module hook, given to it with `--import`, appends the URL of each
// module it loads to a file. For tests that a library is loaded only when something needs it.
import { readFileSync, writeFileSync } from "node:fs";
import { pathToFileURL } from "node:url";

export interface ModuleLoads {
  /** The Node.js options that load the hook: `[...nodeArgs, script, ...]`. */
  nodeArgs: string[];
  /** The URLs loaded so far, one a line. */
  loaded(): string;
  /** Forgets those recorded so far. */
  reset(): void;
}

/** A hook recording into `log` (a file path; the hook is written beside it as `log`.mjs). */
export function recordModuleLoads(log: string): ModuleLoads {
  const hook = `${log}.mjs`;
  writeFileSync(
    hook,
    `import { registerHooks } from "node:module";
import { appendFileSync } from "node:fs";
registerHooks({ load(url, context, next) { appendFileSync(${JSON.stringify(log)}, url + "\\n"); return next(url, context); } });
`,
  );
  writeFileSync(log, "");
  return { nodeArgs: ["--import", pathToFileURL(hook).href], loaded: () => readFileSync(log, "utf8"), reset: () => writeFileSync(log, "") };
}
