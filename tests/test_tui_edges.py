"""The TUI at 80x24, read off the screen as the user sees it: commands wrap whole, help closes
without scrolling, toasts cover no dialog and no title, `c` says what it copied, a plan of
advice only offers no Apply. Textual's pilot drives the real app; what is asserted is what the
screen shows (rows of text, widgets' regions)."""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console
from textual.geometry import Region
from textual.widgets._toast import Toast

from conftest import REPO
from test_tui import BASE, nouveau_snapshot, wait_for
from troubleshoot.tui.app import TroubleshootApp
from troubleshoot.tui.datamd import MARK, CodeBlock, line_cuts
from troubleshoot.tui.screens import ConfirmScreen, ExportScreen, FixScreen, HelpScreen, copy_summary, plan_commands

SIZE = (80, 24)
FENCE = re.compile(r"```[^\n]*\n(.*?)```", re.S)


def mmcv_log(tmp_path) -> str:
    """A real undefined-symbol failure of mmcv's extension (tests/corpus/independent-c.yaml,
    ind-c-undefsym-5, from open-mmlab/mmdetection#3974): its commands name the long library path."""
    import yaml

    cases = yaml.safe_load((REPO / "tests" / "corpus" / "independent-c.yaml").read_text())
    log = tmp_path / "mmcv.log"
    log.write_text(next(c for c in cases if c["id"] == "ind-c-undefsym-5")["log"])
    return str(log)


def screen_rows(app) -> list[str]:
    """The screen as rows of text, as the terminal shows it (the frame export_screenshot draws)."""
    console = Console(width=app.size.width, height=app.size.height, file=io.StringIO(), record=True,
                      color_system=None, legacy_windows=False)
    console.print(app.screen._compositor.render_update(full=True))
    return console.export_text().splitlines()


def shown_lines(app, block: CodeBlock) -> list[str]:
    """The code lines a block shows on the screen, its wrapped rows put back together."""
    region = block.content_region
    rows = [row[region.x:region.right] for row in screen_rows(app)[region.y:region.bottom]]
    lines: list[str] = []
    for row in rows:
        if row.lstrip().startswith(MARK.strip()):  # a continuation: its mark, under the line's indent
            lines[-1] += row.lstrip()[len(MARK.strip()):]
        else:
            lines.append(row)
    return [squeeze(line) for line in lines]


def squeeze(text: str) -> str:
    """Text without its blanks: a space where a row breaks looks like the row's padding."""
    return "".join(text.split())


async def shown_whole(pilot, block: CodeBlock) -> list[str]:
    """Scroll the block into view (all of it), check no row runs past the screen, and read it."""
    block.scroll_visible(animate=False, top=True)
    await pilot.pause()  # no duration: until the scroll's messages are handled
    await wait_for(pilot, lambda: Region(0, 0, *SIZE).contains_region(block.content_region))
    return shown_lines(pilot.app, block)


async def open_detail(pilot, app) -> None:
    await wait_for(pilot, lambda: app.diagnoses and not app.progress.busy())
    await pilot.press("enter")
    await wait_for(pilot, lambda: app.diagnoses_pane.detail_only and app.query(CodeBlock))


async def open_fix(pilot, app) -> FixScreen:
    await wait_for(pilot, lambda: app.diagnoses and not app.progress.busy())
    await pilot.press("f")
    await wait_for(pilot, lambda: isinstance(app.screen, FixScreen) and app.screen.built
                   and app.screen.query_one("#buttons").region)
    return app.screen


# ------------------------------------------------------------------ 1. commands wrap, whole


@pytest.mark.asyncio
async def test_the_detail_shows_every_command_whole_at_80x24(tmp_path):
    app = TroubleshootApp(log=mmcv_log(tmp_path), snapshot=str(BASE), probe=False)
    async with app.run_test(size=SIZE) as pilot:
        await open_detail(pilot, app)
        explain = app.diagnosis_views[0].explain
        wanted = [line for block in FENCE.findall(explain) for line in block.splitlines()]
        assert any(line.startswith("ldd /home/yy18dlz/opt/anaconda3/") and len(line) > 80 for line in wanted)
        shown = []
        for block in app.query("#diag-explain CodeBlock"):
            shown += await shown_whole(pilot, block)
        assert shown == [squeeze(line) for line in wanted]


@pytest.mark.asyncio
async def test_the_fix_preview_shows_every_command_whole_and_a_selection_copies_it(tmp_path):
    app = TroubleshootApp(log=mmcv_log(tmp_path), snapshot=str(BASE), probe=False)
    async with app.run_test(size=SIZE) as pilot:
        fix = await open_fix(pilot, app)
        lines = [line for c in plan_commands(fix.prepared, True) for line in c.splitlines()]
        wanted = [line for line in lines if "_ext.cpython-37m" in line]
        assert wanted and all(len(c) > 80 for c in wanted)
        blocks = list(fix.query(".fix-advice CodeBlock"))
        shown = []
        for block in blocks:
            shown += await shown_whole(pilot, block)
        for command in wanted:
            assert squeeze(command) in shown
        # A mouse selection over the wrapped rows copies the lines as written: no ↪, no breaks.
        block = next(b for b in blocks if "_ext.cpython-37m" in b.code.plain)
        assert await selected(pilot, block) == block.code.plain.rstrip("\n")


async def selected(pilot, block: CodeBlock) -> str:
    """What a mouse drag from the block's first character to its last selects."""
    await shown_whole(pilot, block)
    end = (block.region.width - 1, block.region.height - 1)
    await pilot.mouse_down(block, offset=(1, 0))  # the block's padding is one column
    await pilot.hover(block, offset=end)
    await pilot.mouse_up(block, offset=end)
    await wait_for(pilot, lambda: pilot.app.screen.get_selected_text())
    return pilot.app.screen.get_selected_text()


@pytest.mark.asyncio
async def test_indented_code_continues_under_its_indent_and_copies_as_written():
    app = TroubleshootApp(log=str(REPO / "examples" / "logs" / "cuda-oom.log"), snapshot=str(BASE), probe=False)
    async with app.run_test(size=SIZE) as pilot:
        fix = await open_fix(pilot, app)
        block = next(b for b in fix.query(".fix-advice CodeBlock") if "torch.autocast" in b.code.plain)
        line = next(ln for ln in block.code.plain.splitlines() if "torch.autocast" in ln)
        assert len(line) > block.content_region.width  # it must wrap
        indent = len(line) - len(line.lstrip())
        await shown_whole(pilot, block)
        rows = [r[block.content_region.x:block.content_region.right] for r in screen_rows(app)]
        autocast = next(i for i, r in enumerate(rows) if "torch.autocast" in r)
        assert rows[autocast + 1].startswith(" " * indent + MARK)
        assert await selected(pilot, block) == block.code.plain.rstrip("\n")


def test_line_cuts_keep_every_character_and_prefer_spaces_and_slashes():
    from rich.cells import cell_len

    line = "ldd /opt/conda/envs/train/lib/python3.10/site-packages/mmcv/_ext.cpython-310-x86_64-linux-gnu.so | grep cuda"
    cuts = line_cuts(line, 40)
    rows = [line[a:b] for a, b in zip([0, *cuts], [*cuts, len(line)])]
    assert "".join(rows) == line
    assert len(rows[0]) <= 40 and all(len(r) <= 40 - len(MARK) for r in rows[1:])
    assert rows[:2] == ["ldd /opt/conda/envs/train/lib/", "python3.10/site-packages/mmcv/"]
    assert line_cuts("x" * 100, 40) == [40, 76]  # no space or slash: cut at the edge
    wide = "日本語" * 20  # two cells a character
    assert all(cell_len(wide[a:b]) <= 40 for a, b in zip([0, *line_cuts(wide, 40)], [*line_cuts(wide, 40), None]))


# ------------------------------------------------------------------ 2. help closes without scrolling


@pytest.mark.asyncio
async def test_help_close_button_is_on_screen_without_scrolling():
    app = TroubleshootApp(probe=False)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen) and app.screen.query_one("#close").region)
        body, close = app.screen.query_one("#help-body"), app.screen.query_one("#close")
        assert body.max_scroll_y > 0 and body.scroll_y == 0  # longer than the screen, not scrolled
        assert close.region and Region(0, 0, *SIZE).contains_region(close.region)
        assert "Close (esc)" in screen_rows(app)[close.region.y]
        await pilot.click("#close")
        await wait_for(pilot, lambda: not isinstance(app.screen, HelpScreen))


# ------------------------------------------------------------------ 3. toasts cover nothing that matters


def toasts(screen) -> list[Region]:
    """The regions of the toasts drawn on this screen."""
    return [t.region for t in screen.query(Toast) if t.region]


@pytest.mark.asyncio
async def test_a_toast_covers_neither_the_detail_title_nor_the_list(tmp_path):
    app = TroubleshootApp(log=mmcv_log(tmp_path), snapshot=str(BASE), probe=False)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await wait_for(pilot, lambda: app.diagnoses and not app.progress.busy())
        for keys in ((), ("enter",)):  # the list with the detail below it, then the detail full size
            await pilot.press(*keys, "R")  # R: "Reloading rules…"
            await wait_for(pilot, lambda: toasts(app.screen))
            covered = toasts(app.screen)
            for name in ("#status", "Tabs", "#diag-head", "#keys", *(() if keys else ("#diag-table",))):
                widget = app.query_one(name)
                assert not any(t.overlaps(widget.region) for t in covered), name
            await wait_for(pilot, lambda: not app.progress.busy())


@pytest.mark.asyncio
async def test_a_dialog_shows_no_toast_and_what_came_meanwhile_follows_it(tmp_path):
    app = TroubleshootApp(log=mmcv_log(tmp_path), snapshot=str(BASE), probe=False)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await wait_for(pilot, lambda: app.diagnoses and not app.progress.busy())
        await pilot.press("R")  # a toast is up when the dialog opens
        await wait_for(pilot, lambda: toasts(app.screen))
        await pilot.press("e")
        await wait_for(pilot, lambda: isinstance(app.screen, ExportScreen))
        app.ctx.warn("snapshot: the io probe's facts are missing")  # as the context tells a warning
        await wait_for(pilot, lambda: app.notices.held)  # held for later, not shown
        assert not toasts(app.screen)
        assert "io probe" not in "\n".join(screen_rows(app))
        await pilot.press("escape")
        await wait_for(pilot, lambda: any("io probe" in str(t.render()) for t in app.screen.query(Toast)))


# ------------------------------------------------------------------ 4. `c` says what is on the clipboard


@pytest.mark.asyncio
async def test_copy_says_how_many_lines_and_commands_the_clipboard_holds(tmp_path):
    app = TroubleshootApp(log=mmcv_log(tmp_path), snapshot=str(BASE), probe=False)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        fix = await open_fix(pilot, app)
        await pilot.press("c")
        await wait_for(pilot, lambda: "Copied" in str(fix.query_one("#fix-why").render()))
        said = " ".join(str(fix.query_one("#fix-why").render()).split())
        pasted = app.clipboard.splitlines()
        comments = [line for line in pasted if line.lstrip().startswith("#")]
        commands = [line for line in pasted if line.strip() and line not in comments]
        assert len(commands) > 2  # the advice's commands, each counted, not its code blocks
        assert f"Copied {len(pasted)} lines ({len(commands)} commands, {len(comments)} comments)" in said
        assert "(s)" not in said and not toasts(app.screen)  # said in the dialog, not over it
        assert "Copied" in " ".join(" ".join(screen_rows(app)).split())  # on screen, not cut off


def test_copy_summary_counts_a_continued_command_once_and_speaks_singulars():
    assert copy_summary("# for x\nnvidia-smi\n") == "2 lines (1 command, 1 comment)"
    assert copy_summary("pip install \\\n  --no-build-isolation apex\nls\n") == "3 lines (2 commands)"


# ------------------------------------------------------------------ 5. advice only: no Apply


@pytest.mark.asyncio
async def test_an_advice_only_plan_offers_no_apply_and_a_says_why(tmp_path):
    app = TroubleshootApp(log=mmcv_log(tmp_path), snapshot=str(BASE), probe=False)
    async with app.run_test(size=SIZE) as pilot:
        fix = await open_fix(pilot, app)
        assert not fix.query_one("#apply").display
        rows = "\n".join(screen_rows(app))
        assert "Apply (a)" not in rows and "Copy commands (c)" in rows and "Advice only" in rows
        await pilot.press("a")
        await wait_for(pilot, lambda: "nothing to apply" in str(fix.query_one("#fix-why").render()))
        assert "advice only" in str(fix.query_one("#fix-why").render())
        assert app.screen is fix  # nothing asked, nothing applied


@pytest.mark.asyncio
async def test_a_plan_that_changes_a_file_offers_apply(tmp_path):
    log = tmp_path / "install.log"
    log.write_text("ERROR: The Nouveau kernel driver is currently in use by your system.  This driver is "
                   "incompatible with the NVIDIA driver, and must be disabled before proceeding.\n")
    app = TroubleshootApp(log=str(log), snapshot=nouveau_snapshot(tmp_path), root=str(tmp_path / "root"), probe=False)
    async with app.run_test(size=SIZE) as pilot:
        fix = await open_fix(pilot, app)
        apply = fix.query_one("#apply")
        assert apply.display and not apply.disabled
        assert "Apply (a)" in screen_rows(app)[apply.region.y]
        await pilot.press("a")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        assert "Apply the fix plan under" in str(app.screen.query_one("#question").render())


@pytest.mark.asyncio
async def test_an_empty_log_is_said_to_be_empty_as_the_cli_says_it(tmp_path):
    log = tmp_path / "train.log"
    log.write_bytes(b"")
    app = TroubleshootApp(log=str(log), snapshot=str(BASE), probe=False)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await wait_for(pilot, lambda: app.scanned is not None and not app.progress.busy())
        await wait_for(pilot, lambda: any("is empty" in str(n.message) for n in app._notifications))
        said = [str(n.message) for n in app._notifications if "is empty" in str(n.message)]
        assert said == [f"{log} is empty: there was nothing in it to diagnose"]
