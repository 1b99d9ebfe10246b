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
  vim.fn.writefile({ vim.json.encode(result) }, vim.env.DICE_TEST_OUT)
  vim.cmd("qa!")
end

function T.wait(what, ms, condition)
  if not vim.wait(ms, condition, 50) then
    error(string.format("timed out after %d ms waiting for %s", ms, what))
  end
end

--- Open `path`, wait for the dice client to attach and its first dice/status.
function T.open(path)
  vim.cmd.edit(path)
  T.wait("the dice client to attach", 30000, function()
    return #vim.lsp.get_clients({ bufnr = 0, name = "dice" }) > 0
  end)
  local client = vim.lsp.get_clients({ bufnr = 0, name = "dice" })[1]
  T.wait("the first dice/status", 30000, function()
    return require("dice.status").by_client[client.id] ~= nil
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
