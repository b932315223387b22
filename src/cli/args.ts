// Shared argument handling: node:util parseArgs with errors turned into usage failures.
import { parseArgs, type ParseArgsConfig } from "node:util";
import { ConfigError, renderConfigProblem } from "../config/config-error.ts";

export class UsageError extends Error {}

export function parseCommandArgs<T extends NonNullable<ParseArgsConfig["options"]>>(argv: string[], options: T, allowPositionals = false) {
  try {
    return parseArgs({ args: argv, options, allowPositionals, strict: true });
  } catch (e) {
    const message = (e as Error).message;
    // `imprimatur check app.yaml`: files are named with -f, as for kubectl apply, and the message says so.
    const takesFiles = Object.values(options).some((o) => o.short === "f");
    if (takesFiles && (e as { code?: string }).code === "ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL")
      throw new UsageError(`${message}; name files and folders with -f (-f FILE, -f DIR, -f - for standard input), as for kubectl`);
    throw new UsageError(message);
  }
}

/** The policy folder shipped inside the package: what `serve`, `check` and `test` use without --policies. */
export { EMBEDDED_POLICIES } from "../policy/policy-set.ts";

/**
 * How every command reports a usage error, as kubectl does: one line naming the problem and where the help is,
 * not the whole help. Returns the exit code, 2.
 */
export function usageFailure(command: string, message: string): number {
  process.stderr.write(`imprimatur ${command}: ${message}\nsee 'imprimatur ${command} --help'\n`);
  return 2;
}

/**
 * Whether a command's arguments ask for its help: `--help` or `-h` anywhere before a `--` (after which
 * every argument is an operand), as kubectl reads them, so `imprimatur check -f x.yaml --help` shows help.
 */
export function wantsHelp(argv: readonly string[]): boolean {
  for (const arg of argv) {
    if (arg === "--") return false;
    if (arg === "--help" || arg === "-h") return true;
  }
  return false;
}

/**
 * An error as a command prints it after "imprimatur CMD: ". A ConfigError listing several problems gets a header
 * and one indented line per problem, as policy load errors do.
 */
export function errorText(e: unknown): string {
  if (e instanceof ConfigError && e.problems.length > 1)
    return `the configuration has ${e.problems.length} problems:\n${e.problems.map((p) => `  ${renderConfigProblem(p)}`).join("\n")}`;
  return e instanceof Error ? e.message : String(e);
}
