// Go-style durations (src/core/primitives/duration.ts), as Kubernetes, the server's configuration and attestation
// conditions write them: parsed to milliseconds, and printed as Go prints them.
import assert from "node:assert/strict";
import { test } from "node:test";
import { formatDuration, parseDuration } from "../../src/core/primitives/duration.ts";

test("Go durations parse to milliseconds", () => {
  const cases: Array<[string, number]> = [
    ["0", 0],
    ["0s", 0],
    ["500ms", 500],
    ["30s", 30_000],
    ["1h30m", 5_400_000],
    ["1.5h", 5_400_000],
    ["2m", 120_000],
    ["-2m", -120_000],
    ["+2m", 120_000],
    ["1h2m3s4ms", 3_723_004],
    [".5s", 500],
    [".25s", 250],
    ["1m.25s", 60_250],
    ["1.s", 1000],
    ["1500us", 1.5],
    ["1500µs", 1.5],
    ["2000000ns", 2],
    ["1s1s", 2000],
  ];
  for (const [text, ms] of cases) assert.equal(parseDuration(text), ms, text);
});

test("texts that are no Go duration are undefined", () => {
  for (const text of ["", "-", "1", "-0", "s", "1d", "1 s", " 1s", "1s ", "1S", "1.2.3s", "h1", "1h-2m", "x1s", "1sx", ".s", "1e3s"])
    assert.equal(parseDuration(text), undefined, text);
});

test("milliseconds print as Go prints durations", () => {
  const cases: Array<[number, string]> = [
    [0, "0s"],
    [1500, "1.5s"],
    [500, "0.5s"],
    [60_000, "1m0s"],
    [3_600_000, "1h0m0s"],
    [97_384_000, "27h3m4s"],
    [3_661_000, "1h1m1s"],
    [-120_000, "-2m0s"],
    [-1500, "-1.5s"],
    [0.001, "0.000001s"],
    [59_999, "59.999s"],
  ];
  for (const [ms, text] of cases) assert.equal(formatDuration(ms), text, String(ms));
});
