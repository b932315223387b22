// Numeric command-line options of the benchmarks, checked alike: a usage error names the flag and the range.

/** `raw` as a number from `min` to `max` (an integer unless `integer` is false); throws a usage error otherwise. */
export function numberOption(flag: string, raw: string, min: number, max: number, integer = true): number {
  const n = Number(raw);
  if (raw.trim() === "" || !Number.isFinite(n) || n < min || n > max || (integer && !Number.isInteger(n))) {
    throw new Error(`--${flag} must be ${integer ? "an integer" : "a number"} from ${min} to ${max}, got ${raw}`);
  }
  return n;
}

/** Counts split evenly over the rounds a benchmark alternates its sides in: each must be a multiple of `rounds`. */
export function multiplesOfRounds(rounds: number, counts: ReadonlyArray<readonly [flag: string, count: number]>): void {
  for (const [flag, n] of counts) if (n % rounds !== 0) throw new Error(`--${flag} (${n}) must be a multiple of --rounds (${rounds})`);
}

/**
 * A string option read before the options are parsed (`--flag VALUE` or `--flag=VALUE`), for what a benchmark
 * builds once at load time from it (the request body, the pod); undefined when absent.
 */
export function earlyOption(argv: readonly string[], flag: string): string | undefined {
  const i = argv.findIndex((a) => a === `--${flag}` || a.startsWith(`--${flag}=`));
  if (i < 0) return undefined;
  return argv[i]!.startsWith(`--${flag}=`) ? argv[i]!.slice(flag.length + 3) : argv[i + 1];
}
