-- dice-lsp for Neovim 0.11+: `vim.lsp.enable("dice")` with this folder on 'runtimepath'.
--
-- Override any field with vim.lsp.config("dice", { ... }), e.g. the command of a virtualenv:
--   vim.lsp.config("dice", { cmd = { "/path/to/venv/bin/dice-lsp" } })
-- and the server's settings (answered to workspace/configuration):
--   vim.lsp.config("dice", { settings = { dice = { model = "/models/DICE-1.7B", candidates = 8 } } })

---@type vim.lsp.Config
return {
  cmd = { "dice-lsp" },
  -- .cu/.cuh are "cuda"; KernelBench problems are Python files.
  filetypes = { "cuda", "python" },
  root_markers = { "pyproject.toml", "setup.py", ".git" },
  -- No `settings` here: an empty Lua table would reach the server as a JSON list; without
  -- one, workspace/configuration answers null and the server keeps its defaults.
  handlers = {
    -- The server's own notification: model, GPU, busy. Kept for the statusline and :checkhealth.
    ["dice/status"] = function(_, result, ctx)
      require("dice.status").update(ctx.client_id, result)
    end,
  },
}
