// @bufbuild/cel, loaded when the first expression is compiled rather than when a process starts: most policy sets
// have no CEL, and with the protobuf runtime it brings it is 16 MiB of a bare Node.js process (2 to 3 MiB of a
// server's, which shares much of that with its other libraries) and about 70 ms of its start.
import { deferredModule } from "../primitives/deferred-module.ts";

type CelLibrary = typeof import("@bufbuild/cel") & { strings: (typeof import("@bufbuild/cel/ext"))["strings"] };

const celMain = deferredModule<typeof import("@bufbuild/cel")>(import.meta.resolve("@bufbuild/cel"));
const celExtensions = deferredModule<typeof import("@bufbuild/cel/ext")>(import.meta.resolve("@bufbuild/cel/ext"));
let library: CelLibrary | undefined;

/** The library (its main entry and the strings extension), loaded on the first call. */
export function celLibrary(): CelLibrary {
  library ??= { ...celMain(), strings: celExtensions().strings };
  return library;
}
