#!/usr/bin/env bash
# Installs another Node.js for the test matrix from the npm registry (no download from nodejs.org):
# the registry's node-linux-<arch>@<version> package holds bin/node and include/node (the headers
# node-gyp builds native modules against). Unpacked under .cache/node/<arch>-<version>/ (ignored by
# git); idempotent. Prints the folder that holds bin/ and include/.
#   scripts/install-node.sh 24.22.3          # x64
#   scripts/install-node.sh 24.22.3 arm64    # runs under qemu-user-static (scripts/smoke-arm64.sh)
set -euo pipefail
version="${1:?usage: install-node.sh <version> [x64|arm64]}"
arch="${2:-x64}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="$root/.cache/node/$arch-$version"
if [ -x "$dir/bin/node" ]; then
  echo "$dir"
  exit 0
fi
mkdir -p "$(dirname "$dir")"
# Unpacked beside its place and renamed into it (atomic on one file system): two installs at once
# (two test files) never see half a folder; the second rename fails and the first one's is kept.
work="$(mktemp -d "$(dirname "$dir")/.unpacking-XXXXXX")"
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "node-linux-$arch@$version" >/dev/null && tar xzf ./*.tgz)
mv -T "$work/package" "$dir" 2>/dev/null || [ -x "$dir/bin/node" ]
echo "$dir"
