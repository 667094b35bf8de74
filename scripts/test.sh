#!/usr/bin/env bash
# The whole test suite. Installs what the tests need that cargo does not fetch —
# Node.js's MCP reference server, @modelcontextprotocol/server-everything 2026.8.31,
# under target/npm — then runs every test of every crate with every feature.
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

cargo test --workspace --all-features "$@"
