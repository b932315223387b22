#!/usr/bin/env bash
# Provisions promtool, which checks and tests the alerting rules of deploy/monitoring against series recorded
# from a real serve (test/e2e/monitoring.test.ts). It comes with Debian 12's `prometheus` package; the
# package's Prometheus service is never wanted, so its start during installation is suppressed.
# Idempotent: when promtool is present it returns at once, without touching apt.
set -euo pipefail

# shellcheck source=provision-common.sh
source "$(dirname "$0")/provision-common.sh"

if command -v promtool >/dev/null 2>&1; then
  log "promtool present"
  exit 0
fi
install_without_services prometheus
command -v promtool >/dev/null 2>&1 || { log "promtool still missing after installing prometheus"; exit 1; }
log "ready: $(promtool --version 2>&1 | head -n1)"
