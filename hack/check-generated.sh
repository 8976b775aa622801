#!/usr/bin/env bash
# Fails when the committed generated files (deepcopy, CRDs, webhook manifests) differ from
# what controller-gen produces from the current sources. Generates into a scratch copy so
# the working tree is never touched.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cp -r "$root/operator" "$scratch/operator"
mkdir -p "$scratch/charts/dynamo-operator"
cp -r "$root/charts/dynamo-operator/files" "$scratch/charts/dynamo-operator/files"
gen() { (cd "$scratch/operator" && GOWORK=off go run sigs.k8s.io/controller-tools/cmd/controller-gen@v0.23.0 "$@"); }
gen object:headerFile=hack/boilerplate.go.txt paths=./api/...
rm -rf "$scratch/charts/dynamo-operator/files/crds" "$scratch/charts/dynamo-operator/files/webhook"
gen crd:crdVersions=v1 paths=./api/... output:crd:dir=../charts/dynamo-operator/files/crds
gen webhook paths=./internal/webhook/... output:webhook:dir=../charts/dynamo-operator/files/webhook
stale=0
for rel in charts/dynamo-operator/files/crds charts/dynamo-operator/files/webhook operator/api; do
  if ! diff -r "$root/$rel" "$scratch/$rel" >"$scratch/diff.txt"; then
    echo "✗ generated files under $rel are stale — run 'make generate' and commit:" >&2
    head -n 40 "$scratch/diff.txt" >&2
    stale=1
  fi
done
exit $stale
