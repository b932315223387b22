#!/usr/bin/env bash
# The long run of the property-based tests (test/fuzz/): `bash scripts/fuzz.sh [RUNS] [FILE…]`, RUNS inputs per
# property (default 5000; `npm test` runs 100). A failure prints its seed; replay it with
# `IMPRIMATUR_FUZZ_SEED=<seed> IMPRIMATUR_FUZZ_RUNS=<runs> bash scripts/run-tests.sh <file>`.
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-5000}"
if [ "$#" -gt 0 ]; then shift; fi
if [ "$#" -eq 0 ]; then set -- 'test/fuzz/**/*.test.ts'; fi
export IMPRIMATUR_FUZZ_RUNS="$runs"
# A long run may take minutes per file: each test gets an hour.
IMPRIMATUR_TEST_TIMEOUT_MS=3600000 exec bash scripts/run-tests.sh "$@"
