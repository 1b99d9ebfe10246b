-- :DiceFill, :DiceOptimize, :DiceProfile: build the server command's arguments from the
-- editor ({uri, range} or {uri, position}), run it, and report its answer.

local M = {}

---@param bufnr integer
---@return vim.lsp.Client|nil
local function dice_client(bufnr)
  local client = vim.lsp.get_clients({ bufnr = bufnr, name = "dice" })[1]
  if client == nil then
    vim.notify("DICE: no dice-lsp client in this buffer (:checkhealth dice says why)", vim.log.levels.ERROR)
  end
  return client
end

--- The LSP range of a command's line range; when that range is the last visual selection,
--- its columns too (charwise), else whole lines.
---@param bufnr integer
---@param line1 integer 1-based
---@param line2 integer 1-based
---@param encoding string the client's position encoding
---@return lsp.Range
function M.selection_range(bufnr, line1, line2, encoding)
  local first = vim.api.nvim_buf_get_mark(bufnr, "<")
  local last = vim.api.nvim_buf_get_mark(bufnr, ">")
  if vim.fn.visualmode() == "v" and first[1] == line1 and last[1] == line2 then
    return vim.lsp.util.make_given_range_params(first, last, bufnr, encoding).range
  end
  local last_line = vim.api.nvim_buf_get_lines(bufnr, line2 - 1, line2, true)[1]
  return {
    start = { line = line1 - 1, character = 0 },
    ["end"] = { line = line2 - 1, character = vim.str_utfindex(last_line, encoding) },
  }
end

--- After a fill/optimize that applied nothing, offer its candidates.
---@param client vim.lsp.Client
---@param bufnr integer
---@param answer table the command's answer (dice_lsp.core.outcome.Outcome.to_json plus "applied")
local function offer_candidates(client, bufnr, answer)
  vim.ui.select(answer.candidates, {
    prompt = "DICE: no candidate was applied; apply one anyway?",
    format_item = function(c)
      return c.title
    end,
  }, function(choice)
    if choice ~= nil then
      client:exec_cmd({
        title = choice.title,
        command = "dice.applyCandidate",
        arguments = { { uri = vim.uri_from_bufnr(bufnr), job = answer.job, index = choice.index } },
      }, { bufnr = bufnr })
    end
  end)
end

--- What to do with a command's answer. The server shows a message for every end but
--- success (an applied candidate, a profile verdict), so those are the ones said here.
---@param client vim.lsp.Client
---@param bufnr integer
---@param command string
---@param answer table
---@param opts {pick_candidates: boolean, codelens: boolean}
local function follow_up(client, bufnr, command, answer, opts)
  if answer.error or answer.cancelled then
    return
  end
  if command == "dice.profile" then
    if type(answer.status) == "string" and type(answer.message) == "string" then
      local kernel = type(answer.kernel) == "string" and (answer.kernel .. ": ") or ""
      vim.notify("DICE: " .. kernel .. answer.message, vim.log.levels.INFO)
    end
  elseif answer.applied then
    vim.notify("DICE: " .. answer.message, vim.log.levels.INFO)
  elseif opts.pick_candidates and answer.job ~= nil and #(answer.candidates or {}) > 0 then
    offer_candidates(client, bufnr, answer)
  end
end

---@param client vim.lsp.Client
---@param bufnr integer
---@param command string
---@param args table
---@param opts {pick_candidates: boolean, codelens: boolean}
local function run(client, bufnr, command, args, opts)
  client:exec_cmd({ title = command, command = command, arguments = { args } }, { bufnr = bufnr }, function(err, answer)
    if opts.codelens then
      require("dice.lenses").refresh(bufnr) -- a new measurement shows in the kernel's lens
    end
    if err ~= nil then
      vim.notify(string.format("DICE: %s failed: %s", command, err.message), vim.log.levels.ERROR)
    elseif type(answer) == "table" then
      follow_up(client, bufnr, command, answer, opts)
    end
  end)
end

---@param opts {pick_candidates: boolean, codelens: boolean}
function M.fill(cmd, opts)
  local bufnr = vim.api.nvim_get_current_buf()
  local client = dice_client(bufnr)
  if client == nil then
    return
  end
  if cmd.range == 0 then
    vim.notify("DICE: select the code to fill, then :'<,'>DiceFill", vim.log.levels.WARN)
    return
  end
  local range = M.selection_range(bufnr, cmd.line1, cmd.line2, client.offset_encoding)
  run(client, bufnr, "dice.fill", { uri = vim.uri_from_bufnr(bufnr), range = range }, opts)
end

--- A position command (optimize, profile) at the cursor.
---@param command string
---@param opts {pick_candidates: boolean, codelens: boolean}
function M.at_cursor(command, opts)
  local bufnr = vim.api.nvim_get_current_buf()
  local client = dice_client(bufnr)
  if client == nil then
    return
  end
  local params = vim.lsp.util.make_position_params(0, client.offset_encoding)
  run(client, bufnr, command, { uri = params.textDocument.uri, position = params.position }, opts)
end

return M
