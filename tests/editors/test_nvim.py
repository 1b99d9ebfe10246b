"""The Neovim client end to end: real headless Neovim 0.11, the plugin in editors/nvim, the
real dice-lsp server as its subprocess."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

# A kernel that does not compile: line 4 names an undefined identifier.
BAD_KERNEL = (Path(__file__).parent / "fixtures" / "bad.cu").read_text()

ERROR = 1  # vim.diagnostic.severity.ERROR


def lua_string(value: str) -> str:
    """A Lua string literal (JSON's escapes are valid Lua)."""
    return json.dumps(value)


def test_client_attaches_and_compile_errors_become_diagnostics(nvim):
    source = nvim.workdir / "bad.cu"
    source.write_text(BAD_KERNEL)
    result = nvim.run(
        f"""
        local client = T.open({lua_string(str(source))})
        T.wait("compiler diagnostics", 60000, function() return #vim.diagnostic.get(0) > 0 end)
        T.finish({{
          filetype = vim.bo.filetype,
          server = client.name,
          commands = {{ fill = vim.fn.exists(":DiceFill"), optimize = vim.fn.exists(":DiceOptimize"),
                        profile = vim.fn.exists(":DiceProfile") }},
          server_commands = client.server_capabilities.executeCommandProvider.commands,
          status = require("dice.status").by_client[client.id],
          diagnostics = T.diagnostics(),
        }})
        """
    )
    assert result["filetype"] == "cuda"
    assert result["commands"] == {"fill": 2, "optimize": 2, "profile": 2}  # 2: a full user command
    assert {"dice.fill", "dice.optimize", "dice.profile", "dice.applyCandidate"} <= set(result["server_commands"])
    assert result["status"]["busy"] is False
    [error] = [d for d in result["diagnostics"] if "undefined_name" in d["message"]]
    assert (error["lnum"], error["severity"]) == (3, ERROR)
    assert BAD_KERNEL.splitlines()[3][error["col"] :].startswith("undefined_name")
    # Settings left at their defaults: the server must not complain about them.
    assert not [n for n in result["notes"] if "settings" in n], result["notes"]


def test_checkhealth_reports_server_model_and_gpu(nvim):
    source = nvim.workdir / "bad.cu"
    source.write_text(BAD_KERNEL)
    result = nvim.run(
        f"""
        T.open({lua_string(str(source))})
        vim.cmd("checkhealth dice")
        T.finish({{ lines = T.lines() }})
        """
    )
    report = "\n".join(result["lines"])
    assert "- ✅ OK Neovim 0.1" in report
    assert "- ✅ OK server command: " in report and "dice_lsp.server" in report
    assert "- ✅ OK dice-lsp running" in report
    assert "model: " in report
    assert "GPU: " in report


def test_checkhealth_names_a_missing_server(nvim, repo_root: Path, tmp_path: Path):
    missing = "/nonexistent/bin/dice-lsp"
    # A checkout of the plugin alone (the real one may hold the .venv the README's install made).
    checkout = tmp_path / "checkout"
    shutil.copytree(repo_root / "editors" / "nvim", checkout / "editors" / "nvim")
    script = """
        vim.cmd("checkhealth dice")
        T.finish({ lines = T.lines() })
        """
    report = "\n".join(nvim.run(script, setup={"cmd": [missing]}, checkout=checkout)["lines"])
    assert f"ERROR server command not found: {missing}" in report
    # dice-lsp is not on PyPI: the advice is the README's install command, run in the checkout
    # the plugin was loaded from, and the setup() line naming the server that command installs.
    install = "python3 -m venv .venv && . .venv/bin/activate && pip install torch==2.13.0 -e ."
    readme_install = (repo_root / "README.md").read_text().split("```sh\n", 1)[1].split("```")[0].splitlines()
    assert install == " && ".join(readme_install[:-1])  # its last line runs the fill
    assert f"install it from the checkout: cd '{checkout}' && {install}" in report
    setup_line = f"require('dice').setup({{ cmd = {{ '{checkout}/.venv/bin/dice-lsp' }} }})"
    assert f"then {setup_line}" in report
    assert "pip install dice-lsp" not in report
    assert "no dice-lsp running" in report

    # Once that install has made the checkout's .venv, the advice is only the setup() line.
    server = checkout / ".venv" / "bin" / "dice-lsp"
    server.parent.mkdir(parents=True)
    server.write_text("#!/bin/sh\n")
    server.chmod(0o755)
    report = "\n".join(nvim.run(script, setup={"cmd": [missing]}, checkout=checkout)["lines"])
    assert f"dice-lsp is installed in the checkout's .venv: {setup_line}" in report
    assert "install it from the checkout" not in report


def test_dice_profile_at_cursor_reports_the_verdict(nvim, repo_root: Path):
    source = nvim.workdir / "saxpy.cu"
    source.write_text((repo_root / "examples" / "saxpy.cu").read_text())
    result = nvim.run(
        f"""
        T.open({lua_string(str(source))})
        vim.api.nvim_win_set_cursor(0, {{ 10, 4 }})  -- inside saxpy's body
        vim.cmd("DiceProfile")
        T.wait("the profile verdict", 120000, function()
          return vim.iter(T.notes):any(function(n) return n:find("^DICE: saxpy: ") ~= nil end)
        end)
        local lens_titles = function()
          return vim.iter(vim.lsp.codelens.get(0)):map(function(l) return l.command and l.command.title end):totable()
        end
        T.wait("saxpy's lens to show the measurement", 30000, function()
          return #lens_titles() > 0 and lens_titles()[1] ~= "Profile this kernel"
        end)
        T.finish({{ diagnostics = T.diagnostics(), lenses = lens_titles() }})
        """
    )
    [line] = [n for n in result["notes"] if n.startswith("DICE: saxpy: ")]
    # Neovim 0.11 cannot be told to refresh lenses: the plugin asks again when the job ends.
    # Its title: the verdict's message, or where the kernel was timed (a GPU), its time.
    [lens] = result["lenses"]
    assert lens == line.removeprefix("DICE: saxpy: ") or " ms" in lens
    # The verdict is shown on the kernel's name, with the same message.
    [on_name] = [d for d in result["diagnostics"] if d["lnum"] == 7 and "saxpy" in d["message"]]
    assert line.removeprefix("DICE: saxpy: ") in on_name["message"]


def fill_settings(checkpoint: Path) -> dict:
    """Two short candidates from the tiny model: a whole fill in seconds on a CPU."""
    return {"settings": {"model": str(checkpoint), "candidates": 2, "maxTokens": 8, "temperature": 0.7}}


# saxpy.cu line 12 (1-based) is `        y[i] = a * x[i] + y[i];`; the fill replaces its statement.
FILL_LINE, FILL_START, FILL_END = 12, 8, 31  # 0-based byte columns, end exclusive


def test_fill_code_action_then_apply_a_candidate(nvim, repo_root: Path, tiny_checkpoint: Path):
    source = nvim.workdir / "saxpy.cu"
    source.write_text((repo_root / "examples" / "saxpy.cu").read_text())
    result = nvim.run(
        f"""
        T.open({lua_string(str(source))})
        local before = T.lines()
        -- The selection as a range (what visual mode hands code_action), the fill action applied.
        vim.lsp.buf.code_action({{
          filter = function(a) return a.title == "Fill selection with DICE" end,
          apply = true,
          range = {{ start = {{ {FILL_LINE}, {FILL_START} }}, ["end"] = {{ {FILL_LINE}, {FILL_END - 1} }} }},
        }})
        local function candidate_diagnostics()
          return vim.iter(T.diagnostics()):filter(function(d) return d.message:find("^DICE candidate") end):totable()
        end
        T.wait("the candidates' diagnostics", 180000, function() return #candidate_diagnostics() == 2 end)
        local after_fill = T.lines()
        local judged = candidate_diagnostics()
        -- Now the range offers each candidate; apply the first as the user would.
        vim.lsp.buf.code_action({{
          filter = function(a) return a.title:find("^Apply candidate 1: ") ~= nil end,
          apply = true,
          range = {{ start = {{ {FILL_LINE}, {FILL_START} }}, ["end"] = {{ {FILL_LINE}, {FILL_START} }} }},
        }})
        T.wait("candidate 1 in the buffer", 30000, function() return not vim.deep_equal(T.lines(), before) end)
        T.wait("the applied candidate's diagnostic", 30000, function()
          return vim.iter(T.diagnostics()):any(function(d) return d.message:find("^DICE candidate 1 %(applied%)") ~= nil end)
        end)
        T.finish({{ before = before, after_fill = after_fill, judged = judged, after_apply = T.lines(),
                    diagnostics = T.diagnostics() }})
        """,
        setup=fill_settings(tiny_checkpoint),
    )
    before, after = result["before"], result["after_apply"]
    # Without a GPU nothing is proven faster, so the fill itself applies nothing ...
    if "not timed: no GPU" in result["messages"]:
        assert result["after_fill"] == before
    # ... and says, on the selected line, what became of each candidate.
    assert all(d["lnum"] == FILL_LINE - 1 for d in result["judged"])
    # Applying candidate 1 replaced exactly the selected span.
    line = before[FILL_LINE - 1]
    new_text = "\n".join(after)
    assert new_text.startswith("\n".join(before[: FILL_LINE - 1]) + "\n" + line[:FILL_START])
    assert new_text.endswith(line[FILL_END:] + "\n" + "\n".join(before[FILL_LINE:]))
    assert after != before
    applied = [d for d in result["diagnostics"] if d["message"].startswith("DICE candidate 1 (applied)")]
    assert applied, result["diagnostics"]


def test_dice_optimize_then_dice_fill_on_a_visual_selection(nvim, repo_root: Path, tiny_checkpoint: Path):
    source = nvim.workdir / "saxpy.cu"
    source.write_text((repo_root / "examples" / "saxpy.cu").read_text())
    result = nvim.run(
        f"""
        T.open({lua_string(str(source))})
        local before = T.lines()
        -- The user's answers in the candidate lists: Escape for the optimize, the first for the fill.
        local offered = {{}}
        vim.ui.select = function(items, opts, on_choice)
          table.insert(offered, {{ prompt = opts.prompt, titles = vim.iter(items):map(opts.format_item):totable() }})
          if #offered == 1 then on_choice(nil, nil) else on_choice(items[1], 1) end
        end
        vim.api.nvim_win_set_cursor(0, {{ 10, 4 }})  -- inside saxpy
        vim.cmd("DiceOptimize")
        T.wait("the optimize candidates", 180000, function() return #offered == 1 end)
        local after_optimize = T.lines()
        vim.api.nvim_win_set_cursor(0, {{ {FILL_LINE}, {FILL_START} }})
        vim.cmd("normal! v{FILL_END - FILL_START - 1}l")
        vim.cmd("normal! \\27")  -- leave visual mode: '< and '> now mark the selection
        vim.cmd("'<,'>DiceFill")
        T.wait("the fill candidates", 180000, function() return #offered == 2 end)
        T.wait("the buffer to change", 30000, function() return not vim.deep_equal(T.lines(), before) end)
        T.finish({{ before = before, after_optimize = after_optimize, after = T.lines(), offered = offered }})
        """,
        setup=fill_settings(tiny_checkpoint),
    )
    before, after = result["before"], result["after"]
    # A random model's kernels do not compile: nothing applied, both jobs offer their 2 candidates.
    optimize, fill = result["offered"]
    for offer in (optimize, fill):
        assert len(offer["titles"]) == 2
        assert all(t.startswith(f"Apply candidate {i}: ") for i, t in enumerate(offer["titles"], 1))
    assert result["after_optimize"] == before  # Escape kept the kernel
    # The fill's candidate 1 replaced exactly the selected span.
    line = before[FILL_LINE - 1]
    new_text = "\n".join(after)
    assert new_text.startswith("\n".join(before[: FILL_LINE - 1]) + "\n" + line[:FILL_START])
    assert new_text.endswith(line[FILL_END:] + "\n" + "\n".join(before[FILL_LINE:]))
    assert after != before


def test_selection_range_in_lsp_positions(nvim):
    """:DiceFill's range: a characterwise selection keeps its columns (in the client's
    encoding, end exclusive); a line range takes whole lines. No server needed."""
    result = nvim.run(
        """
        vim.api.nvim_buf_set_lines(0, 0, -1, false, { "  αβ = x + 1;", "  y = 2;" })
        local commands = require("dice.commands")
        -- Select "β = x" (β is 2 bytes in UTF-8, 1 code unit in UTF-16).
        vim.api.nvim_win_set_cursor(0, { 1, 4 })
        vim.cmd("normal! v4l")
        vim.cmd("normal! \\27")
        local charwise = {
          ["utf-16"] = commands.selection_range(0, 1, 1, "utf-16"),
          ["utf-8"] = commands.selection_range(0, 1, 1, "utf-8"),
        }
        vim.cmd("normal! ggVj")
        vim.cmd("normal! \\27")
        T.finish({ charwise = charwise, linewise = commands.selection_range(0, 1, 2, "utf-16") })
        """,
        setup={"enable": False},
    )
    assert result["charwise"]["utf-16"] == {"start": {"line": 0, "character": 3}, "end": {"line": 0, "character": 8}}
    assert result["charwise"]["utf-8"] == {"start": {"line": 0, "character": 4}, "end": {"line": 0, "character": 10}}
    assert result["linewise"] == {"start": {"line": 0, "character": 0}, "end": {"line": 1, "character": 8}}


@pytest.mark.gpu
def test_on_a_gpu_checkhealth_names_it_and_the_lens_shows_the_time(nvim, repo_root: Path):
    source = nvim.workdir / "saxpy.cu"
    source.write_text((repo_root / "examples" / "saxpy.cu").read_text())
    result = nvim.run(
        f"""
        T.open({lua_string(str(source))})
        vim.api.nvim_win_set_cursor(0, {{ 10, 4 }})
        vim.cmd("DiceProfile")
        T.wait("the profile verdict", 300000, function()
          return vim.iter(T.notes):any(function(n) return n:find("^DICE: saxpy: ") ~= nil end)
        end)
        local function lens()
          local l = vim.lsp.codelens.get(0)[1]
          return l and l.command and l.command.title or ""
        end
        T.wait("a timed lens", 30000, function() return lens():find(" ms") ~= nil end)
        local timed = lens()  -- before :checkhealth, whose buffer becomes the current one
        vim.cmd("checkhealth dice")
        T.finish({{ lens = timed, health = T.lines() }})
        """
    )
    print("lens:", result["lens"])
    print("\n".join(result["health"]))
    assert "OK GPU: " in "\n".join(result["health"])
    assert " on " in result["lens"]  # "0.412 ms, ... on NVIDIA H200"
