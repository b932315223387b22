#!/usr/bin/env bash
# The whole test suite: provision the real components (once per machine), type-check, run every test.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/node_modules/.bin:$PATH"   # Node 24 from the `node` dependency

bash scripts/provision-kube.sh
bash scripts/provision-registry.sh
bash scripts/provision-node.sh
bash scripts/provision-monitoring.sh
tsc -p tsconfig.json --noEmit
prettier --check --log-level warn .   # the formatter's settings: .prettierrc.json (npm run format applies them)
eslint .                              # the linter's: eslint.config.js
bash scripts/run-tests.sh "$@"         # every test file (or those named: npm test -- FILE…), with the runner's flags (scripts/run-tests.sh)
