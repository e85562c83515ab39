#!/usr/bin/env bash
# Installs what is missing, builds, and trains the default example.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
exec build/trainer demo "$@"
