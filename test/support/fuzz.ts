// Property-based tests (test/fuzz/): fast-check, seeded and bounded, so `npm test` runs a short pass every time
// and any failure can be replayed. The seed and the number of runs come from the environment:
//   IMPRIMATUR_FUZZ_SEED   the seed of every property in the run (default: a fresh one, printed on failure)
//   IMPRIMATUR_FUZZ_RUNS   inputs per property (default 100; scripts/fuzz.sh runs far more)
// A failure names the seed, the path of the shrunk case and the command that replays it.
import fc from "fast-check";

/** Inputs per property: the suite's bounded run, or the long run's. */
export function fuzzRuns(defaultRuns = 100): number {
  const raw = process.env.IMPRIMATUR_FUZZ_RUNS;
  if (raw === undefined || raw === "") return defaultRuns;
  const runs = Number(raw);
  if (!Number.isInteger(runs) || runs < 1) throw new Error(`IMPRIMATUR_FUZZ_RUNS must be a positive integer, got ${JSON.stringify(raw)}`);
  return runs;
}

/** The seed given in the environment, else a fresh one (32-bit, as fast-check takes it). */
export function fuzzSeed(): number {
  const raw = process.env.IMPRIMATUR_FUZZ_SEED;
  if (raw === undefined || raw === "") return (Math.random() * 0x1_0000_0000) | 0;
  const seed = Number(raw);
  if (!Number.isInteger(seed)) throw new Error(`IMPRIMATUR_FUZZ_SEED must be an integer, got ${JSON.stringify(raw)}`);
  return seed;
}

/**
 * Checks a property with the run's seed and size. On failure the error names the counterexample (shrunk), the
 * seed and path, and how to replay it (the same seed and number of runs on the same file).
 */
export async function checkProperty<Ts extends [unknown, ...unknown[]]>(
  property: fc.IAsyncPropertyWithHooks<Ts> | fc.IPropertyWithHooks<Ts>,
  options: { runs?: number; file?: string } = {},
): Promise<void> {
  const seed = fuzzSeed();
  const numRuns = options.runs ?? fuzzRuns();
  const details = await fc.check(property as fc.IAsyncProperty<Ts>, { seed, numRuns });
  if (!details.failed) return;
  const replay = `IMPRIMATUR_FUZZ_SEED=${seed} IMPRIMATUR_FUZZ_RUNS=${numRuns} bash scripts/run-tests.sh ${options.file ?? "<this file>"}`;
  const counterexample = details.counterexample ? fc.stringify(details.counterexample) : "(none)";
  const cause = details.errorInstance instanceof Error ? details.errorInstance : new Error(String(details.errorInstance));
  throw new Error(
    `property failed after ${details.numRuns} inputs (seed ${seed}, path ${JSON.stringify(details.counterexamplePath)}); ` +
      `counterexample: ${counterexample.slice(0, 2000)}\n${cause.message}\nreplay: ${replay}`,
    { cause },
  );
}
