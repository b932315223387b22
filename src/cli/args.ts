// Shared argument handling: node:util parseArgs with errors turned into usage failures.
import { parseArgs, type ParseArgsConfig } from "node:util";
import { fileURLToPath } from "node:url";

export class UsageError extends Error {}

export function parseCommandArgs<T extends NonNullable<ParseArgsConfig["options"]>>(argv: string[], options: T, allowPositionals = false) {
  try {
    return parseArgs({ args: argv, options, allowPositionals, strict: true });
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
}

/** The policy folder shipped inside the package: what `serve` and `check` use without --policies. */
export const EMBEDDED_POLICIES = fileURLToPath(new URL("../../policies/default/", import.meta.url));
