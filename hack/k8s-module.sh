#!/usr/bin/env bash
# The Kubernetes versions the harness builds are the tools modules hack/tools/k8s/<version>/ (add
# one with hack/add-k8s-version.sh). Used by the Makefile, hack/control-plane.sh,
# hack/kind-node-image.sh and hack/add-k8s-version.sh.
#
#   hack/k8s-module.sh v1.37.2            # that version's module directory, or what is supported and how to add it
#   hack/k8s-module.sh --newest           # the newest supported version: the default K8S_VERSION
#   hack/k8s-module.sh --coredns v1.37.2  # the CoreDNS version that version's kubeadm deploys
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
supported() { (cd "$ROOT/hack/tools/k8s" && ls -d v*/ 2>/dev/null | tr -d / | sort -V); }
module_dir() {
  local dir="$ROOT/hack/tools/k8s/$1"
  if [[ ! -f "$dir/go.mod" ]]; then
    echo "K8S_VERSION=$1 is not supported; supported: $(supported | paste -sd' ')" >&2
    echo "  add a version the Go module proxy serves with: hack/add-k8s-version.sh $1" >&2
    exit 2
  fi
  echo "$dir"
}
case ${1:?usage: hack/k8s-module.sh <Kubernetes version, e.g. v1.37.2> | --newest | --coredns <version>} in
--newest) supported | tail -n1 ;;
--coredns)
  dir=$(module_dir "${2:?usage: hack/k8s-module.sh --coredns <Kubernetes version>}")
  src=$(cd "$dir" && GOWORK=off go mod download -json k8s.io/kubernetes | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
  sed -n 's/^[[:space:]]*CoreDNSVersion[[:space:]]*=[[:space:]]*"\(v[^"]*\)".*/\1/p' "$src/cmd/kubeadm/app/constants/constants.go" | grep . ||
    { echo "k8s-module: no CoreDNSVersion in kubeadm's constants ($src)" >&2; exit 1; } ;;
*) module_dir "$1" ;;
esac
