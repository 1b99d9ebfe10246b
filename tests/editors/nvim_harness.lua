-- Runs one test script (DICE_TEST_SCRIPT) inside the real Neovim and writes what it
-- observed as JSON to DICE_TEST_OUT; any Lua error is written there too, with its traceback.
-- The script sees a global `T` with the helpers below and must end with T.finish(result).

T = { notes = {} }

-- Keep every message the user would have seen (window/showMessage arrives through vim.notify).
local notify = vim.notify
vim.notify = function(msg, level, opts)
  table.insert(T.notes, msg)
  return notify(msg, level, opts)
end

function T.finish(result)
  result.notes = T.notes
  -- Everything echoed with history, window/showMessage included.
  result.messages = vim.api.nvim_exec2("messages", { output = true }).output
  vim.fn.writefile({ vim.json.encode(result) }, vim.env.DICE_TEST_OUT)
  vim.cmd("qa!")
end

function T.wait(what, ms, condition)
  if not vim.wait(ms, condition, 50) then
    error(string.format("timed out after %d ms waiting for %s", ms, what))
  end
end

--- Open `path`, wait for the dice client to attach and the server to say it is ready
--- (it has read its settings then: a request sent earlier could run with the defaults).
function T.open(path)
  vim.cmd.edit(path)
  T.wait("the dice client to attach", 30000, function()
    return #vim.lsp.get_clients({ bufnr = 0, name = "dice" }) > 0
  end)
  local client = vim.lsp.get_clients({ bufnr = 0, name = "dice" })[1]
  T.wait("dice/status saying ready", 60000, function()
    local status = require("dice.status").by_client[client.id]
    return status ~= nil and (status.message or ""):find("^ready") ~= nil
  end)
  return client
end

--- The buffer's diagnostics as plain tables (0-based lines and columns).
function T.diagnostics(bufnr)
  local out = {}
  for _, d in ipairs(vim.diagnostic.get(bufnr or 0)) do
    table.insert(out, { lnum = d.lnum, col = d.col, end_lnum = d.end_lnum, severity = d.severity, message = d.message })
  end
  return out
end

function T.lines(bufnr)
  return vim.api.nvim_buf_get_lines(bufnr or 0, 0, -1, false)
end

local ok, err = xpcall(function()
  dofile(vim.env.DICE_TEST_SCRIPT)
end, debug.traceback)
if not ok then
  T.finish({ error = err })
end
