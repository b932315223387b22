# shellcheck shell=bash
# Sourced by provision-kube.sh and provision-node.sh: builds a Kubernetes v1.20.2 component from Debian's
# `kubernetes` source package with Debian's Go, cached outside the clone. The caller has sourced
# provision-common.sh (CACHE_DIR, SUDO, log, apt_update_once).

# What a cached binary was built from; a different stamp means rebuild.
KUBE_BUILD_STAMP="v1.20.2 with reflect2 1.0.2"

# kube_cached NAME: whether $CACHE_DIR/bin/NAME is there, runs, and carries the current stamp.
kube_cached() {
  local bin="$CACHE_DIR/bin/$1"
  [ -x "$bin" ] && [ "$(cat "$bin.stamp" 2>/dev/null)" = "$KUBE_BUILD_STAMP" ] && "$bin" --version >/dev/null 2>&1
}

# kube_build NAME...: $CACHE_DIR/bin/NAME built from cmd/NAME for each NAME that has no binary with the current
# stamp. The missing ones are built by one make run, so the packages they share are compiled once.
kube_build() {
  local name missing=() targets=()
  mkdir -p "$CACHE_DIR/bin"
  for name in "$@"; do
    if kube_cached "$name"; then
      log "$name cached: $("$CACHE_DIR/bin/$name" --version)"
    else
      missing+=("$name")
      targets+=("cmd/$name")
    fi
  done
  [ "${#missing[@]}" -gt 0 ] || return 0
  local build_log
  build_log="$CACHE_DIR/build-$(IFS=+; echo "${missing[*]}").log"
  log "building ${missing[*]} from Debian's kubernetes source package (a few minutes each)"
  export DEBIAN_FRONTEND=noninteractive

  # deb-src entries derived from the machine's own Debian sources (no mirror host written here).
  if [ ! -f /etc/apt/sources.list.d/imprimatur-deb-src.sources ] && [ ! -f /etc/apt/sources.list.d/imprimatur-deb-src.list ]; then
    if [ -f /etc/apt/sources.list.d/debian.sources ]; then
      sed -e 's/^Types:.*/Types: deb-src/' /etc/apt/sources.list.d/debian.sources | $SUDO tee /etc/apt/sources.list.d/imprimatur-deb-src.sources >/dev/null
    elif [ -f /etc/apt/sources.list ]; then
      grep -E '^deb ' /etc/apt/sources.list | sed -e 's/^deb /deb-src /' | $SUDO tee /etc/apt/sources.list.d/imprimatur-deb-src.list >/dev/null
    else
      log "no Debian sources entry found to derive deb-src from"
      return 1
    fi
    apt_updated=0
  fi
  local build_pkgs=() pkg
  for pkg in golang-go rsync dpkg-dev make gcc libc6-dev golang-github-modern-go-reflect2-dev; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'ok installed' || build_pkgs+=("$pkg")
  done
  if [ "${#build_pkgs[@]}" -gt 0 ]; then
    apt_update_once
    $SUDO apt-get install -y -qq "${build_pkgs[@]}" >/dev/null
  fi

  local src_parent="$CACHE_DIR/src" src_root
  mkdir -p "$src_parent"
  src_root=$(find "$src_parent" -maxdepth 1 -type d -name 'kubernetes-*' | head -n1)
  if [ -z "$src_root" ]; then
    apt_update_once
    (cd "$src_parent" && apt-get source --download-only kubernetes >/dev/null && dpkg-source --no-check -x kubernetes_*.dsc >/dev/null)
    src_root=$(find "$src_parent" -maxdepth 1 -type d -name 'kubernetes-*' | head -n1)
  fi
  log "source in $src_root"

  # Kubernetes 1.20 vendors reflect2 1.0.1, whose map iteration assumes the Go runtime's layout before Go 1.18;
  # built with Debian's newer Go, the binaries then crash at random ("fatal error: fault" in mapiterinit), e.g.
  # when decoding custom resources. Debian packages reflect2 1.0.2, fixed and API-compatible: it replaces the
  # vendored copy.
  local reflect2_src=/usr/share/gocode/src/github.com/modern-go/reflect2
  [ -f "$reflect2_src/reflect2.go" ] || { log "reflect2 source not found in $reflect2_src"; return 1; }
  rsync -a --delete "$reflect2_src/" "$src_root/vendor/github.com/modern-go/reflect2/"

  # The build expects a GOPATH layout with k8s.io/kubernetes pointing at the source root.
  mkdir -p "$src_root/.go/src/k8s.io"
  ln -sfn "$src_root" "$src_root/.go/src/k8s.io/kubernetes"
  (cd "$src_root/.go/src/k8s.io/kubernetes" &&
    GOPATH="$src_root/.go" GO111MODULE=off GOFLAGS=-mod=vendor GOCACHE="$CACHE_DIR/gocache" \
      KUBE_GIT_VERSION=v1.20.2 KUBE_GIT_TREE_STATE=clean make WHAT="${targets[*]}" >"$build_log" 2>&1) || {
    log "build failed; last lines of $build_log:"
    tail -n 30 "$build_log" >&2
    return 1
  }
  local built bin
  for name in "${missing[@]}"; do
    bin="$CACHE_DIR/bin/$name"
    built=$(find "$src_root/_output" -type f -name "$name" -perm -u+x | head -n1)
    install -m 0755 "$built" "$bin"
    printf '%s\n' "$KUBE_BUILD_STAMP" >"$bin.stamp"
    log "$name ready: $("$bin" --version)"
  done
}
