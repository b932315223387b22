#!/usr/bin/env node
// Entry point of the `imprimatur` command; everything lives in src/cli.
import { main } from "../src/cli/main.ts";

process.exitCode = await main(process.argv.slice(2));
