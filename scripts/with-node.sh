#!/usr/bin/env bash
# Runs a command under another Node of the test matrix (ADR 0063), in a copy of this checkout whose
# better-sqlite3 is built for that Node; this checkout and its node_modules stay as they are (the
# machine's Node keeps working here, also while the copy runs).
#   scripts/with-node.sh 24 npm test            # npm run test:node24
#   scripts/with-node.sh 22 npm run test:core   # npm run test:node22
#
# 1. That Node from the npm registry (test/support/node-matrix.json; scripts/install-node.sh).
# 2. better-sqlite3 for its ABI from the cache outside the clone, built once (scripts/native-cache.sh).
# 3. A copy in a temporary folder: the files a fresh clone has (git-tracked and new unignored ones;
#    `git init` there, for the tests that list them), dist/ if built, node_modules hard-linked (seconds,
#    no space) with better-sqlite3's build/ replaced — unlinked and written anew, so the hard-linked
#    original is never written through — and .cache/node (the other Nodes) hard-linked too.
# 4. The command there with that Node first on PATH (npm, npx, jest and every child process the
#    tests start run on it), hard-linked beside the copy where any user can run it (a task run as
#    another user runs on the worker's node). Its test-results/ come back to test-results/node<major>/ here.
# QL_KEEP_NODE_COPY=1 keeps the copy (its path is printed).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
major="${1:?usage: with-node.sh <22|24> <command...>}"
shift
[ "$#" -gt 0 ] || { echo "usage: with-node.sh <22|24> <command...>" >&2; exit 2; }
version="$(node -p "require('$root/test/support/node-matrix.json')['$major'] ?? ''")"
[ -n "$version" ] || { echo "with-node: no Node $major in test/support/node-matrix.json" >&2; exit 2; }

node_dir="$("$root/scripts/install-node.sh" "$version")"
tarball="$("$root/scripts/native-cache.sh" build "$node_dir")"

installed="$(node -p "require('$root/node_modules/better-sqlite3/package.json').version")"
case "$(basename "$tarball")" in
  "better-sqlite3-v$installed-"*) ;;
  *)
    echo "with-node: node_modules has better-sqlite3 $installed, package-lock.json pins another: npm ci" >&2
    exit 1
    ;;
esac

parent="$(mktemp -d "${TMPDIR:-/tmp}/ql-node$major-XXXXXX")"
copy="$parent/checkout/$(basename "$root")"
cleanup() {
  if [ "${QL_KEEP_NODE_COPY:-}" = 1 ]; then
    echo "with-node: the copy is kept in $copy" >&2
  else
    rm -rf "$parent"
  fi
}
trap cleanup EXIT
link() { cp -al "$1" "$2" 2>/dev/null || cp -a "$1" "$2"; }
# That Node where every user can run it (the folder above it 0755), the copy private (0700) as a
# clone in a `mktemp -d` is: a worker with QL_WORKER_RUN_AS starts its node tasks as that user with
# its own node (process.execPath; test/e2e/worker-run-as.e2e-spec.ts runs them as nobody).
chmod 0755 "$parent"
link "$node_dir" "$parent/node"
node_bin="$parent/node/bin"
mkdir -m 0700 "$parent/checkout"
mkdir -p "$copy"

# The files a fresh clone has: tracked (unless deleted here) and new ones git does not ignore.
(cd "$root" && git ls-files -z --cached --others --exclude-standard) |
  (cd "$root" && while IFS= read -r -d '' file; do
    if [ -e "$file" ] || [ -L "$file" ]; then printf '%s\0' "$file"; fi
  done) |
  (cd "$root" && xargs -0 -r cp -a --parents -t "$copy")
git -C "$copy" init -q
[ ! -d "$root/dist" ] || cp -a "$root/dist" "$copy/dist"
link "$root/node_modules" "$copy/node_modules"
if [ -d "$root/.cache/node" ]; then
  mkdir -p "$copy/.cache"
  link "$root/.cache/node" "$copy/.cache/node"
fi
rm -rf "$copy/node_modules/better-sqlite3/build"
tar xzf "$tarball" -C "$copy/node_modules/better-sqlite3"

echo "with-node: Node $("$node_bin/node" --version) (ABI $("$node_bin/node" -p process.versions.modules)) in $copy: $*" >&2
status=0
(cd "$copy" && PATH="$node_bin:$PATH" "$@") || status=$?
if [ -d "$copy/test-results" ]; then
  rm -rf "$root/test-results/node$major"
  mkdir -p "$root/test-results"
  cp -a "$copy/test-results" "$root/test-results/node$major"
fi
exit "$status"
