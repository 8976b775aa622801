#!/usr/bin/env bash
# Prints the go build -ldflags that stamp a Kubernetes version into binaries built from
# k8s.io/kubernetes (without them they report v0.0.0-master and `kubectl version` errors).
# Used by hack/control-plane.sh and hack/kind-node-image.sh.
#
#   hack/k8s-ldflags.sh v1.37.0
set -euo pipefail
version=${1:?usage: hack/k8s-ldflags.sh <kubernetes version, e.g. v1.37.0>}
minor=$(echo "$version" | cut -d. -f2)
build_date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
flags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  flags+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  flags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$build_date"
done
echo "$flags"
