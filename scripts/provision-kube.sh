#!/usr/bin/env bash
# Provisions, once per machine, the real Kubernetes components the end-to-end tests run against:
# etcd (etcd-server), kubectl (kubernetes-client) and the control plane v1.20.2 built from Debian's
# `kubernetes` source package with Debian's Go: kube-apiserver, and for the small cluster
# (test/support/small-cluster.ts) kube-controller-manager, kube-scheduler and kube-proxy. The binaries are
# cached outside the clone and reused.
# Idempotent: a second run finds everything in place and returns at once.
set -euo pipefail

# shellcheck source=provision-common.sh
source "$(dirname "$0")/provision-common.sh"
KUBECTL_BIN="$CACHE_DIR/bin/kubectl"

need_pkgs=()
command -v etcd >/dev/null 2>&1 || need_pkgs+=(etcd-server)
command -v openssl >/dev/null 2>&1 || need_pkgs+=(openssl)
# kube-proxy writes the small cluster's Service rules with it (inside the cluster's own network namespace).
[ -x /usr/sbin/iptables ] || need_pkgs+=(iptables)
if [ "${#need_pkgs[@]}" -gt 0 ]; then
  log "installing ${need_pkgs[*]}"
  apt_update_once
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_pkgs[@]}" >/dev/null
fi

mkdir -p "$CACHE_DIR/bin"
# Debian's kubernetes-client is unpacked into the cache rather than installed: another package
# (e.g. a vendor kubectl) may already own /usr/bin/kubectl, and the tests want Debian's v1.20.
if ! [ -x "$KUBECTL_BIN" ]; then
  log "unpacking Debian's kubernetes-client"
  apt_update_once
  tmp=$(mktemp -d)
  (cd "$tmp" && apt-get download -qq kubernetes-client >/dev/null && dpkg-deb -x kubernetes-client_*.deb root)
  install -m 0755 "$tmp/root/usr/bin/kubectl" "$KUBECTL_BIN"
  rm -rf "$tmp"
fi

# shellcheck source=kube-build.sh
source "$(dirname "$0")/kube-build.sh"
kube_build kube-apiserver kube-controller-manager kube-scheduler kube-proxy
