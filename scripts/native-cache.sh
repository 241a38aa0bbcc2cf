#!/usr/bin/env bash
# better-sqlite3 built once per Node ABI, kept OUTSIDE the clone (ADR 0063). Its install script is
# `prebuild-install || node-gyp rebuild`: prebuild-install's download (GitHub) is unreachable here, so
# every `npm ci` and every other Node compiled SQLite (1–10 minutes). The cache holds tarballs named as
# prebuild-install names its downloads, keyed by better-sqlite3's version, the Node ABI
# (`process.versions.modules`), platform and arch:
#   ${QL_NATIVE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ql-native}/better-sqlite3-v12.11.1-node-v137-linux-x64.tar.gz
# each holding build/Release/better_sqlite3.node.
#
#   scripts/native-cache.sh dir               # prints the cache folder
#   scripts/native-cache.sh rc                # writes .prebuild-installrc (git ignores it) here: the
#                                             # next `npm ci` takes this Node's build from the cache
#   scripts/native-cache.sh build <node-dir>  # prints the tarball for the Node in <node-dir> (bin/node,
#                                             # include/node: scripts/install-node.sh); builds it with
#                                             # node-gyp against those headers when the cache has none
#   scripts/native-cache.sh store             # keeps this checkout's build (the machine's Node, after
#                                             # `npm ci`) when the cache has none for its ABI
#
# `npm ci` takes a cached build through prebuild-install's local prebuilds: its `local-prebuilds`
# setting, read from .prebuild-installrc in the package's folder or above (rc). Not an environment
# variable: npm 11 warns on an unknown `npm_config_*` one, and sh drops `prebuild-install_local-prebuilds`
# (not a shell name) on its way to the install script. A cached build that does not load is refused
# by prebuild-install, which then compiles as before.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="${QL_NATIVE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ql-native}"
package="$root/node_modules/better-sqlite3"

# better-sqlite3's version as package-lock.json pins it (what `npm ci` installs; CI builds for the
# other Nodes while `npm ci` runs, before node_modules is there).
sqlite_version() {
  node -p 'require(process.argv[1]).packages["node_modules/better-sqlite3"].version' "$root/package-lock.json"
}

# The tarball's path for the node binary $1 (prebuild-install's name; glibc Linux has no libc suffix).
tarball_for() {
  "$1" -e '
    const [cache, version] = process.argv.slice(1);
    console.log(`${cache}/better-sqlite3-v${version}-node-v${process.versions.modules}-${process.platform}-${process.arch}.tar.gz`);
  ' "$cache" "$(sqlite_version)"
}

# True when the tarball $2 holds a better_sqlite3.node that node $1 loads (the ABI check
# prebuild-install makes too: a build for another ABI throws NODE_MODULE_VERSION).
loads() {
  local dir ok=1
  dir="$(mktemp -d "$cache/.check-XXXXXX")"
  if tar xzf "$2" -C "$dir" build/Release/better_sqlite3.node 2>/dev/null &&
    "$1" -e 'require(process.argv[1])' "$dir/build/Release/better_sqlite3.node" 2>/dev/null; then
    ok=0
  fi
  rm -rf "$dir"
  return $ok
}

# node-gyp as npm ships it (the one `npm ci` runs), or the one an npm script was given.
node_gyp() {
  if [ -n "${npm_config_node_gyp:-}" ] && [ -f "$npm_config_node_gyp" ]; then
    echo "$npm_config_node_gyp"
    return
  fi
  local npm_cli
  npm_cli="$(readlink -f "$(command -v npm)")"
  local gyp
  gyp="$(dirname "$npm_cli")/../node_modules/node-gyp/bin/node-gyp.js"
  [ -f "$gyp" ] || { echo "native-cache: node-gyp not found beside npm ($npm_cli)" >&2; exit 1; }
  echo "$gyp"
}

build() {
  local node_dir="${1:?usage: native-cache.sh build <node-dir>}"
  node_dir="$(cd "$node_dir" && pwd)"
  local node="$node_dir/bin/node"
  [ -d "$node_dir/include/node" ] || { echo "native-cache: $node_dir has no include/node (headers)" >&2; exit 1; }
  mkdir -p "$cache"
  local tarball
  tarball="$(tarball_for "$node")"
  # One build per key at a time (two CI runs on one machine): the second waits and finds it.
  exec 9>"$tarball.lock"
  if command -v flock >/dev/null 2>&1; then flock 9; fi
  if [ -f "$tarball" ] && loads "$node" "$tarball"; then
    echo "$tarball"
    return
  fi
  local work
  work="$(mktemp -d "$cache/.build-XXXXXX")"
  # shellcheck disable=SC2064
  trap "rm -rf '$work'" EXIT
  # The registry's package (npm's cache when it has it): the same sources `npm ci` builds.
  (cd "$work" && npm pack --silent "better-sqlite3@$(sqlite_version)" >/dev/null && tar xzf ./*.tgz && mv package better-sqlite3)
  rm -rf "$work/better-sqlite3/build"
  local started=$SECONDS
  echo "native-cache: building better-sqlite3 for Node $("$node" --version) (ABI $("$node" -p process.versions.modules)) against $node_dir/include …" >&2
  if ! (cd "$work/better-sqlite3" && PATH="$node_dir/bin:$PATH" "$node" "$(node_gyp)" rebuild --release \
    --nodedir="$node_dir" --jobs="${JOBS:-max}" >"$work/build.log" 2>&1); then
    tail -40 "$work/build.log" >&2
    echo "native-cache: node-gyp failed (log above)" >&2
    exit 1
  fi
  tar czf "$work/out.tar.gz" -C "$work/better-sqlite3" build/Release/better_sqlite3.node
  loads "$node" "$work/out.tar.gz" || { echo "native-cache: the new build does not load in $node" >&2; exit 1; }
  mv -f "$work/out.tar.gz" "$tarball"
  echo "native-cache: built in $((SECONDS - started)) s: $tarball" >&2
  echo "$tarball"
}

store() {
  local built="$package/build/Release/better_sqlite3.node"
  [ -f "$built" ] || { echo "native-cache: $built is missing (run npm ci first)" >&2; exit 1; }
  mkdir -p "$cache"
  local tarball
  tarball="$(tarball_for "$(command -v node)")"
  if [ -f "$tarball" ] && loads node "$tarball"; then
    echo "native-cache: cached already: $tarball" >&2
    return
  fi
  local work
  work="$(mktemp -d "$cache/.store-XXXXXX")"
  # shellcheck disable=SC2064
  trap "rm -rf '$work'" EXIT
  tar czf "$work/out.tar.gz" -C "$package" build/Release/better_sqlite3.node
  loads node "$work/out.tar.gz" || { echo "native-cache: $built does not load in $(node --version)" >&2; exit 1; }
  mv -f "$work/out.tar.gz" "$tarball"
  echo "native-cache: stored $tarball" >&2
}

case "${1:-}" in
  dir) echo "$cache" ;;
  rc) node -e 'console.log(JSON.stringify({ "local-prebuilds": process.argv[1] }))' "$cache" >"$root/.prebuild-installrc" ;;
  build) build "${2:-}" ;;
  store) store ;;
  *)
    echo "usage: native-cache.sh dir | rc | build <node-dir> | store" >&2
    exit 2
    ;;
esac
