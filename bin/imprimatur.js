#!/usr/bin/env node
// Entry point of the `imprimatur` command. Plain JavaScript, so that any Node.js gets far enough to say
// when it is too old; the command itself is the TypeScript in src/cli, which Node.js 24 runs as it is.
import { existsSync } from "node:fs";
import { followLauncher } from "./launcher.js";
import { nodeVersionProblem } from "./node-version.js";

const problem = nodeVersionProblem(process.versions.node);
if (problem) {
  process.stderr.write(problem + "\n");
  process.exitCode = 2;
} else {
  // Under npx or npm run, a stop of npm reaches the command (launcher.js says why it would not by itself).
  followLauncher(process);
  // A checkout has src/cli/main.ts; the container image has only the JavaScript compiled from it
  // (src/image-build/compiled-source.ts), which spares the server the memory of Node.js's type stripping.
  const entry = existsSync(new URL("../src/cli/main.ts", import.meta.url)) ? "../src/cli/main.ts" : "../src/cli/main.js";
  import(entry).then(async ({ main }) => {
    process.exitCode = await main(process.argv.slice(2));
  });
}
