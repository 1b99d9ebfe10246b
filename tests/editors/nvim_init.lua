-- init.lua of the Neovim the tests drive: the plugin from this checkout, set up from JSON.
vim.opt.runtimepath:prepend(vim.env.DICE_REPO .. "/editors/nvim")
vim.opt.swapfile = false
require("dice").setup(vim.json.decode(vim.env.DICE_NVIM_SETUP))
