-- DICE for Neovim: enables the dice-lsp client and adds :DiceFill, :DiceOptimize,
-- :DiceProfile, progress in the echo area and `:checkhealth dice`.
--
--   require("dice").setup({
--     cmd = { "/path/to/venv/bin/dice-lsp" },   -- default: dice-lsp on PATH
--     -- or tcp = "127.0.0.1:2087",             -- a running `dice-lsp --tcp`; its token is read
--                                               -- from where it writes it (token_file = ... else)
--     settings = { model = "builtin", candidates = 4 },  -- the server's "dice" settings
--   })

local M = {}

---@class dice.Options
---@field cmd string[]|nil the server command (default: lsp/dice.lua's { "dice-lsp" })
---@field settings table|nil the "dice" settings section sent to the server
---@field enable boolean|nil start the client on CUDA/Python buffers (default true)
---@field progress boolean|nil echo the server's progress (default true)
---@field pick_candidates boolean|nil offer the candidates when none was applied (default true)
---@field codelens boolean|nil show the server's code lenses (each kernel's last measurement; default true)
---@field tcp string|nil connect to a running `dice-lsp --tcp` ("HOST:PORT") instead of starting one
---@field token_file string|nil where that listener wrote its token (default: where dice-lsp --tcp writes it)

---@type dice.Options
M.options = { enable = true, progress = true, pick_candidates = true, codelens = true }

local group = vim.api.nvim_create_augroup("dice", { clear = true })

--- Where `dice-lsp --tcp --port PORT` writes its token unless told otherwise (--token-file).
---@param port integer
---@return string
function M.default_token_file(port)
  local base = vim.env.XDG_RUNTIME_DIR or vim.env.XDG_CACHE_HOME or vim.fs.joinpath(vim.env.HOME, ".cache")
  return vim.fs.joinpath(base, "dice-lsp", "tcp", ("%d.token"):format(port))
end

--- The client config that connects to a `dice-lsp --tcp` listener: its address, and the token
--- every listener wants in initializationOptions, read from the file only its user can read.
---@param address string "HOST:PORT" or "PORT"
---@param token_file string|nil
---@return table|nil config, string|nil error
function M.tcp_config(address, token_file)
  local host, port = address:match("^%[?([^%]]-)%]?:(%d+)$")
  if not host then
    host, port = "127.0.0.1", address:match("^(%d+)$")
  end
  port = tonumber(port)
  if not port or port < 1 or port > 65535 then
    return nil, ("dice: tcp = %q: expected HOST:PORT (e.g. 127.0.0.1:2087)"):format(address)
  end
  local file = token_file and vim.fs.normalize(token_file) or M.default_token_file(port)
  local ok, lines = pcall(vim.fn.readfile, file)
  local token = ok and vim.trim(table.concat(lines, "\n")) or ""
  if token == "" then
    return nil, ("dice: no token in %s: start `dice-lsp --tcp` first, or set token_file to its --token-file"):format(file)
  end
  return { cmd = vim.lsp.rpc.connect(host, port), init_options = { token = token } }
end

---@param opts dice.Options|nil
function M.setup(opts)
  M.options = vim.tbl_extend("force", M.options, opts or {})
  local config = {}
  if M.options.cmd then
    config.cmd = M.options.cmd
  end
  if M.options.tcp then
    local tcp, err = M.tcp_config(M.options.tcp, M.options.token_file)
    if not tcp then
      vim.notify(err, vim.log.levels.ERROR)
      return
    end
    config = vim.tbl_extend("force", config, tcp)
  end
  if M.options.settings and next(M.options.settings) ~= nil then
    config.settings = { dice = M.options.settings }
  end
  vim.lsp.config("dice", config)
  if M.options.enable then
    vim.lsp.enable("dice")
  end

  vim.api.nvim_clear_autocmds({ group = group })
  if M.options.progress then
    vim.api.nvim_create_autocmd("LspProgress", {
      group = group,
      pattern = { "begin", "report", "end" },
      callback = require("dice.status").on_progress,
    })
  end

  if M.options.codelens then
    local lenses = require("dice.lenses")
    vim.api.nvim_create_autocmd("LspAttach", {
      group = group,
      callback = function(ev)
        lenses.on_attach(ev, group)
      end,
    })
    vim.api.nvim_create_autocmd("LspProgress", { group = group, pattern = "end", callback = lenses.on_progress_end })
  end

  local commands = require("dice.commands")
  vim.api.nvim_create_user_command("DiceFill", function(cmd)
    commands.fill(cmd, M.options)
  end, { range = true, desc = "DICE: fill the selection with the model's best verified candidate" })
  vim.api.nvim_create_user_command("DiceOptimize", function()
    commands.at_cursor("dice.optimize", M.options)
  end, { desc = "DICE: optimize the kernel under the cursor" })
  vim.api.nvim_create_user_command("DiceProfile", function()
    commands.at_cursor("dice.profile", M.options)
  end, { desc = "DICE: compile, check and time the kernel under the cursor" })
end

return M
