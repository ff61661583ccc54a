#!/usr/bin/env bash
# Installs the Debian packages fsdpc builds against, and only those missing.
# Idempotent: a machine that already has everything runs no apt-get at all.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config
  nlohmann-json3-dev catch2 libcli11-dev
  libdnnl-dev libopenmpi-dev openmpi-bin libmimalloc-dev
  llvm-15-dev mlir-15-tools libssl-dev
  clang libclang-rt-14-dev
  libpcre2-dev libsentencepiece-dev libutf8proc-dev
  patchelf
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  exit 0
fi

echo "install-deps: installing ${missing[*]}" >&2
sudo_cmd=()
if [[ $(id -u) -ne 0 ]]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
