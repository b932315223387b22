// The property-test helper: a failure names its seed and replay command, and the seed in the environment replays
// the same inputs.
import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { checkProperty, fuzzRuns, fuzzSeed } from "../../support/fuzz.ts";

function withEnv<T>(vars: Record<string, string | undefined>, run: () => T): T {
  const before = Object.fromEntries(Object.keys(vars).map((k) => [k, process.env[k]]));
  for (const [k, v] of Object.entries(vars))
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  try {
    return run();
  } finally {
    for (const [k, v] of Object.entries(before))
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
  }
}

test("a failing property names the seed, the counterexample and the command that replays it", async () => {
  const failure = await withEnv({ IMPRIMATUR_FUZZ_SEED: "4242", IMPRIMATUR_FUZZ_RUNS: "200" }, () =>
    checkProperty(
      fc.property(fc.integer(), (n) => n < 1000),
      { file: "test/fuzz/x.test.ts" },
    ).then(
      () => undefined,
      (e: unknown) => e as Error,
    ),
  );
  assert.ok(failure, "the property fails");
  assert.match(failure.message, /seed 4242/);
  assert.match(failure.message, /counterexample: \[1000\]/, "shrunk to the smallest failing input");
  assert.match(failure.message, /replay: IMPRIMATUR_FUZZ_SEED=4242 IMPRIMATUR_FUZZ_RUNS=200 bash scripts\/run-tests.sh test\/fuzz\/x.test.ts/);
});

test("the same seed gives the same inputs", async () => {
  const seen = async () => {
    const inputs: string[] = [];
    await withEnv({ IMPRIMATUR_FUZZ_SEED: "7", IMPRIMATUR_FUZZ_RUNS: "20" }, () =>
      checkProperty(
        fc.property(fc.string(), (s) => {
          inputs.push(s);
        }),
      ),
    );
    return inputs;
  };
  const first = await seen();
  assert.equal(first.length, 20);
  assert.deepEqual(await seen(), first);
});

test("the environment's runs and seed are read, and nonsense is refused", () => {
  assert.equal(
    withEnv({ IMPRIMATUR_FUZZ_RUNS: undefined }, () => fuzzRuns(100)),
    100,
  );
  assert.equal(
    withEnv({ IMPRIMATUR_FUZZ_RUNS: "5000" }, () => fuzzRuns(100)),
    5000,
  );
  assert.throws(() => withEnv({ IMPRIMATUR_FUZZ_RUNS: "0" }, () => fuzzRuns()), /positive integer/);
  assert.equal(
    withEnv({ IMPRIMATUR_FUZZ_SEED: "-12" }, () => fuzzSeed()),
    -12,
  );
  assert.throws(() => withEnv({ IMPRIMATUR_FUZZ_SEED: "x" }, () => fuzzSeed()), /must be an integer/);
});
