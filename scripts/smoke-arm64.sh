#!/usr/bin/env bash
# `npm run smoke:arm64`: the worker on arm64 under emulation (issue 30 item 6, ADR 0059). Installs
# Debian's qemu-user-static and the arm64 C libraries (root; already there: nothing), registers qemu
# for arm64 binaries with the kernel (binfmt_misc, so the node tasks the worker spawns run emulated
# too), installs the registry's arm64 Node 24 (scripts/install-node.sh), builds the worker's bundle
# and runs test/arm64/*.smoke-spec.ts against a control plane on this host. About a minute.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
NODE_ARM64_VERSION="$(node -p "require('./test/support/node-matrix.json')['24']")"

if ! command -v qemu-aarch64-static >/dev/null 2>&1 || [ ! -e /usr/aarch64-linux-gnu/lib/ld-linux-aarch64.so.1 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "smoke-arm64: run as root once: apt-get install -y qemu-user-static libc6-arm64-cross libstdc++6-arm64-cross" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq || true
  apt-get install -y -qq qemu-user-static libc6-arm64-cross libstdc++6-arm64-cross >/dev/null
fi
binfmt=/proc/sys/fs/binfmt_misc
if [ ! -e "$binfmt/qemu-aarch64" ]; then
  [ -e "$binfmt/register" ] || mount -t binfmt_misc binfmt_misc "$binfmt"
  cat /usr/lib/binfmt.d/qemu-aarch64.conf >"$binfmt/register"
fi
node_dir="$(scripts/install-node.sh "$NODE_ARM64_VERSION" arm64)"
node scripts/ensure-built.js
QL_ARM64_NODE="$node_dir/bin/node" QL_ARM64_LD_PREFIX=/usr/aarch64-linux-gnu QL_TEST_WORKER_ENTRY=bundle \
  npx jest --testMatch '**/test/arm64/*.smoke-spec.ts' "$@"
