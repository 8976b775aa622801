#!/usr/bin/env bash
# kind needs `docker run --privileged`. On some hosts (VMs whose capability bounding set lacks
# CAP_SYS_RESOURCE) Docker 20.10 gives privileged containers every capability the kernel knows,
# runc cannot apply them, and every privileged container fails with
# "unable to apply caps: operation not permitted".
#
#   hack/kind-host.sh check     exit 0 when privileged containers work, else say why (exit 1)
#   hack/kind-host.sh setup     (root) install an OCI runtime wrapper that drops CAP_SYS_RESOURCE and
#                               make it Docker's default runtime (kind cannot pass --runtime);
#                               does nothing when check passes
#   hack/kind-host.sh restore   (root) undo setup: /etc/docker/daemon.json back byte for byte
#
# Docker is reloaded with SIGHUP, never restarted: running containers are not touched.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DAEMON_JSON=${DOCKER_DAEMON_JSON:-/etc/docker/daemon.json}
LIBEXEC=/usr/local/libexec/gauntlet
WRAPPER=$LIBEXEC/runc-cap-wrapper
STATE=/var/lib/gauntlet
BACKUP=$STATE/docker-daemon.json.orig
NO_FILE_MARKER=$STATE/docker-daemon.json.absent # there was no daemon.json before setup
# dockerd's runtimes before setup: a reload that sets "runtimes" replaces the whole table (the
# built-in io.containerd.* aliases included), so setup and restore write these back explicitly.
RUNTIMES_BACKUP=$STATE/docker-runtimes.json
RUNTIME=gauntlet-runc
CHECK_IMAGE=gauntlet.local/kind-host-check:pause

say() { printf '%s\n' "$*" >&2; }
die() { say "✗ $*"; exit 1; }
need_root() { ((EUID == 0)) || die "$1 changes Docker's configuration: run it as root"; }

# ---- check -----------------------------------------------------------------------------------
check_image() { # the tiniest local image: the pause program (hack/tools/pause) FROM scratch
  docker image inspect "$CHECK_IMAGE" >/dev/null 2>&1 && return
  local ctx
  ctx=$(mktemp -d)
  local cached
  cached=$(ls "${GAUNTLET_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gauntlet}"/k8s/*/bin/pause 2>/dev/null | head -n1 || true)
  if [[ -n "$cached" ]]; then # built by hack/kind-node-image.sh
    cp "$cached" "$ctx/pause"
  elif command -v go >/dev/null; then
    (cd "$ROOT/hack/tools/pause" && GOWORK=off CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$ctx/pause" .)
  else
    rm -rf "$ctx"
    die "need Go (not on PATH) to build the check image $CHECK_IMAGE from hack/tools/pause"
  fi
  printf 'FROM scratch\nCOPY pause /pause\nENTRYPOINT ["/pause"]\n' >"$ctx/Dockerfile"
  local out
  out=$(DOCKER_BUILDKIT=0 docker build -q --label gauntlet.kind-host-check=1 -t "$CHECK_IMAGE" "$ctx" 2>&1) ||
    { rm -rf "$ctx"; say "$out"; die "cannot build $CHECK_IMAGE"; }
  rm -rf "$ctx"
}

privileged_error() { # prints docker's error and returns 1 when a privileged container cannot start
  local id out
  if ! out=$(docker run -d --rm --privileged "$CHECK_IMAGE" 2>&1); then
    printf '%s\n' "$out"
    return 1
  fi
  id=$(tail -n1 <<<"$out")
  docker rm -f "$id" >/dev/null 2>&1 || true
}

check() {
  docker info >/dev/null 2>&1 || die "docker is not reachable: $(docker info 2>&1 | tail -n1)"
  check_image
  local err
  if err=$(privileged_error); then
    say "✓ docker run --privileged works (default runtime: $(docker info --format '{{.DefaultRuntime}}'))"
    return 0
  fi
  say "✗ docker run --privileged fails on this host, and kind runs every node privileged:"
  say "    $(grep -m1 -i error <<<"$err" || tail -n1 <<<"$err")"
  local capbnd
  capbnd=$(awk '/^CapBnd:/ {print $2}' /proc/self/status)
  if (((0x$capbnd >> 24 & 1) == 0)); then
    say "  cause: the capability bounding set (CapBnd $capbnd) lacks CAP_SYS_RESOURCE (bit 24);"
    say "  Docker still grants it to privileged containers and runc cannot apply it."
  fi
  say "  fix: run \`make kind-host-setup\` (a runc wrapper as Docker's default runtime; undo: \`make kind-host-restore\`)"
  return 1
}

# ---- setup / restore -------------------------------------------------------------------------
need_jq() {
  command -v jq >/dev/null && return
  say "• installing jq …"
  apt-get install -y jq >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y jq >/dev/null; }
}

write_daemon_json() { # write_daemon_json <jq filter>: applies it to the current file (or {})
  local cur='{}' tmp
  [[ -s "$DAEMON_JSON" ]] && cur=$(cat "$DAEMON_JSON")
  mkdir -p "$(dirname "$DAEMON_JSON")"
  tmp=$(mktemp "$(dirname "$DAEMON_JSON")/.daemon.json.XXXXXX")
  jq "$1" <<<"$cur" >"$tmp" || { rm -f "$tmp"; die "cannot edit $DAEMON_JSON"; }
  chmod 0644 "$tmp"
  mv "$tmp" "$DAEMON_JSON"
}

reload_docker() { # reload_docker <expected default runtime>: SIGHUP dockerd, wait for the change
  local pid
  pid=$(cat /var/run/docker.pid 2>/dev/null || pidof dockerd || true)
  [[ "$pid" =~ ^[0-9]+$ ]] || die "cannot find the dockerd process to reload"
  kill -HUP "$pid"
  for _ in $(seq 1 50); do
    [[ "$(docker info --format '{{.DefaultRuntime}}' 2>/dev/null)" == "$1" ]] && return 0
    sleep 0.2
  done
  die "dockerd (pid $pid) did not switch its default runtime to $1 after SIGHUP (see its log)"
}

install_wrapper() {
  local real
  real=$(command -v runc || true)
  [[ -n "$real" ]] || die "runc is not on PATH"
  mkdir -p "$LIBEXEC"
  cat >"$WRAPPER.tmp" <<EOF
#!/bin/sh
# OCI runtime wrapper installed by gauntlet's hack/kind-host.sh (undo: make kind-host-restore).
# This host's capability bounding set lacks CAP_SYS_RESOURCE, yet Docker gives privileged
# containers every capability: drop it from the bundle's config.json (create/run) and from the
# --process file (exec), then run the real runc.
strip() { # strip <json file> <jq path of a capabilities object>
  [ -f "\$1" ] && grep -q CAP_SYS_RESOURCE "\$1" || return 0
  out=\$(jq -c "\$2 |= (if type == \"object\" then map_values(if type == \"array\"
    then map(select(. != \"CAP_SYS_RESOURCE\")) else . end) else . end)" "\$1") || return 0
  printf '%s\n' "\$out" >"\$1"
}
prev=
for a in "\$@"; do
  case "\$prev" in --bundle | -b) strip "\$a/config.json" .process.capabilities ;; --process | -p) strip "\$a" .capabilities ;; esac
  case "\$a" in --bundle=*) strip "\${a#--bundle=}/config.json" .process.capabilities ;; --process=*) strip "\${a#--process=}" .capabilities ;; esac
  prev=\$a
done
exec $real "\$@"
EOF
  chmod 0755 "$WRAPPER.tmp"
  mv "$WRAPPER.tmp" "$WRAPPER"
}

stock_runtimes() { # the runtimes dockerd had before setup, as a JSON object ({} if unknown)
  jq -c . "$RUNTIMES_BACKUP" 2>/dev/null || echo '{}'
}

setup() {
  need_root setup
  if check 2>/dev/null; then
    say "✓ docker run --privileged already works: nothing to set up"
    return 0
  fi
  need_jq
  local current
  current=$(jq -r '."default-runtime" // "runc"' "$DAEMON_JSON" 2>/dev/null || echo runc)
  [[ "$current" == runc || "$current" == "$RUNTIME" ]] ||
    die "$DAEMON_JSON sets default-runtime \"$current\"; this setup only wraps runc"
  say "• installing the runtime wrapper $WRAPPER"
  install_wrapper
  mkdir -p "$STATE"
  if [[ ! -e "$BACKUP" && ! -e "$NO_FILE_MARKER" ]]; then # keep the first backup: the original
    docker info --format '{{json .Runtimes}}' |
      jq 'del(.runc, ."'"$RUNTIME"'") | map_values({path} + if .runtimeArgs then {runtimeArgs} else {} end)' \
        >"$RUNTIMES_BACKUP"
    if [[ -e "$DAEMON_JSON" ]]; then
      cp -p "$DAEMON_JSON" "$BACKUP"
      say "• backed up $DAEMON_JSON to $BACKUP"
    else
      : >"$NO_FILE_MARKER"
      say "• there is no $DAEMON_JSON (noted in $NO_FILE_MARKER)"
    fi
  fi
  write_daemon_json ".runtimes = ($(stock_runtimes) + (.runtimes // {}) + {\"$RUNTIME\": {\"path\": \"$WRAPPER\"}})
    | .\"default-runtime\" = \"$RUNTIME\""
  say "• registered runtime $RUNTIME as Docker's default; reloading dockerd (SIGHUP)"
  reload_docker "$RUNTIME"
  check || die "privileged containers still fail; undo with \`make kind-host-restore\`"
  say "✓ host set up for kind (undo: make kind-host-restore)"
}

restore() {
  need_root restore
  if [[ ! -e "$BACKUP" && ! -e "$NO_FILE_MARKER" ]]; then
    rm -f "$WRAPPER"
    rmdir "$LIBEXEC" 2>/dev/null || true
    say "✓ nothing to restore (no backup in $STATE)"
    return 0
  fi
  need_jq
  local users
  users=$(docker ps -aq | xargs -r docker inspect --format '{{.HostConfig.Runtime}} {{.Name}}' |
    awk -v r="$RUNTIME" '$1 == r {print substr($2, 2)}' | paste -sd' ' -)
  [[ -z "$users" ]] ||
    die "containers created with the $RUNTIME runtime still exist ($users): delete them first (kind delete cluster …)"
  # Removing the keys is not enough: dockerd keeps a default-runtime that merely disappears.
  write_daemon_json ".\"default-runtime\" = \"runc\" | .runtimes = $(stock_runtimes)"
  say "• default runtime back to runc; reloading dockerd (SIGHUP)"
  reload_docker runc
  if [[ -e "$BACKUP" ]]; then
    cp -p "$BACKUP" "$DAEMON_JSON"
    cmp -s "$BACKUP" "$DAEMON_JSON" || die "$DAEMON_JSON differs from $BACKUP after the copy"
    say "✓ $DAEMON_JSON restored byte for byte (cmp)"
  else
    rm -f "$DAEMON_JSON"
    say "✓ $DAEMON_JSON removed (there was none before setup)"
  fi
  reload_docker runc
  rm -f "$WRAPPER" "$BACKUP" "$NO_FILE_MARKER" "$RUNTIMES_BACKUP"
  rmdir "$LIBEXEC" "$STATE" 2>/dev/null || true
  docker rmi "$CHECK_IMAGE" >/dev/null 2>&1 || true
  say "✓ host restored"
}

case "${1:-}" in
check) check ;;
setup) setup ;;
restore) restore ;;
*)
  say "usage: $0 check|setup|restore"
  exit 2
  ;;
esac
