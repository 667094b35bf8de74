#!/usr/bin/env bash
# What building the `local` feature (llama.cpp) and pulling a model need beyond
# Rust, installed from Debian's packages when missing: cmake, clang with
# libclang (for the C bindings) and python3 with pip.
set -euo pipefail

missing=()
command -v cmake >/dev/null || missing+=(cmake)
command -v clang >/dev/null || missing+=(clang)
compgen -G "/usr/lib/llvm-*/lib/libclang*.so*" >/dev/null || compgen -G "/usr/lib/*/libclang*.so*" >/dev/null || missing+=(libclang-dev)
command -v python3 >/dev/null || missing+=(python3)
python3 -m pip --version >/dev/null 2>&1 || missing+=(python3-pip)
if ((${#missing[@]})); then
    echo "installing ${missing[*]} with apt-get" >&2
    sudo_cmd=()
    [[ $(id -u) == 0 ]] || sudo_cmd=(sudo)
    "${sudo_cmd[@]}" apt-get update -qq
    "${sudo_cmd[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
fi
