#!/usr/bin/env bash
# Provisions, once per machine, the real Kubernetes components the end-to-end tests run against:
# etcd (etcd-server), kubectl (kubernetes-client) and a kube-apiserver v1.20.2 built from Debian's
# `kubernetes` source package with Debian's Go. The binary is cached outside the clone and reused.
# Idempotent: a second run finds everything in place and returns at once.
set -euo pipefail

CACHE_DIR="${IMPRIMATUR_CACHE:-${HOME:-/root}/.cache/imprimatur}"
APISERVER_BIN="$CACHE_DIR/bin/kube-apiserver"
# What the cached binary was built from; a different stamp means rebuild.
BUILD_STAMP_FILE="$CACHE_DIR/bin/kube-apiserver.stamp"
BUILD_STAMP="v1.20.2 with reflect2 1.0.2"
KUBECTL_BIN="$CACHE_DIR/bin/kubectl"
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

log() { printf '[provision-kube] %s\n' "$*" >&2; }

apt_updated=0
apt_update_once() {
  if [ "$apt_updated" = 0 ]; then
    $SUDO apt-get update -qq
    apt_updated=1
  fi
}

need_pkgs=()
command -v etcd >/dev/null 2>&1 || need_pkgs+=(etcd-server)
command -v openssl >/dev/null 2>&1 || need_pkgs+=(openssl)
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

if [ -x "$APISERVER_BIN" ] && [ "$(cat "$BUILD_STAMP_FILE" 2>/dev/null)" = "$BUILD_STAMP" ] && "$APISERVER_BIN" --version >/dev/null 2>&1; then
  log "kube-apiserver cached: $("$APISERVER_BIN" --version)"
  exit 0
fi

log "building kube-apiserver from Debian's kubernetes source package (about 5 minutes)"
DEBIAN_FRONTEND=noninteractive
export DEBIAN_FRONTEND

# deb-src entries derived from the machine's own Debian sources (no mirror host written here).
SRC_LIST=/etc/apt/sources.list.d/imprimatur-deb-src.sources
if [ ! -f "$SRC_LIST" ]; then
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
apt_update_once
$SUDO apt-get install -y -qq golang-go rsync dpkg-dev make golang-github-modern-go-reflect2-dev >/dev/null

SRC_PARENT="$CACHE_DIR/src"
mkdir -p "$SRC_PARENT"
cd "$SRC_PARENT"
src_root=$(find "$SRC_PARENT" -maxdepth 1 -type d -name 'kubernetes-*' | head -n1)
if [ -z "$src_root" ]; then
  apt-get source --download-only kubernetes >/dev/null
  dpkg-source --no-check -x kubernetes_*.dsc >/dev/null
  src_root=$(find "$SRC_PARENT" -maxdepth 1 -type d -name 'kubernetes-*' | head -n1)
fi
log "source in $src_root"

# Kubernetes 1.20 vendors reflect2 1.0.1, whose map iteration assumes the Go runtime's layout before
# Go 1.18; built with Debian's newer Go, the apiserver then crashes at random ("fatal error: fault" in
# mapiterinit), e.g. when decoding custom resources. Debian packages reflect2 1.0.2, which is fixed and
# API-compatible: use it in place of the vendored copy.
REFLECT2_SRC=/usr/share/gocode/src/github.com/modern-go/reflect2
[ -f "$REFLECT2_SRC/reflect2.go" ] || { log "reflect2 source not found in $REFLECT2_SRC"; exit 1; }
rsync -a --delete "$REFLECT2_SRC/" "$src_root/vendor/github.com/modern-go/reflect2/"

# The build expects a GOPATH layout with k8s.io/kubernetes pointing at the source root.
mkdir -p "$src_root/.go/src/k8s.io"
ln -sfn "$src_root" "$src_root/.go/src/k8s.io/kubernetes"
cd "$src_root/.go/src/k8s.io/kubernetes"
GOPATH="$src_root/.go" GO111MODULE=off GOFLAGS=-mod=vendor GOCACHE="$CACHE_DIR/gocache" \
  KUBE_GIT_VERSION=v1.20.2 KUBE_GIT_TREE_STATE=clean \
  make WHAT=cmd/kube-apiserver >"$CACHE_DIR/build.log" 2>&1 || {
    log "build failed; last lines of $CACHE_DIR/build.log:"; tail -n 30 "$CACHE_DIR/build.log" >&2; exit 1; }
built=$(find "$src_root/_output" -type f -name kube-apiserver -perm -u+x | head -n1)
install -m 0755 "$built" "$APISERVER_BIN"
printf '%s\n' "$BUILD_STAMP" >"$BUILD_STAMP_FILE"
log "kube-apiserver ready: $("$APISERVER_BIN" --version)"
