#!/usr/bin/env bash
# Installs the Debian packages trainer needs that are missing (run as root, or with sudo).
#   scripts/deps.sh --sanitize: also clang, its sanitizer and libFuzzer runtimes and libomp (the
#   sanitizer build, scripts/build.sh --sanitize)
set -euo pipefail

PACKAGES=(
  cmake ninja-build g++ ccache pkg-config clang-format
  catch2 libcli11-dev libfmt-dev libspdlog-dev nlohmann-json3-dev libtomlplusplus-dev
  zlib1g-dev libdeflate-dev libcsv-dev libpng-dev libturbojpeg0-dev libopenblas-openmp-dev libdnnl-dev libmuparser-dev libgloo-dev libboost-context-dev libboost-dev libpcre2-dev
  dataset-fashion-mnist fortunes
)
if [[ ${1:-} == --sanitize ]]; then
  PACKAGES+=(clang lld libclang-rt-dev libomp-dev)
fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "installing missing packages: ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "error: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
  SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
