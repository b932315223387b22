#!/usr/bin/env bash
# Provisions the real OCI registry components the registry end-to-end tests and benchmarks run against:
# docker-registry (CNCF distribution 2.8), skopeo (pushes OCI layouts into it) and htpasswd (bcrypt
# password files, from apache2-utils). Everything comes from Debian 12's own packages.
# Idempotent: when every command is already present it returns at once, without touching apt.
#
# The tests start their own private docker-registry processes (test/support/registry.ts); the
# package's system service is never wanted, so its start during installation is suppressed.
set -euo pipefail

# shellcheck source=provision-common.sh
source "$(dirname "$0")/provision-common.sh"

need_pkgs=()
command -v docker-registry >/dev/null 2>&1 || need_pkgs+=(docker-registry)
command -v skopeo >/dev/null 2>&1 || need_pkgs+=(skopeo)
command -v htpasswd >/dev/null 2>&1 || need_pkgs+=(apache2-utils)

if [ "${#need_pkgs[@]}" -eq 0 ]; then
  log "docker-registry, skopeo and htpasswd present"
  exit 0
fi

# docker-registry's maintainer script would start its init.d service (a registry on :5000, all interfaces).
install_without_services "${need_pkgs[@]}"

for cmd in docker-registry skopeo htpasswd; do
  command -v "$cmd" >/dev/null 2>&1 || { log "$cmd still missing after installing ${need_pkgs[*]}"; exit 1; }
done
log "ready: $(docker-registry --version 2>&1 | head -n1); $(skopeo --version)"
