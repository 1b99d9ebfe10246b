-- DICE for Neovim: enables the dice-lsp client and adds :DiceFill, :DiceOptimize,
-- :DiceProfile, progress in the echo area and `:checkhealth dice`.
--
--   require("dice").setup({
--     cmd = { "/path/to/venv/bin/dice-lsp" },   -- default: dice-lsp on PATH
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

---@type dice.Options
M.options = { enable = true, progress = true, pick_candidates = true, codelens = true }

local group = vim.api.nvim_create_augroup("dice", { clear = true })

---@param opts dice.Options|nil
function M.setup(opts)
  M.options = vim.tbl_extend("force", M.options, opts or {})
  local config = {}
  if M.options.cmd then
    config.cmd = M.options.cmd
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
