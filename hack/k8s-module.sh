#!/usr/bin/env bash
# The Kubernetes versions the harness builds are the tools modules hack/tools/k8s/<version>/ (add
# one with hack/add-k8s-version.sh). Used by the Makefile, hack/control-plane.sh and
# hack/kind-node-image.sh.
#
#   hack/k8s-module.sh v1.37.2   # that version's module directory, or what is supported and how to add it
#   hack/k8s-module.sh --newest  # the newest supported version: the default K8S_VERSION
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
supported() { (cd "$ROOT/hack/tools/k8s" && ls -d v*/ 2>/dev/null | tr -d / | sort -V); }
version=${1:?usage: hack/k8s-module.sh <Kubernetes version, e.g. v1.37.2> | --newest}
if [[ "$version" == --newest ]]; then
  supported | tail -n1
  exit
fi
dir="$ROOT/hack/tools/k8s/$version"
if [[ ! -f "$dir/go.mod" ]]; then
  echo "K8S_VERSION=$version is not supported; supported: $(supported | paste -sd' ')" >&2
  echo "  add a version the Go module proxy serves with: hack/add-k8s-version.sh $version" >&2
  exit 2
fi
echo "$dir"
