#!/usr/bin/env bash
# Builds the control-plane binaries (etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
# kubectl) from the Go module proxy into a versioned cache directory, skipping any binary already
# there. Prints the bin directory on the last line of stdout; progress goes to stderr.
#
#   hack/control-plane.sh            # build what is missing
#   K8S_VERSION=v1.36.3 hack/control-plane.sh
set -euo pipefail
# The tools modules live outside go.work on purpose (their replace directives must not leak).

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
K8S_VERSION=${K8S_VERSION:-$("$ROOT/hack/k8s-module.sh" --newest)}
ETCD_VERSION=${ETCD_VERSION:-v3.6.7}
CACHE_DIR=${GAUNTLET_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gauntlet}
BIN_DIR="$CACHE_DIR/k8s/$K8S_VERSION/bin"

K8S_MODULE=$("$ROOT/hack/k8s-module.sh" "$K8S_VERSION")

mkdir -p "$BIN_DIR"
start=$SECONDS
step() { printf '• %-26s %s\n' "$1" "$2" >&2; }

# Version stamps: without them the binaries report v0.0.0-master and kubectl version errors.
k8s_ldflags=$("$ROOT/hack/k8s-ldflags.sh" "$K8S_VERSION")

build() { # build <name> <module dir> <package> <ldflags>
  local name=$1 dir=$2 pkg=$3 ldflags=$4 t0=$SECONDS
  if [[ -x "$BIN_DIR/$name" ]]; then
    step "$name" "cached ($BIN_DIR/$name)"
    return
  fi
  step "$name" "building $pkg (cold builds take minutes on 2 cores)…"
  # A temporary name of this process's own: two builds at once (make kind-node-image beside
  # make e2e) each rename a whole binary into place, and the last one wins.
  local tmp="$BIN_DIR/.$name.$$.tmp"
  (cd "$dir" && GOWORK=off CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$tmp" "$pkg")
  mv "$tmp" "$BIN_DIR/$name"
  step "$name" "✓ built in $((SECONDS - t0))s"
}

build etcd "$ROOT/hack/tools/etcd" go.etcd.io/etcd/server/v3 "-s -w"
for cmd in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
  build "$cmd" "$K8S_MODULE" "k8s.io/kubernetes/cmd/$cmd" "$k8s_ldflags"
done
step "control plane" "✓ ready in $((SECONDS - start))s"
echo "$BIN_DIR"
