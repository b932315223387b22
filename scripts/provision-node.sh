#!/usr/bin/env bash
# Provisions, once per machine, what the real-node end-to-end tests run (test/support/real-node.ts):
# containerd, runc, the CNI plugins, a static busybox (the tests build runnable images from it) and iproute2
# from Debian's packages, and a kubelet v1.20.2 built from the same Debian `kubernetes` source tree as
# provision-kube.sh's kube-apiserver, cached next to it outside the clone.
# Idempotent: a second run finds everything in place and returns at once.
set -euo pipefail

# shellcheck source=provision-common.sh
source "$(dirname "$0")/provision-common.sh"

need_pkgs=()
command -v containerd >/dev/null 2>&1 || need_pkgs+=(containerd)
command -v runc >/dev/null 2>&1 || need_pkgs+=(runc)
[ -x /usr/lib/cni/bridge ] || need_pkgs+=(containernetworking-plugins)
# Only the static build will do: its binary is copied into images that have no libc.
dpkg-query -W -f='${Status}' busybox-static 2>/dev/null | grep -q 'ok installed' || need_pkgs+=(busybox-static)
command -v ip >/dev/null 2>&1 || need_pkgs+=(iproute2)
if [ "${#need_pkgs[@]}" -gt 0 ]; then install_without_services "${need_pkgs[@]}"; fi

# shellcheck source=kube-build.sh
source "$(dirname "$0")/kube-build.sh"
kube_build kubelet
