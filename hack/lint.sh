#!/usr/bin/env bash
# `make lint`: gofmt, golangci-lint (configured by .golangci.yml: govet — go vet's analyzers —,
# staticcheck, errcheck, gosec, testifylint, ineffassign, unused, misspell, nolintlint, and the
# gofmt formatter) once per module of go.work, actionlint over the GitHub workflows, and a check
# that generated files match their sources. Every step runs; the script then fails naming the
# steps that failed.
#
#   hack/lint.sh                                   # every module
#   LINT_MODULES="operator bench" hack/lint.sh     # some modules
#   GOLANGCI_LINT_ARGS=--enable-only=testifylint hack/lint.sh
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
read -r -a modules <<<"${LINT_MODULES:-operator scenarios e2e bench}"
read -r -a extra <<<"${GOLANGCI_LINT_ARGS:-}"
failed=()
step() { printf '• %-26s %s\n' "$1" "$2"; }

step gofmt "gofmt -l ${modules[*]} hack"
unformatted=$(gofmt -l "${modules[@]}" hack)
if [[ -n "$unformatted" ]]; then
  echo "✗ not gofmt-formatted (run gofmt -w on each file):"
  echo "$unformatted"
  failed+=(gofmt)
fi

golangci_lint=$(hack/tool.sh golangci-lint) # built once into the cache, rebuilt when the pin changes
# One run per module: a package that does not compile hides every other finding of its run.
for m in "${modules[@]}"; do
  t0=$SECONDS
  step "golangci-lint $m" "running ./$m/..."
  if "$golangci_lint" run "${extra[@]}" "./$m/..."; then
    step "golangci-lint $m" "✓ clean in $((SECONDS - t0))s"
  else
    echo "✗ golangci-lint found problems in $m (rerun: $golangci_lint run ./$m/...)"
    failed+=("golangci-lint $m")
  fi
done

step actionlint "the GitHub workflows (.github/workflows)"
if ! "$(hack/tool.sh actionlint)" -color=false; then
  echo "✗ actionlint found problems in .github/workflows"
  failed+=(actionlint)
fi

step generated "controller-gen output (deepcopy, CRDs, webhook manifests) up to date"
if ! hack/check-generated.sh; then
  failed+=(generated)
fi

if ((${#failed[@]})); then
  echo "✗ lint failed: $(IFS=,; echo "${failed[*]}" | sed 's/,/, /g')"
  exit 1
fi
echo "✓ lint clean"
