-- The server's code lenses (each kernel's last measurement) in Neovim.
--
-- Neovim 0.11 shows lenses only for buffers that asked for them, and does not advertise
-- workspace/codeLens/refresh, so the server cannot say when they changed: ask again on
-- attach, on entering and saving the buffer, and when a DICE job ends.

local M = {}

---@param bufnr integer
function M.refresh(bufnr)
  if vim.api.nvim_buf_is_loaded(bufnr) then
    vim.lsp.codelens.refresh({ bufnr = bufnr })
  end
end

--- Every buffer the DICE client `client_id` is attached to.
---@param client_id integer
function M.refresh_client(client_id)
  local client = vim.lsp.get_client_by_id(client_id)
  if client ~= nil then
    for bufnr in pairs(client.attached_buffers) do
      M.refresh(bufnr)
    end
  end
end

--- LspAttach callback: start showing the lenses of a buffer the DICE client attached to.
---@param group integer the augroup the buffer's autocmds go in
function M.on_attach(ev, group)
  local client = vim.lsp.get_client_by_id(ev.data.client_id)
  if client == nil or client.name ~= "dice" then
    return
  end
  M.refresh(ev.buf)
  vim.api.nvim_create_autocmd({ "BufEnter", "InsertLeave", "BufWritePost" }, {
    group = group,
    buffer = ev.buf,
    callback = function()
      M.refresh(ev.buf)
    end,
  })
end

--- LspProgress "end" callback: a DICE job ended (a code action's, too), lenses may be new.
function M.on_progress_end(ev)
  local client = vim.lsp.get_client_by_id(ev.data.client_id)
  if client ~= nil and client.name == "dice" then
    M.refresh_client(client.id)
  end
end

return M
