#!/usr/bin/env bash
# Builds the Go tool that hack/tools/<name>/go.mod pins (its `tool` line) from the Go module proxy
# into a versioned cache directory, skipping it when present (a new pin is a new directory, so
# changing the pin rebuilds). Prints the binary's path on the last line of stdout; progress goes
# to stderr.
#
#   hack/tool.sh golangci-lint
#   hack/tool.sh actionlint
set -euo pipefail
# The tools modules live outside go.work on purpose: a tool's dependency versions must not meet
# the workspace's build list.

name=${1:?usage: hack/tool.sh <tool> (a directory of hack/tools with a go.mod that has a tool line)}
CACHE_DIR=${GAUNTLET_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gauntlet}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DIR="$ROOT/hack/tools/$name"

pkg=$(awk '$1 == "tool" { print $2; exit }' "$DIR/go.mod" 2>/dev/null || true)
if [[ -z "$pkg" ]]; then
  echo "hack/tool.sh: $DIR/go.mod names no tool (add one: cd $DIR && GOWORK=off go get -tool <package>@<version>)" >&2
  exit 2
fi
# A tool that does not build with the workspace's Go names the toolchain it needs in its go.mod
# (`toolchain goX.Y.Z`); the go command fetches it from the module proxy once.
toolchain=$(awk '$1 == "toolchain" { print $2; exit }' "$DIR/go.mod")
if [[ -n "$toolchain" ]]; then
  export GOTOOLCHAIN="$toolchain"
fi
version=$(cd "$DIR" && GOWORK=off go list -f '{{.Module.Version}}' "$pkg")
OUT="$CACHE_DIR/tools/$name-$version/$name"

if [[ -x "$OUT" ]]; then
  printf '• %-26s %s\n' "$name" "cached ($OUT)" >&2
else
  t0=$SECONDS
  printf '• %-26s %s\n' "$name" "building $pkg@$version${toolchain:+ with $toolchain} (minutes cold on 2 cores)…" >&2
  mkdir -p "$(dirname "$OUT")"
  # No version ldflags: the tools read their version from the build info. Each build writes a
  # file of its own and renames it into place, so two at once (two checkouts) cannot mix.
  tmp="$OUT.tmp.$$"
  trap 'rm -f "$tmp"' EXIT
  (cd "$DIR" && GOWORK=off CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$tmp" "$pkg")
  mv "$tmp" "$OUT"
  printf '• %-26s %s\n' "$name" "✓ built in $((SECONDS - t0))s" >&2
fi
echo "$OUT"
