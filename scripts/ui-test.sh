#!/usr/bin/env bash
# The web page's end-to-end tests: the built `agent` binary serves it, and
# Playwright (playwright-core 1.65.2, from npm, under target/npm) drives
# Debian's Chromium (no browser download). Installs Chromium with apt-get when
# it is missing. Screenshots land in target/ui-screenshots/.
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ ! -x /usr/bin/chromium ]]; then
    echo "the web page's tests need Chromium; installing Debian's package with apt-get" >&2
    apt-get update -qq && apt-get install -y -qq chromium
fi
if [[ ! -d target/npm/node_modules/playwright-core ]]; then
    npm install --prefix target/npm --no-audit --no-fund --silent playwright-core@1.65.2
fi
cargo build -q -p agent-cli
rm -rf target/ui-screenshots
NODE_PATH="$PWD/target/npm/node_modules" node --test --test-concurrency=1 agent-server/ui-tests/
