#!/usr/bin/env bash
# Provisions, once per machine, what the real-node end-to-end tests run (test/support/real-node.ts):
# containerd, runc, the CNI plugins, a static busybox (the tests build runnable images from it) and iproute2
# from Debian's packages, and a kubelet v1.20.2 built from the same Debian `kubernetes` source tree as
# provision-kube.sh's kube-apiserver, cached next to it outside the clone.
# Idempotent: a second run finds everything in place and returns at once.
set -euo pipefail

CACHE_DIR="${IMPRIMATUR_CACHE:-${HOME:-/root}/.cache/imprimatur}"
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

log() { printf '[provision-node] %s\n' "$*" >&2; }

apt_updated=0
apt_update_once() {
  if [ "$apt_updated" = 0 ]; then
    $SUDO apt-get update -qq
    apt_updated=1
  fi
}

# The tests run their own containerd; the package's system service is never wanted. As in
# provision-registry.sh, a policy-rc.d answering 101 keeps the installation from starting it, installed only
# for this run and only if the machine has none of its own.
POLICY_RC=/usr/sbin/policy-rc.d
temporary_policy=0
remove_temporary_policy() {
  if [ "$temporary_policy" = 1 ]; then $SUDO rm -f "$POLICY_RC"; fi
}
trap remove_temporary_policy EXIT

need_pkgs=()
command -v containerd >/dev/null 2>&1 || need_pkgs+=(containerd)
command -v runc >/dev/null 2>&1 || need_pkgs+=(runc)
[ -x /usr/lib/cni/bridge ] || need_pkgs+=(containernetworking-plugins)
# Only the static build will do: its binary is copied into images that have no libc.
dpkg-query -W -f='${Status}' busybox-static 2>/dev/null | grep -q 'ok installed' || need_pkgs+=(busybox-static)
command -v ip >/dev/null 2>&1 || need_pkgs+=(iproute2)
if [ "${#need_pkgs[@]}" -gt 0 ]; then
  if [ ! -e "$POLICY_RC" ]; then
    printf '#!/bin/sh\n# Temporary, from imprimatur scripts/provision-node.sh: no service starts.\nexit 101\n' \
      | $SUDO tee "$POLICY_RC" >/dev/null
    $SUDO chmod 0755 "$POLICY_RC"
    temporary_policy=1
  fi
  log "installing ${need_pkgs[*]}"
  apt_update_once
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" >/dev/null
fi

# shellcheck source=kube-build.sh
source "$(dirname "$0")/kube-build.sh"
kube_build kubelet
