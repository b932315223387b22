#!/usr/bin/env bash
# Mutation testing of the security-critical code, one area at a time (areas: stryker.config.mjs).
# `npm run mutation` runs every area; `npm run mutation -- conditions attestors` runs the named ones.
# An area below the threshold does not stop the others; the exit status reports whether all passed.
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/node_modules/.bin:$PATH"   # Node 24 from the `node` dependency; the TAP runner spawns `node`

if [ "$#" -gt 0 ]; then
  areas=("$@")
else
  read -r -a areas < <(node --input-type=module -e 'import { areas } from "./stryker.config.mjs"; console.log(Object.keys(areas).join(" "))')
fi

failed=()
for area in "${areas[@]}"; do
  echo "== mutation testing: $area"
  STRYKER_AREA="$area" stryker run || failed+=("$area")
done
echo "== reports: reports/mutation/<area>.html"
if [ "${#failed[@]}" -gt 0 ]; then
  echo "== below the threshold or failed: ${failed[*]}" >&2
  exit 1
fi
