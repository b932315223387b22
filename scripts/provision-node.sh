#!/usr/bin/env bash
# Provisions, once per machine, what the real-node end-to-end tests run (test/support/real-node.ts):
# containerd, runc, the CNI plugins, a static busybox (the tests build runnable images from it) and iproute2
# from Debian's packages, and a kubelet v1.20.2 built from the same Debian `kubernetes` source tree as
# provision-kube.sh's kube-apiserver, cached next to it outside the clone.
# Idempotent: a second run finds everything in place and returns at once.
set -euo pipefail

CACHE_DIR="${IMPRIMATUR_CACHE:-${HOME:-/root}/.cache/imprimatur}"
KUBELET_BIN="$CACHE_DIR/bin/kubelet"
# What the cached binary was built from; a different stamp means rebuild.
BUILD_STAMP_FILE="$CACHE_DIR/bin/kubelet.stamp"
BUILD_STAMP="v1.20.2 with reflect2 1.0.2"
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

mkdir -p "$CACHE_DIR/bin"
if [ -x "$KUBELET_BIN" ] && [ "$(cat "$BUILD_STAMP_FILE" 2>/dev/null)" = "$BUILD_STAMP" ] && "$KUBELET_BIN" --version >/dev/null 2>&1; then
  log "kubelet cached: $("$KUBELET_BIN" --version)"
  exit 0
fi

log "building kubelet from Debian's kubernetes source package (about 3 minutes)"
DEBIAN_FRONTEND=noninteractive
export DEBIAN_FRONTEND

# deb-src entries derived from the machine's own Debian sources (no mirror host written here); the same
# file provision-kube.sh writes.
SRC_LIST=/etc/apt/sources.list.d/imprimatur-deb-src.sources
if [ ! -f "$SRC_LIST" ] && [ ! -f /etc/apt/sources.list.d/imprimatur-deb-src.list ]; then
  if [ -f /etc/apt/sources.list.d/debian.sources ]; then
    sed -e 's/^Types:.*/Types: deb-src/' /etc/apt/sources.list.d/debian.sources | $SUDO tee "$SRC_LIST" >/dev/null
  elif [ -f /etc/apt/sources.list ]; then
    grep -E '^deb ' /etc/apt/sources.list | sed -e 's/^deb /deb-src /' \
      | $SUDO tee /etc/apt/sources.list.d/imprimatur-deb-src.list >/dev/null
  else
    log "no Debian sources entry found to derive deb-src from"; exit 1
  fi
  apt_updated=0
fi
build_pkgs=()
for pkg in golang-go rsync dpkg-dev make gcc libc6-dev golang-github-modern-go-reflect2-dev; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'ok installed' || build_pkgs+=("$pkg")
done
if [ "${#build_pkgs[@]}" -gt 0 ]; then
  apt_update_once
  $SUDO apt-get install -y -qq "${build_pkgs[@]}" >/dev/null
fi

# The source tree provision-kube.sh unpacks; unpacked here too if this script runs first.
SRC_PARENT="$CACHE_DIR/src"
mkdir -p "$SRC_PARENT"
cd "$SRC_PARENT"
src_root=$(find "$SRC_PARENT" -maxdepth 1 -type d -name 'kubernetes-*' | head -n1)
if [ -z "$src_root" ]; then
  apt_update_once
  apt-get source --download-only kubernetes >/dev/null
  dpkg-source --no-check -x kubernetes_*.dsc >/dev/null
  src_root=$(find "$SRC_PARENT" -maxdepth 1 -type d -name 'kubernetes-*' | head -n1)
fi
log "source in $src_root"

# The reflect2 swap, as in provision-kube.sh: the vendored 1.0.1 crashes at random under Debian's newer Go.
REFLECT2_SRC=/usr/share/gocode/src/github.com/modern-go/reflect2
[ -f "$REFLECT2_SRC/reflect2.go" ] || { log "reflect2 source not found in $REFLECT2_SRC"; exit 1; }
rsync -a --delete "$REFLECT2_SRC/" "$src_root/vendor/github.com/modern-go/reflect2/"

mkdir -p "$src_root/.go/src/k8s.io"
ln -sfn "$src_root" "$src_root/.go/src/k8s.io/kubernetes"
cd "$src_root/.go/src/k8s.io/kubernetes"
GOPATH="$src_root/.go" GO111MODULE=off GOFLAGS=-mod=vendor GOCACHE="$CACHE_DIR/gocache" \
  KUBE_GIT_VERSION=v1.20.2 KUBE_GIT_TREE_STATE=clean \
  make WHAT=cmd/kubelet >"$CACHE_DIR/build-kubelet.log" 2>&1 || {
    log "build failed; last lines of $CACHE_DIR/build-kubelet.log:"; tail -n 30 "$CACHE_DIR/build-kubelet.log" >&2; exit 1; }
built=$(find "$src_root/_output" -type f -name kubelet -perm -u+x | head -n1)
install -m 0755 "$built" "$KUBELET_BIN"
printf '%s\n' "$BUILD_STAMP" >"$BUILD_STAMP_FILE"
log "kubelet ready: $("$KUBELET_BIN" --version)"
