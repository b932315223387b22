# shellcheck shell=bash
# Sourced by the provision-*.sh scripts: the cache folder outside the clone, sudo when not root, log lines
# under the script's name, and Debian package installs that start no service.

CACHE_DIR="${IMPRIMATUR_CACHE:-${HOME:-/root}/.cache/imprimatur}"
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

PROVISION_NAME=$(basename "$0" .sh)
log() { printf '[%s] %s\n' "$PROVISION_NAME" "$*" >&2; }

apt_updated=0
apt_update_once() {
  if [ "$apt_updated" = 0 ]; then
    $SUDO apt-get update -qq
    apt_updated=1
  fi
}

# The tests start their own containerd and docker-registry processes; the packages' system services are never
# wanted (docker-registry's init.d service would listen on :5000 on all interfaces). A policy-rc.d answering
# 101 ("action forbidden") keeps the installation from starting them. It is installed only for this run, and
# only if the machine has none of its own.
POLICY_RC=/usr/sbin/policy-rc.d
temporary_policy=0
remove_temporary_policy() {
  if [ "$temporary_policy" = 1 ]; then $SUDO rm -f "$POLICY_RC"; fi
}

# install_without_services PKG...: installs the packages (no recommends) without starting any of their services.
install_without_services() {
  if [ ! -e "$POLICY_RC" ]; then
    trap remove_temporary_policy EXIT
    printf '#!/bin/sh\n# Temporary, from imprimatur scripts/%s.sh: no service starts.\nexit 101\n' "$PROVISION_NAME" \
      | $SUDO tee "$POLICY_RC" >/dev/null
    $SUDO chmod 0755 "$POLICY_RC"
    temporary_policy=1
  fi
  log "installing $*"
  apt_update_once
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}
