#!/usr/bin/env bash
# Runs test files as the suite does: `bash scripts/run-tests.sh test/unit/x.test.ts …` (default: every test).
# --test-timeout bounds each test and each hook; --test-force-exit ends a file's process once its tests and
# hooks are done, and test-file-guard.ts kills and names the child processes it leaves running, so a failed
# teardown is reported and never keeps the run waiting.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/node_modules/.bin:$PATH"   # Node 24 from the `node` dependency
if [ "$#" -eq 0 ]; then set -- 'test/unit/**/*.test.ts' 'test/fuzz/**/*.test.ts' 'test/e2e/**/*.test.ts'; fi
exec node --test --test-timeout="${IMPRIMATUR_TEST_TIMEOUT_MS:-300000}" --test-force-exit --import ./test/support/test-file-guard.ts "$@"
