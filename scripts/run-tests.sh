#!/usr/bin/env bash
# Runs test files as the suite does: `bash scripts/run-tests.sh test/unit/x.test.ts …` (default: every test).
# --test-timeout bounds each test and each hook; --test-force-exit ends a file's process once its tests and
# hooks are done, and test-file-guard.ts kills and names the child processes it leaves running, so a failed
# teardown is reported and never keeps the run waiting.
# The whole suite (no arguments; IMPRIMATUR_SECRETS_SCAN=1 for named files too) is also scanned for the secrets it
# used: the harnesses record them and scan the logs they remove (test/support/secret-ledger.ts), the output is
# kept, and scripts/secrets-scan.ts then checks it all; the run fails if the tests or the scan fail.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/node_modules/.bin:$PATH"   # Node 24 from the `node` dependency
scan="${IMPRIMATUR_SECRETS_SCAN:-0}"
if [ "$#" -eq 0 ]; then
  set -- 'test/unit/**/*.test.ts' 'test/fuzz/**/*.test.ts' 'test/e2e/**/*.test.ts'
  scan=1
fi
runner=(node --test --test-timeout="${IMPRIMATUR_TEST_TIMEOUT_MS:-300000}" --test-force-exit --import ./test/support/test-file-guard.ts "$@")
if [ "$scan" != 1 ]; then exec "${runner[@]}"; fi

folder="$(mktemp -d "${TMPDIR:-/tmp}/imprimatur-secrets-scan.XXXXXX")"
trap 'rm -rf "$folder"' EXIT
export IMPRIMATUR_SECRET_LEDGER="$folder/ledger.jsonl"
export IMPRIMATUR_SECRET_FINDINGS="$folder/findings.jsonl"
export IMPRIMATUR_SECRET_SCANNED="$folder/scanned.jsonl"
set +e
"${runner[@]}" | tee "$folder/test-output.txt"
tests="${PIPESTATUS[0]}"
node scripts/secrets-scan.ts "$folder"
secrets="$?"
set -e
if [ "$tests" -ne 0 ]; then exit "$tests"; fi
exit "$secrets"
