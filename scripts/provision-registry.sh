#!/usr/bin/env bash
# Provisions the real OCI registry components the registry end-to-end tests and benchmarks run against:
# docker-registry (CNCF distribution 2.8), skopeo (pushes OCI layouts into it) and htpasswd (bcrypt
# password files, from apache2-utils). Everything comes from Debian 12's own packages.
# Idempotent: when every command is already present it returns at once, without touching apt.
#
# The tests start their own private docker-registry processes (test/support/registry.ts); the
# package's system service is never wanted, so its start during installation is suppressed.
set -euo pipefail

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

log() { printf '[provision-registry] %s\n' "$*" >&2; }

need_pkgs=()
command -v docker-registry >/dev/null 2>&1 || need_pkgs+=(docker-registry)
command -v skopeo >/dev/null 2>&1 || need_pkgs+=(skopeo)
command -v htpasswd >/dev/null 2>&1 || need_pkgs+=(apache2-utils)

if [ "${#need_pkgs[@]}" -eq 0 ]; then
  log "docker-registry, skopeo and htpasswd present"
  exit 0
fi

# docker-registry's maintainer script starts its init.d service (a registry on :5000, all interfaces)
# wherever invoke-rc.d is allowed to. A policy-rc.d answering 101 ("action forbidden") prevents that;
# one is installed only for the duration of this run, and only if the machine has none of its own.
POLICY_RC=/usr/sbin/policy-rc.d
temporary_policy=0
remove_temporary_policy() {
  if [ "$temporary_policy" = 1 ]; then $SUDO rm -f "$POLICY_RC"; fi
}
trap remove_temporary_policy EXIT
if [ ! -e "$POLICY_RC" ]; then
  printf '#!/bin/sh\n# Temporary, from imprimatur scripts/provision-registry.sh: no service starts.\nexit 101\n' \
    | $SUDO tee "$POLICY_RC" >/dev/null
  $SUDO chmod 0755 "$POLICY_RC"
  temporary_policy=1
fi

log "installing ${need_pkgs[*]}"
$SUDO apt-get update -qq
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" >/dev/null

for cmd in docker-registry skopeo htpasswd; do
  command -v "$cmd" >/dev/null 2>&1 || { log "$cmd still missing after installing ${need_pkgs[*]}"; exit 1; }
done
log "ready: $(docker-registry --version 2>&1 | head -n1); $(skopeo --version)"
