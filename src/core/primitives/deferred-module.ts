// A library loaded when a process first needs it rather than when it starts: most policy sets have no CEL and no
// TrustRoot, and a server that loads every library it might need starts several MiB larger (bench/background-scan.md).
// Node.js 24 loads a module with require() synchronously, ES modules included, so the code that needs one stays
// synchronous. The caller names the module by what `import.meta.resolve` gives for it, the file an `import` loads,
// so it is the same module instance an import elsewhere gets (not a package's CommonJS copy of its ES module build).
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

/**
 * A loader of the module at `resolved` (an `import.meta.resolve(...)` result): the first call loads it, later ones
 * hand out the same module. A module that cannot load throws its error at every call.
 */
export function deferredModule<T>(resolved: string): () => T {
  let loaded: T | undefined;
  return () => {
    loaded ??= createRequire(resolved)(fileURLToPath(resolved)) as T;
    return loaded;
  };
}
