-- :checkhealth dice: Neovim version, the server command, the running server's model, GPU and sandbox.

local M = {}

local function check_neovim()
  if vim.fn.has("nvim-0.11") == 1 then
    vim.health.ok("Neovim " .. tostring(vim.version()))
  else
    vim.health.error("Neovim 0.11+ is needed (vim.lsp.config / vim.lsp.enable)")
  end
end

---@return string[]|nil
local function server_cmd()
  local config = vim.lsp.config.dice
  local cmd = config and config.cmd
  if type(cmd) == "table" then
    return cmd
  end
  return nil
end

-- The checkout this plugin was loaded from (editors/nvim/lua/dice/health.lua is four levels
-- below its root): dice-lsp is not on PyPI, so the server is installed from there.
local function checkout_root()
  local here = debug.getinfo(1, "S").source:gsub("^@", "")
  return vim.fn.fnamemodify(here, ":p:h:h:h:h:h")
end

-- What to run: the README's install command in the checkout, then the server it installs
-- (already installed there: only the setup() line).
---@return string[]
local function install_advice()
  local root = checkout_root()
  local venv_server = root .. "/.venv/bin/dice-lsp"
  local setup_line = string.format("require('dice').setup({ cmd = { '%s' } })", venv_server)
  if vim.fn.executable(venv_server) == 1 then
    return { "dice-lsp is installed in the checkout's .venv: " .. setup_line }
  end
  return {
    string.format(
      "install it from the checkout: cd %s && python3 -m venv .venv && . .venv/bin/activate && pip install torch==2.13.0 -e .",
      vim.fn.shellescape(root)
    ),
    "then " .. setup_line,
  }
end

local function check_server_command()
  local cmd = server_cmd()
  if cmd == nil then
    vim.health.error("no `dice` LSP config: put editors/nvim on 'runtimepath' and call require('dice').setup()")
    return
  end
  local exe = vim.fn.exepath(cmd[1])
  if exe == "" then
    vim.health.error(string.format("server command not found: %s", table.concat(cmd, " ")), install_advice())
  else
    vim.health.ok(string.format("server command: %s (%s)", table.concat(cmd, " "), exe))
  end
end

local function check_running_server()
  local status, client = require("dice.status").current(nil)
  if client == nil then
    vim.health.info("no dice-lsp running: open a .cu or KernelBench .py file to start it")
    return
  end
  vim.health.ok(string.format("dice-lsp running (client %d, root %s)", client.id, client.root_dir or "none"))
  if status == nil then
    vim.health.warn("the server has not sent dice/status yet")
    return
  end
  if status.model then
    vim.health.ok("model: " .. status.model)
  else
    vim.health.info("model: not loaded yet (it loads on the first fill or optimize)")
  end
  if status.gpu then
    vim.health.ok("GPU: " .. status.gpu)
  else
    vim.health.warn("GPU: none found; candidates are compiled but not checked or timed")
  end
  if status.sandbox then
    local isolated = status.sandbox:sub(1, 10) == "namespaces"
    local report = isolated and vim.health.ok or vim.health.warn
    report("candidates run in: " .. status.sandbox)
  end
  if status.message then
    vim.health.info("status: " .. status.message .. (status.busy and " (busy)" or ""))
  end
end

function M.check()
  vim.health.start("dice")
  check_neovim()
  check_server_command()
  check_running_server()
end

return M
