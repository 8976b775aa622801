#!/usr/bin/env bash
# Adds a Kubernetes version the harness can build: writes the tools module
# hack/tools/k8s/<version>/ (k8s.io/kubernetes at that version, its staging modules replaced by
# their published v0.<minor>.<patch> twins) and, unless there is one, the module
# hack/tools/coredns/<CoreDNS version>/ for the CoreDNS that version's kubeadm deploys (kind node
# images). The directories under hack/tools/k8s are the supported versions: hack/control-plane.sh,
# hack/kind-node-image.sh, make e2e-matrix and the nightly workflow all read them. Run it again
# for a version whose modules are there to fill in what is missing.
#
#   hack/add-k8s-version.sh v1.36.3
set -euo pipefail
version=${1:?usage: hack/add-k8s-version.sh <Kubernetes version served by the Go module proxy, e.g. v1.36.3>}
[[ "$version" =~ ^v1\.([0-9]+)\.([0-9]+)$ ]] ||
  { echo "add-k8s-version: $version is not a Kubernetes release version (want v1.<minor>.<patch>)" >&2; exit 2; }
staging_version="v0.${BASH_REMATCH[1]}.${BASH_REMATCH[2]}"
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dir="$ROOT/hack/tools/k8s/$version"

add_coredns() { # the module building the CoreDNS that $version's kubeadm deploys
  local coredns cdir
  coredns=$("$ROOT/hack/k8s-module.sh" --coredns "$version")
  cdir="$ROOT/hack/tools/coredns/$coredns"
  if [[ -f "$cdir/go.mod" ]]; then
    echo "✓ kubeadm $version deploys CoreDNS $coredns: $cdir is there" >&2
    return
  fi
  echo "• kubeadm $version deploys CoreDNS $coredns: writing $cdir …" >&2
  mkdir -p "$cdir"
  trap 'rm -rf "$cdir"' ERR
  printf '%s\n' "// Module $coredns builds CoreDNS $coredns for offline kind node images (hack/kind-node-image.sh):" \
    "// the version kubeadm asks for. Written by hack/add-k8s-version.sh." \
    "module github.com/gauntlet-dev/gauntlet/hack/tools/coredns/$coredns" "" "go 1.26.0" >"$cdir/go.mod"
  (cd "$cdir" && GOWORK=off go get -tool "github.com/coredns/coredns@$coredns" && GOWORK=off go mod tidy)
  trap - ERR
}

if [[ -f "$dir/go.mod" ]]; then
  echo "✓ $dir is there" >&2
  add_coredns
  exit 0
fi

echo "• fetching k8s.io/kubernetes@$version's go.mod from the module proxy…" >&2
if ! upstream_mod=$(GOWORK=off GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$version" 2>&1 |
  sed -n 's/^\s*"GoMod": "\(.*\)",\?$/\1/p') || [[ -z "$upstream_mod" ]]; then
  echo "add-k8s-version: the Go module proxy does not serve k8s.io/kubernetes@$version" >&2
  echo "  list what it serves: go list -m -versions k8s.io/kubernetes" >&2
  exit 2
fi

# k8s.io/kubernetes replaces its staging modules with ./staging/src/k8s.io/<name>: point each at
# the published module of the same release instead.
mapfile -t staging < <(sed -n 's|^\s*\(k8s\.io/[a-z0-9-]*\) => \./staging/src/.*|\1|p' "$upstream_mod")
((${#staging[@]} > 0)) || { echo "add-k8s-version: found no staging replace lines in $upstream_mod" >&2; exit 1; }

mkdir -p "$dir"
trap 'rm -rf "$dir"' ERR
{
  echo "// Module $version builds the Kubernetes $version binaries that the local provider, envtest and"
  echo "// the kind node image run. It lives outside go.work so its replace directives (the staging"
  echo "// modules of k8s.io/kubernetes) never leak into the operator's build list."
  echo "// Written by hack/add-k8s-version.sh $version."
  echo "module github.com/gauntlet-dev/gauntlet/hack/tools/k8s/$version"
  echo
  echo "go 1.26.0"
  echo
  echo "require k8s.io/kubernetes $version"
  echo
  echo "replace ("
  for m in "${staging[@]}"; do printf '\t%s => %s %s\n' "$m" "$m" "$staging_version"; done
  echo ")"
  echo
  echo "tool ("
  for cmd in kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet kubeadm kube-proxy; do
    printf '\tk8s.io/kubernetes/cmd/%s\n' "$cmd"
  done
  echo ")"
} >"$dir/go.mod"
echo "• go mod tidy (downloads the staging modules)…" >&2
(cd "$dir" && GOWORK=off go mod tidy)
trap - ERR
add_coredns
echo "✓ $dir: build it with  make control-plane K8S_VERSION=$version" >&2
