#!/usr/bin/env bash
# Installs what the web console's browser tests drive: Debian's Chromium (playwright-core, an npm
# devDependency, drives it; no browser is ever downloaded by npm). Run as root; .ci/run calls it.
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then
  echo "install-browser: chromium is installed ($(chromium --version 2>/dev/null || echo unknown version))"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "install-browser: chromium is missing; run as root: apt-get install -y chromium" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq || true
apt-get install -y -qq chromium
echo "install-browser: installed $(chromium --version)"
