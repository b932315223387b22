// @bufbuild/cel, loaded when the first expression is compiled rather than when a process starts: most policy sets
// have no CEL, and with the protobuf runtime it brings it is 16 MiB of a bare Node.js process (2 to 3 MiB of a
// server's, which shares much of that with its other libraries) and about 70 ms of its start.
// Node.js 24 loads an ES module with require() synchronously, so compiling stays synchronous; the ES module files
// are required by path, so this is the same module instance an `import` of the package gets (not its CommonJS copy).
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

type CelLibrary = typeof import("@bufbuild/cel") & { strings: (typeof import("@bufbuild/cel/ext"))["strings"] };

const requireModule = createRequire(import.meta.url);
let library: CelLibrary | undefined;

/** The library (its main entry and the strings extension), loaded on the first call. */
export function celLibrary(): CelLibrary {
  library ??= {
    ...(requireModule(fileURLToPath(import.meta.resolve("@bufbuild/cel"))) as typeof import("@bufbuild/cel")),
    strings: (requireModule(fileURLToPath(import.meta.resolve("@bufbuild/cel/ext"))) as typeof import("@bufbuild/cel/ext")).strings,
  };
  return library;
}
