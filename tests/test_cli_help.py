"""`--help` of every command: a description, real examples that parse, help for every option."""

import argparse
import shlex

import pytest

from conftest import run_cli
from troubleshoot import cli, cli_help

PARSERS = list(cli_help.subparsers(cli.build_parser()))


def test_every_command_has_an_entry():
    paths = {path for path, _ in PARSERS}
    assert paths - set(cli_help.HELP) == set(), "add to cli_help.HELP"
    assert set(cli_help.HELP) - paths == set(), "cli_help.HELP names a command that does not exist"
    for name in ("diagnose", "tui", "probe", "fix", "run", "history", "undo", ("rules", "new"), ("fleet", "probe"),
                 ("fixers", "list")):
        assert (name if isinstance(name, tuple) else (name,)) in paths


@pytest.mark.parametrize("path,parser", PARSERS, ids=lambda x: " ".join(x) if isinstance(x, tuple) else "")
def test_description_examples_and_option_help(path, parser):
    description, examples = cli_help.HELP[path]
    assert parser.description == description and len(description) > 40
    assert len(examples) >= (3 if path == ("diagnose",) else 2)
    text = parser.format_help()
    assert "examples:\n" in text and all(f"  {e}\n" in text + "\n" for e in examples)
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._VersionAction, argparse._SubParsersAction)):
            continue
        assert action.help, f"{' '.join(path)}: {action.option_strings or action.dest} has no help"


@pytest.mark.parametrize("path", sorted(cli_help.HELP), ids=" ".join)
def test_examples_parse(path, monkeypatch):
    for example in cli_help.HELP[path][1]:
        words = shlex.split(example.split("|")[-1].split(">")[0])
        assert words[0] == "troubleshoot" and words[1:len(path) + 1] == list(path), example
        # A real invocation: the parser accepts it as written (usage errors raise TroubleshootError).
        cli.build_parser().parse_args(words[1:])


def test_the_one_command_parser_parses_as_the_whole_one():
    """main() builds only the named subcommand's parser: every example, with -p and --rules
    before and after the command, must come out exactly as the whole parser reads it."""
    argvs = [shlex.split(e.split("|")[-1].split(">")[0])[1:] for _, examples in cli_help.HELP.values()
             for e in examples]
    argvs = [a for a in argvs if a]  # bare `troubleshoot` (the TUI) is the whole parser's
    argvs += [["-p", "mod", *argvs[0]], ["--plugin=mod", "-pother", *argvs[0]], ["run", "-p", "m", "--", "ls", "-l"],
              ["--rules", "team-rules", *argvs[0]], ["--rules=a", "-p", "m", "--rules", "b", "rules", "--rules", "c", "test"]]
    for argv in argvs:
        command = cli.command_in(argv)
        assert command is not None and command in argv, argv
        assert cli.build_parser(command).parse_args(argv) == cli.build_parser().parse_args(argv), argv
    for argv in (["--help"], ["--version"], ["diagnse"], [], ["-x", "diagnose"], ["-p"]):
        assert cli.command_in(argv) is None  # the whole parser answers these (help, did-you-mean)


def test_a_mistyped_command_is_answered_from_the_whole_list():
    p = run_cli("diagnse")
    assert p.returncode == 2 and b"invalid choice: 'diagnse' (did you mean diagnose?)" in p.stderr
    p = run_cli("xyzzy")  # close to no command: every one is named
    assert p.returncode == 2 and b"invalid choice" in p.stderr and b"'diagnose'" in p.stderr and b"'rules'" in p.stderr


def test_diagnose_help_shows_three_invocations_and_the_options():
    p = run_cli("diagnose", "--help")
    out = p.stdout.decode()
    assert p.returncode == 0
    examples = [ln for ln in out.split("examples:\n", 1)[1].splitlines() if "troubleshoot diagnose" in ln]
    assert len(examples) >= 3
    for needle in ("--fail-on SEVERITY", "json: the stable contract", "-p MODULE, --plugin MODULE"):
        assert needle in out
    assert "FIXER_ID" in run_cli("fix", "--help").stdout.decode()
    assert "fixers list" in run_cli("fix", "--help").stdout.decode()
    undo = run_cli("undo", "--help").stdout.decode()
    assert "troubleshoot history" in undo


def test_sample_logs_readme_commands_parse():
    import re

    from conftest import REPO

    text = (REPO / "examples" / "logs" / "README.md").read_text()
    commands = [ln.split("#")[0].strip() for block in re.findall(r"```sh\n(.*?)```", text, re.S)
                for ln in block.splitlines() if ln.startswith("troubleshoot ")]
    assert len(commands) >= 5
    for command in commands:
        cli.build_parser().parse_args(shlex.split(command)[1:])
        for word in shlex.split(command):
            if word.startswith("examples/"):
                assert (REPO / word).is_file(), word
