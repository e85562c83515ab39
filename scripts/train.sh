#!/usr/bin/env bash
# Installs what is missing, builds, and trains the default config (the Fashion-MNIST CNN).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
exec build/trainer run configs/fmnist_cnn.toml "$@"
