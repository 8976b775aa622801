#!/usr/bin/env bash
# Runs every Go fuzz target in the workspace for the given time each (go test allows one
# target per invocation). Targets are found by their declaration, so no test binary is built
# just to list them. Usage: hack/fuzz.sh 60s
set -euo pipefail
fuzztime=${1:-60s}
cd "$(dirname "${BASH_SOURCE[0]}")/.."
found=0
while IFS=: read -r file decl; do
  target=$(sed -E 's/^func (Fuzz[A-Za-z0-9_]*)\(.*/\1/' <<<"$decl")
  dir=$(dirname "$file")
  found=$((found + 1))
  printf '• fuzz %-36s ./%s for %s\n' "$target" "$dir" "$fuzztime"
  (cd "$dir" && go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" . 2>&1 | tail -n 3)
done < <(grep -E '^func Fuzz[A-Za-z0-9_]*\(f \*testing\.F\)' --include='*_test.go' -r operator scenarios e2e bench)
if [[ $found -eq 0 ]]; then
  echo "✗ no fuzz targets found" >&2
  exit 1
fi
echo "✓ $found fuzz targets ran for $fuzztime each"
