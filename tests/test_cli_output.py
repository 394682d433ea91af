"""What the CLI prints: Markdown for a terminal or plain, data that stays data, readable rule
views, --fail-on, consistent defaults, one-line errors for bad paths and bad rule files."""

import json
import re

import pytest

from conftest import REPO, run_cli, run_main
from troubleshoot.scan import re2_available

OOM_LOG = REPO / "examples" / "logs" / "cuda-oom.log"

HOSTILE_RULE = r"""
rules:
- id: team-hostile
  symptom: io-stall
  title: "[bold]not bold[/bold] at [/dev/shm] and [link=http://x]y[/link]"
  severity: warning
  match:
    log: ['HOSTILE (?P<what>.*)$']
  explain: |
    **Bold** words, `code`, [red]not red[/red], kill <pid> and the captured text: {what}
  fixes:
    - fixer: advice
      title: "[blink]advice[/blink]"
      params: {text: "Run `df -h /dev/shm` and read **Avail**."}
  examples:
    match: ["HOSTILE x"]
    no_match: ["hostile x"]
"""
# The scanner drops well-formed ANSI sequences; what it keeps (a bell, ESC c, a C1 CSI) must be
# shown as visible escapes, not sent to the terminal.
HOSTILE_LOG = b"HOSTILE \x07bell \x1bc reset \xc2\x9b31m c1 [/dev/shm] [bold]x\x1b[0m\n"


def only_sgr(text: str) -> bool:
    """Every ESC in `text` starts a colour/style sequence (ours), none a title, clear or link."""
    return all(re.match(r"\x1b\[[0-9;]*m", text[m.start():]) for m in re.finditer("\x1b", text)) and "\x07" not in text


def test_piped_text_is_plain_and_terminal_text_is_rendered():
    plain = run_cli("diagnose", "--no-probe", "--log", str(OOM_LOG)).stdout.decode()
    assert "expandable_segments" in plain
    explain = plain.split("evidence:", 1)[1]
    assert "**" not in explain and "`" not in explain and "\x1b" not in plain
    rich = run_cli("diagnose", "--no-probe", "--log", str(OOM_LOG), "--color", "always").stdout.decode()
    assert "**" not in rich and "`" not in rich.split("evidence:", 1)[1]
    assert "\x1b[1m2.00 GiB" in rich  # **{requested}** rendered bold by Rich
    assert only_sgr(rich)


@pytest.mark.parametrize("colour", ["never", "always"])
def test_rule_and_log_text_never_becomes_markup_or_escapes(rules_dir, colour):
    d = rules_dir({"hostile.yaml": HOSTILE_RULE})
    p = run_cli("diagnose", "--no-probe", "--rules", str(d), "--color", colour, input=HOSTILE_LOG)
    out = p.stdout.decode()
    assert p.returncode == 0, p.stderr
    plain = re.sub(r"\x1b\[[0-9;]*m", "", out)
    assert "[bold]not bold[/bold] at [/dev/shm] and [link=http://x]y[/link]" in plain
    assert "[red]not red[/red], kill <pid> and" in plain and "[blink]advice[/blink]" in plain
    # BEL and C1 shown, not obeyed; `ESC c` (a terminal reset) removed with the colour codes
    assert "\\x07bell  reset \\x9b31m c1 [/dev/shm] [bold]x" in plain
    assert only_sgr(out)
    assert "df -h /dev/shm" in plain and "Avail" in plain and "**Avail**" not in plain


def test_fix_preview_prints_advice_as_plain_text_without_escapes():
    # The advice's text reaches the preview from a rule (and its captures from a log): its
    # Markdown marks are dropped and an OSC 52 clipboard write is shown, not obeyed.
    advice = "Run `nvidia-smi` **now** \x1b]52;c;aGk=\x07 then\n```bash\necho hi\n```"
    p = run_cli("fix", "advice", "--param", f"text={advice}")
    out = p.stdout.decode()
    assert p.returncode == 0, p.stderr
    assert "Run nvidia-smi now \\x1b]52;c;aGk=\\x07 then" in out
    assert "\n       echo hi\n" in out  # a code block, indented under the step, fences dropped
    assert "\x1b" not in out and "\x07" not in out and "`" not in out and "**" not in out


def test_rules_show_and_why_read_well(rules_dir):
    show = run_main("rules", "show", "torch-cuda-oom-fragmentation").stdout.decode()
    assert "{'" not in show and "      name: PYTORCH_CUDA_ALLOC_CONF" in show
    assert "  - set-env: Use expandable segments" in show
    d = rules_dir({"hostile.yaml": HOSTILE_RULE})
    why = run_main("rules", "why", "team-hostile", "--rules", str(d), "--log", "-", input=HOSTILE_LOG).stdout.decode()
    assert re.match(r"rule team-hostile \(.*\): fired\n", why) and "FIRED" not in why
    assert "\x1b" not in why and "\x07" not in why and "\\x07bell  reset" in why
    miss = run_main("rules", "why", "team-hostile", "--rules", str(d), "--log", "-", input=b"nothing\n").stdout.decode()
    assert re.match(r"rule team-hostile \(.*\): did not fire: ", miss)


def test_fail_on_severity(rules_dir):
    from types import SimpleNamespace

    from troubleshoot.cli_diagnose import fail_on as _fail_on

    warning = [SimpleNamespace(severity="warning")]
    assert [_fail_on(t, warning) for t in (None, "error", "warning", "info")] == [0, 0, 1, 1]
    assert _fail_on("error", [SimpleNamespace(severity="info"), SimpleNamespace(severity="error")]) == 1
    assert _fail_on("info", []) == 0
    d = rules_dir({"hostile.yaml": HOSTILE_RULE})  # a warning, through the real command
    for threshold, code in (("error", 0), ("warning", 1)):
        p = run_main("diagnose", "--no-probe", "--format", "json", "--rules", str(d), "--fail-on", threshold,
                    input=b"HOSTILE x\n")
        assert p.returncode == code and json.loads(p.stdout)["diagnoses"][0]["severity"] == "warning"


def test_rules_and_fixers_without_subcommand_both_list():
    rules = run_main("rules")
    fixers = run_main("fixers")
    assert rules.returncode == 0 and re.search(r"^torch-cuda-oom\s+cuda-oom\s", rules.stdout.decode(), re.M)
    assert fixers.returncode == 0 and re.search(r"^set-env\s", fixers.stdout.decode(), re.M)


BAD_FILES = {
    # line 9 is mis-indented; the mapping it breaks starts at line 8
    "indent.yaml": """\
rules:
- id: team-indent
  symptom: io-stall
  title: X
  severity: error
  explain: x
  match:
    log: ['foo (?P<a>\\d+)']
     with_log: ['bar']
""",
    "keys.yaml": """\
rules:
- id: team-keys
  symptom: io-stal
  title: X
  severity: error
  confidance: 0.9
  explain: x
  match:
    log: ['foo(?=bar)']
  examples:
    match: ["foobar"]
    no_match: ["foo"]
""",
}


def test_rule_file_errors_are_located_and_readable(rules_dir):
    d = rules_dir(BAD_FILES)
    p = run_main("rules", "lint", "--rules", str(d))
    out = p.stdout.decode()
    assert p.returncode == 2
    assert re.search(r"indent\.yaml:9: invalid YAML: did not find expected key: is this line indented like the "
                     r"ones above it\? \(a block mapping that starts at line 8\)", out)
    assert "unknown key 'confidance' (did you mean 'confidence'?)" in out
    assert "unknown symptom 'io-stal' (did you mean 'io-stall'?)" in out and "troubleshoot rules symptoms" in out
    assert "rules/symptoms.yaml" not in out
    assert "b'" not in out and 'b"' not in out
    if re2_available():
        assert "outside the RE2 subset" in out and "invalid perl operator: (?=" in out
    assert re.search(r"^\d+ rules, \d+ errors, 0 warnings$", p.stderr.decode(), re.M)
    one = d.parent / "one"
    one.mkdir()
    (one / "indent.yaml").write_text(BAD_FILES["indent.yaml"])
    assert re.search(r"^\d+ rules, 1 error, 0 warnings$", run_main("rules", "lint", "--rules", str(one)).stderr.decode(),
                     re.M)


def test_rules_test_fails_when_a_rule_file_does_not_load(rules_dir):
    d = rules_dir(BAD_FILES)
    p = run_main("rules", "test", "--rules", str(d))
    out = p.stdout.decode()
    assert p.returncode == 1
    assert "2 rule files did not load" in out and str(d / "indent.yaml") in out and str(d / "keys.yaml") in out


def test_lint_takes_required_fixer_params_from_captures(rules_dir):
    rule = """\
rules:
- id: team-env
  symptom: io-stall
  title: X
  severity: error
  explain: x
  match:
    log: ['SET (?P<var>[A-Z_]+) TO (?P<val>\\S+)']
  fixes:
    - fixer: set-env
      params: {name: "{var}", value: "{val}"}
    - fixer: set-env
      params: {name: "{nothing}", value: "x"}
  examples:
    match: ["SET A TO b"]
    no_match: ["set a to b"]
"""
    p = run_main("rules", "lint", "--rules", str(rules_dir({"env.yaml": rule})))
    out = p.stdout.decode()
    lines = [ln for ln in out.splitlines() if "team-env" in ln]
    assert len(lines) == 1 and ":12:" in lines[0] and "'name' is filled from {nothing}" in lines[0], out


def test_team_symptoms_extend_the_taxonomy(rules_dir):
    d = rules_dir({"symptoms.yaml": "symptoms:\n  team-license-server: 'the license server is down'\n"
                                    "  cuda-oom: 'again'\n  Bad_Id: 'x'\n",
                   "r.yaml": HOSTILE_RULE.replace("symptom: io-stall", "symptom: team-license-server")})
    p = run_main("rules", "symptoms", "--rules", str(d), "--format", "json")
    rows = {r["id"]: r for r in json.loads(p.stdout)["symptoms"]}
    assert rows["team-license-server"]["path"] == str(d / "symptoms.yaml") and rows["team-license-server"]["line"] == 2
    assert rows["cuda-oom"]["pack"] == "shipped" and "Bad_Id" not in rows
    err = p.stderr.decode()
    assert "symptom 'cuda-oom' is already defined" in err and "'Bad_Id' is not kebab-case" in err
    doc = json.loads(run_main("diagnose", "--no-probe", "--format", "json", "--rules", str(d),
                             input=b"HOSTILE x\n").stdout)
    assert doc["diagnoses"][0]["symptom"] == "team-license-server"


def test_bad_path_arguments_are_one_line_errors(tmp_path, capsys):
    a_file = tmp_path / "file.txt"
    a_file.write_text("x\n")
    missing = tmp_path / "missing"
    empty = tmp_path / "empty"  # tmp_path itself holds the command's cache and state folders
    empty.mkdir()
    cases = [
        (["fix", "raise-nofile", "--root", str(a_file)], str(a_file)),
        (["fix", "raise-nofile", "--root", str(a_file), "--apply", "--yes"], str(a_file)),
        (["diagnose", "--no-probe", "--log", str(a_file), "--snapshot", str(missing)], str(missing)),
        (["diagnose", "--no-probe", "--log", str(a_file), "--snapshot", str(tmp_path)], str(tmp_path)),
        (["diagnose", "--log", str(a_file), "--python", str(missing)], str(missing)),
        (["diagnose", "--no-probe", "--log", str(a_file), "--rules", str(missing)], str(missing)),
        (["diagnose", "--follow", str(tmp_path)], str(tmp_path)),
        (["diagnose", "--follow", str(missing)], str(missing)),
        (["rules", "why", "torch-cuda-oom", "--log", str(tmp_path)], str(tmp_path)),
        (["rules", "why", "torch-cuda-oom", "--snapshot", str(missing)], str(missing)),
        (["fix", "--rule", "torch-cuda-oom", "--log", str(empty)], str(empty)),
        (["probe", "--save", str(tmp_path)], str(tmp_path)),
        (["rules", "list", "--rules", str(missing)], str(missing)),
        (["fleet", "diagnose", str(a_file)], str(a_file)),
        (["tui", "--root", str(a_file)], str(a_file)),
        (["rules", "new", "--out", str(a_file), "--symptom", "io-stall", "ERROR DATASET /mnt/x NOT MOUNTED"],
         str(a_file)),
        (["-p", str(missing / "plugin.py"), "fixers"], str(missing / "plugin.py")),
    ]
    from troubleshoot import cli

    # In this process (the command's own main, which prints the error and returns its status): a
    # traceback would be an exception here and fail the test. One child process checks the same
    # from outside.
    for argv, path in cases:
        capsys.readouterr()
        code = cli.main(argv)
        err = capsys.readouterr().err
        assert code == 2, (argv, code, err)
        assert err.startswith("troubleshoot: error: ") and err.count("\n") == 1, (argv, err)
        assert path in err, (argv, err)
    p = run_cli(*cases[0][0])
    assert p.returncode == 2 and p.stderr.decode().count("\n") == 1 and "Traceback" not in p.stderr.decode()
