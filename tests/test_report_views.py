"""One view model each for a diagnosis, a rule and an applied fix (report.views), and every front
end rendering the same view: the text and Markdown reports, the JSON document, `rules show`,
`history` and the TUI's panes. What is shown, how a missing value is worded and how data is
quoted is decided once, in the view."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest
from rich.text import Text

from conftest import REPO, run_cli
from troubleshoot import pipeline
from troubleshoot.engine.ruleset import load_ruleset
from troubleshoot.model import Fix
from troubleshoot.report import jsonfmt, markdown, text
from troubleshoot.report.historyview import history_view
from troubleshoot.report.ruleview import rule_view
from troubleshoot.report.views import diagnosis_view
from troubleshoot.tui.diagnoses import detail_head, evidence_text, fixes_text
from troubleshoot.tui.views import history_row, rule_detail

CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")

PLACEHOLDER_RULE = r"""
rules:
- id: team-stall
  symptom: io-stall
  title: "Stalled [bold]reads[/bold] \e]0;t\a"
  severity: warning
  match:
    log: ['STALL (?P<val>\S+)(?: ON (?P<what>\S+))?']
  explain: |
    Stalled at {val} on {what}; driver {nvml.no_such_fact}. Code keeps its braces:
    `torch.device(f"cuda:{local_rank}")`.
  fixes:
    - fixer: advice
      title: "Look at {what}"
      params: {text: "Run `ls {what}` first.", mount: "{val}"}
  examples:
    match: ['STALL 3 ON /x']
    no_match: ['fine']
"""


def diagnose(rules_dir, rule: str, log: str, facts: dict | None = None):
    ruleset = load_ruleset([str(rules_dir({"team.yaml": rule}))], use_config=False)
    return [d for d in pipeline.run(None, ruleset=ruleset, log_text=log, facts=facts).diagnoses
            if d.rule.id.startswith("team-")]


def tui_text(v) -> str:
    return "\n".join(t.plain for t in (detail_head(v), evidence_text(v), fixes_text(v)))


def test_every_renderer_shows_the_views_words(rules_dir):
    [d] = diagnose(rules_dir, PLACEHOLDER_RULE, "STALL 3\x07\n")
    v = diagnosis_view(d)
    assert v.title == "Stalled [bold]reads[/bold] \\x1b]0;t\\x07"
    shown = {"text": text.render([d]), "markdown": markdown.render([d]), "tui": tui_text(v)}
    for name, out in shown.items():
        assert not CONTROL.search(out.replace("\n", "")), name
    # The optional group that did not take part is worded as missing, and so is the fact; code
    # that only looks like a placeholder keeps its braces.
    for name in ("text", "markdown"):
        out = shown[name].replace("\\\\", "\\")
        assert "Stalled at 3\\x07 on [what: not in the log]; driver [nvml.no_such_fact: not in the facts]" in out, name
        assert 'cuda:{local_rank}' in out, name
    assert "Stalled [bold]reads[/bold] \\x1b]0;t\\x07" in shown["text"] and "Stalled [bold]reads[/bold]" in shown["tui"]
    assert "• Look at [what: not in the log]  (advice)" in shown["tui"]
    assert "Run ls [what: not in the log] first." in shown["text"]
    # JSON words them as every report does (a script shows its text to people too); the values
    # as found are its `captures`.
    doc = json.loads(jsonfmt.render([d]))["diagnoses"][0]
    assert doc == dict(v.record) and "on [what: not in the log];" in doc["explain"]
    assert doc["fixes"][0]["title"] == "Look at [what: not in the log]" and doc["captures"] == {"val": "3\x07"}


def test_a_captured_value_that_spells_a_placeholder_is_shown_as_read(rules_dir):
    [d] = diagnose(rules_dir, PLACEHOLDER_RULE, "STALL {val} ON {what}\n")
    assert "Stalled at {val} on {what};" in text.render([d])
    assert "• Look at {what}  (advice)" in tui_text(diagnosis_view(d))


def test_a_captured_value_with_dotted_braces_is_shown_as_read(rules_dir):
    # `{cfg.lr}` names no placeholder of the rule: it is the log's text, not a missing fact.
    [d] = diagnose(rules_dir, PLACEHOLDER_RULE, "STALL {cfg.lr}\n")
    out = text.render([d])
    assert "Stalled at {cfg.lr} on [what: not in the log]" in out.replace("\\", "")
    assert "cfg.lr: not in the facts" not in out + tui_text(diagnosis_view(d))


def test_evidence_is_cut_at_the_match_before_it_is_quoted(rules_dir):
    [d] = diagnose(rules_dir, PLACEHOLDER_RULE, "\x07bell STALL 7 ON /mnt tail\n")
    [e] = diagnosis_view(d).evidence
    assert (e.before, e.match, e.after) == ("\\x07bell ", "STALL 7 ON /mnt", " tail")
    styled = evidence_text(diagnosis_view(d))
    assert [styled.plain[s.start:s.end] for s in styled.spans if s.style == "bold reverse"] == ["STALL 7 ON /mnt"]
    assert "\x1b[1;4mSTALL 7 ON /mnt\x1b[0m tail" in text.render([d], colour=True, rich=False)


def test_notes_params_and_advice_read_the_same_in_text_and_markdown(rules_dir):
    [d] = diagnose(rules_dir, PLACEHOLDER_RULE, "STALL 3 ON /x\n")
    d = replace(d, notes=("seen in job_*_rank*.log and *two* others",),
                fixes=(Fix("advice", "Tune it", {"workers": 4, "pin": True, "text": "    Indented\n      advice\n"}),))
    plain, md = text.render([d]), markdown.render([d])
    # A note is data: never read as Markdown.
    assert "note: seen in job_*_rank*.log and *two* others" in plain
    assert "> seen in job\\_\\*\\_rank\\*.log and \\*two\\* others" in md
    # A value that is not text reads as in a rule file (JSON), as `rules show` writes it.
    assert "- Tune it  (advice workers=4 pin=true)" in plain
    assert "- Tune it (`advice`; `workers=4`, `pin=true`)" in md
    # Advice is dedented the same way for both.
    assert "       Indented\n         advice" in plain and "  Indented\n    advice" in md


def test_pasted_state_is_named_as_the_machine_its_facts_describe():
    log = (REPO / "tests" / "fixtures" / "pasted" / "lsmod-nouveau.txt").read_text()
    d = next(d for d in pipeline.run(None, log_text=log).diagnoses if d.rule.id == "nouveau-loaded-facts")
    assert [(f.path, f.machine) for f in diagnosis_view(d).facts] == [
        ("kernel.modules.nouveau", "the log")]
    facts_only = pipeline.run(None, facts={"kernel": {"modules": {"nouveau": True}}}).diagnoses
    assert all(f.machine == "this machine" for x in facts_only for f in diagnosis_view(x).facts)


RULE_WITH_CONTEXT_LINES = r"""
rules:
- id: team-gated
  symptom: io-stall
  title: "Gated \e[2J stall"
  severity: info
  match:
    log: ['GATED']
    with_log: ['OPENED']
    without_log: ['CLOSED']
  explain: "Waits on {what}."
  fixes:
    - fixer: advice
      params: {text: "line one\nline two", count: 3}
  examples:
    match: ["GATED\nOPENED"]
    no_match: ['gated']
"""


def test_rules_show_and_the_tui_show_the_same_rule(rules_dir):
    d = rules_dir({"team.yaml": RULE_WITH_CONTEXT_LINES})
    rule = next(r for r in load_ruleset([str(d)], use_config=False).rules if r.id == "team-gated")
    v = rule_view(rule)
    shown = run_cli("rules", "show", "team-gated", "--rules", str(d)).stdout.decode()
    tui = rule_detail(v).plain
    for label, source in (("log", "GATED"), ("with_log", "OPENED"), ("without_log", "CLOSED")):
        assert f"  {label}: {source}\n" in shown and f"\n{label}: {source}" in tui
    assert "  title:      Gated \\x1b[2J stall\n" in shown and tui.startswith("Gated \\x1b[2J stall\n")
    # The rule as written: its placeholders are what the rule says.
    assert "  Waits on {what}." in shown
    assert "      text: |\n        line one\n        line two\n      count: 3\n" in shown
    assert "example (must match):\n  GATED\n  OPENED" in tui


def _entry(eid: str, **data) -> None:
    from troubleshoot.fixes import journal

    folder = journal.state_dir() / eid
    (folder / "backups").mkdir(parents=True)
    folder.chmod(0o700)
    journal.Entry(folder, {"schema": journal.SCHEMA, "id": eid, "fixer": "set-env", "params": {},
                           "started": "2026-11-29T12:00:00+00:00", "status": "applied", "steps": [], **data}).save()


def test_history_reads_the_same_in_the_cli_and_the_tui(capsys):
    from troubleshoot import cli
    from troubleshoot.fixes import journal

    _entry("20261129-120000-set-env-0a1b", root="/srv/images/node-07", title="Set \x1b]0;x\x07 [b]A")
    _entry("20261129-120001-set-env-0a1c", started="2026-11-29T12:00:01+00:00", status="undone",
           steps=[{"index": 1, "kind": "env", "title": "export A", "status": "done"}])
    assert cli.main(["history"]) == 0
    out = capsys.readouterr().out.splitlines()
    # No title: the fixer names it, in the CLI as in the TUI.
    assert re.fullmatch(r"20261129-120001-set-env-0a1c +undone +set-env", out[0])
    assert re.fullmatch(r"20261129-120000-set-env-0a1b +applied +Set \\x1b\]0;x\\x07 \[b\]A under /srv/images/node-07",
                        out[1])
    views = [history_view(eid, e) for eid, e in journal.entries()]
    assert [(v.status, v.undoable, len(v.steps)) for v in views] == [("undone", False, 1), ("applied", True, 0)]
    rows = [[c.plain for c in history_row(v, 120)] for v in views]
    assert rows[0][2:] == ["/ (this machine)", "set-env"]
    assert rows[1][2:] == ["/srv/images/node-07", "Set \\x1b]0;x\\x07 [b]A"]
    assert all(isinstance(c, Text) for c in history_row(views[0], 120))
    assert cli.main(["history", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["history"][0] == dict(views[0].record) and doc["history"][0]["title"] is None


def test_a_corrupt_journal_is_listed_with_why():
    from troubleshoot.fixes import journal

    folder = journal.state_dir() / "20261129-120003-broken"
    folder.mkdir(parents=True, mode=0o700)
    (folder / "journal.json").write_text("{nope")
    (folder / "journal.json").chmod(0o600)
    [(eid, entry)] = journal.entries()
    v = history_view(eid, entry)
    assert (v.status, v.undoable) == ("corrupt", False) and "is corrupt" in v.title
    assert v.record == {"id": eid, "status": "corrupt", "error": entry}


@pytest.mark.parametrize("args", [("--format", "json"), ("--format", "markdown"), ()])
def test_the_cli_renders_the_views(args):
    """The documented JSON keys, in their order; the reports run through the same views."""
    p = run_cli("diagnose", "--no-probe", "--log", str(REPO / "examples" / "logs" / "cuda-oom.log"), *args)
    assert p.returncode == 0, p.stderr
    if args[1:] == ("json",):
        first = json.loads(p.stdout)["diagnoses"][0]
        assert list(first) == ["rule", "symptom", "title", "severity", "confidence", "action", "xid", "catalog",
                               "count", "first_line", "last_line", "evidence", "captures", "explain", "fixes", "references",
                               "notes", "origin", "ranks", "nodes", "files", "first_seen"]
    else:
        assert b"torch-cuda-oom" in p.stdout and b"{" not in p.stdout.split(b"evidence", 1)[0]
