// Loaded into a child process the benchmark starts, with NODE_OPTIONS=--import=<this file>: on SIGUSR2 it runs a
// full garbage collection and writes the process's memory (before and after it) and its start time as one JSON
// document to $IMPRIMATUR_BENCH_MEMORY_FILE. The child's own code is unchanged; this only reads.
import { writeFileSync } from "node:fs";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";

const file = process.env.IMPRIMATUR_BENCH_MEMORY_FILE;
if (file) {
  setFlagsFromString("--expose-gc");
  const gc = runInNewContext("gc") as () => void;
  process.on("SIGUSR2", () => {
    const before = process.memoryUsage();
    gc();
    const after = process.memoryUsage();
    writeFileSync(file, JSON.stringify({ timeOrigin: performance.timeOrigin, before, after }));
  });
}
