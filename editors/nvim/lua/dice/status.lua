-- What the DICE server last said about itself (dice/status) and its work-done progress,
-- for the statusline, the echo area and :checkhealth dice.

local M = {}

---@class dice.Status
---@field model string|nil
---@field gpu string|nil
---@field busy boolean
---@field message string|nil

---@type table<integer, dice.Status> by client id
M.by_client = {}

---@type table<integer, string> the last progress line of each client
M.progress = {}

---@param client_id integer
---@param status dice.Status
function M.update(client_id, status)
  M.by_client[client_id] = status
  vim.api.nvim_exec_autocmds("User", { pattern = "DiceStatus", modeline = false, data = { client_id = client_id, status = status } })
  vim.cmd.redrawstatus({ bang = true })
end

--- The status of the DICE client attached to `bufnr` (or of any DICE client).
---@param bufnr integer|nil
---@return dice.Status|nil, vim.lsp.Client|nil
function M.current(bufnr)
  local clients = vim.lsp.get_clients({ bufnr = bufnr, name = "dice" })
  if #clients == 0 and bufnr ~= nil then
    clients = vim.lsp.get_clients({ name = "dice" })
  end
  local client = clients[1]
  return client and M.by_client[client.id], client
end

--- One line for humans: "DICE builtin · NVIDIA H200 · busy: decoding".
---@param status dice.Status|nil
---@return string
function M.format(status)
  if status == nil then
    return "DICE: no status yet"
  end
  local parts = { "DICE " .. (status.model or "no model"), status.gpu or "no GPU" }
  if status.busy then
    table.insert(parts, "busy")
  end
  if status.message and status.message ~= "" then
    table.insert(parts, status.message)
  end
  return table.concat(parts, " · ")
end

--- A statusline component: `set statusline+=%{v:lua.require'dice.status'.statusline()}`.
function M.statusline()
  local status, client = M.current(vim.api.nvim_get_current_buf())
  if client == nil then
    return ""
  end
  return M.progress[client.id] or M.format(status)
end

--- One line for a progress notification: "DICE: filling the selection: judging 3/4 (75%)".
---@param value table the WorkDoneProgress value
---@param title string|nil the title of its "begin"
---@return string
function M.progress_line(value, title)
  local line = title or value.title or "DICE"
  if value.message and value.message ~= "" then
    line = line .. ": " .. value.message
  end
  if value.percentage then
    line = string.format("%s (%d%%)", line, value.percentage)
  end
  return line
end

local titles = {} ---@type table<string, string> begin titles by progress token

--- LspProgress autocmd callback: echo DICE's progress, clear it when the work ends.
function M.on_progress(ev)
  local client = vim.lsp.get_client_by_id(ev.data.client_id)
  if client == nil or client.name ~= "dice" then
    return
  end
  local params = ev.data.params
  local value = params.value
  local key = tostring(params.token)
  if value.kind == "begin" then
    titles[key] = value.title
  end
  local line = M.progress_line(value, titles[key])
  if value.kind == "end" then
    titles[key] = nil
    M.progress[client.id] = nil
  else
    M.progress[client.id] = line
  end
  vim.api.nvim_echo({ { line } }, false, {})
  vim.cmd.redrawstatus({ bang = true })
end

return M
