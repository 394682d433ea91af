"""What `--help` says about each command: a description and real invocations, as data.

Every parser in the tree (`diagnose`, `rules lint`, `fleet probe`...) has an entry here;
tests/test_cli_help.py checks that, and that every example parses.
"""

from __future__ import annotations

import argparse

# (command path) -> (description, examples). An example is a whole command line as a user types it.
HELP: dict[tuple[str, ...], tuple[str, tuple[str, ...]]] = {
    (): ("Diagnose failing or slow AI training jobs on NVIDIA GPUs: read the machine, read the log, "
         "explain what broke and preview, apply and undo the fix. With no command: the TUI on a terminal.",
         ("troubleshoot",
          "troubleshoot diagnose --log train.log",
          "troubleshoot run -- python train.py",
          "troubleshoot rules symptoms")),
    ("diagnose",): (
        "Ranked diagnoses of a log (a file, a folder of per-rank logs, a glob, or stdin), checked "
        "against this machine's facts (or a saved snapshot). Text for people, JSON for scripts; "
        "--fail-on makes a CI step fail on a diagnosis of that severity.",
        ("troubleshoot diagnose --log train.log",
         "python train.py 2>&1 | troubleshoot diagnose",
         "troubleshoot diagnose --log logs/ --no-probe --format json --fail-on error",
         "troubleshoot diagnose --log train.log --snapshot node07.json --rules ./team-rules")),
    ("tui",): (
        "The interactive terminal UI: machine facts, ranked diagnoses with evidence, fix preview, "
        "apply and undo, the rules browser. Press ? inside for the keys.",
        ("troubleshoot tui",
         "troubleshoot tui --log train.log",
         "troubleshoot tui --follow train.log --rules ./team-rules")),
    ("probe",): (
        "Read this machine (NVML GPUs and driver, kernel modules and Xid events, CUDA libraries, "
        "framework builds, Docker, memory, limits, IO) and print it; --save keeps it as a snapshot "
        "that `diagnose --snapshot` reads elsewhere.",
        ("troubleshoot probe",
         "troubleshoot probe --format json --save node07.json",
         "troubleshoot probe --redact --save node07.json --python ~/venvs/train/bin/python")),
    ("fixers",): (
        "The fixers that rules can name in `fixes:`, shipped and from plugins. With no subcommand: list them.",
        ("troubleshoot fixers",
         "troubleshoot fixers list --format json",
         "troubleshoot fixers list -p ./plugin.py")),
    ("fixers", "list"): (
        "List every fixer with its parameters (NAME? is optional).",
        ("troubleshoot fixers list",
         "troubleshoot fixers list --format json")),
    ("fix",): (
        "Preview a fix (the default: every command exactly as it would run, every file change as a "
        "diff), or apply it with --apply: backed up, journalled, verified, undoable.",
        ("troubleshoot fix --rule torch-cuda-oom --log train.log",
         "troubleshoot fix raise-shm --param size=16g",
         "troubleshoot fix nvidia-container-toolkit --root /tmp/image --apply --yes")),
    ("undo",): (
        "Restore the files a fix changed, byte for byte (the latest fix, or the ID from `troubleshoot "
        "history`). Commands a fix ran are listed, not reversed.",
        ("troubleshoot undo",
         "troubleshoot undo 20250101-120000-raise-shm-1a2b --yes")),
    ("history",): (
        "The fixes applied on this machine, newest first, with their status and where they wrote.",
        ("troubleshoot history",
         "troubleshoot history --format json")),
    ("run",): (
        "Run CMD unchanged (same output, same exit code), keep its log, watch the machine while it "
        "runs, and diagnose the failure when it exits non-zero. Put the job after `--`.",
        ("troubleshoot run -- python train.py --bs 64",
         "troubleshoot run -- python examples/host_oom.py",
         "troubleshoot run --format json --report r.json -- torchrun --nproc-per-node 8 train.py")),
    ("fleet",): (
        "Many nodes: collect one snapshot per node through Slurm, then compare them (drift, "
        "outliers) and diagnose each with the job's logs.",
        ("troubleshoot fleet probe --slurm --nodes 4 --out snaps/",
         "troubleshoot fleet diagnose snaps/ --log logs/")),
    ("fleet", "probe"): (
        "Run `troubleshoot probe` on each node through srun and save <node>.json into --out DIR; "
        "a node that does not answer in --timeout is named, not waited for.",
        ("troubleshoot fleet probe --slurm --nodes 4 --out snaps/",
         "troubleshoot fleet probe --slurm --job 4242 --out snaps/",
         "troubleshoot fleet probe --slurm --nodelist 'gpu[01-04]' --out snaps/ --timeout 30")),
    ("fleet", "diagnose"): (
        "Diagnose and compare a folder of node snapshots (and the logs in it or given with --log).",
        ("troubleshoot fleet diagnose snaps/",
         "troubleshoot fleet diagnose snaps/ --log 'logs/*.log' --format json")),
    ("rules",): (
        "The rule knowledge base: shipped rules plus team folders (--rules DIR, $TROUBLESHOOT_RULES, "
        "the config file). With no subcommand: list the effective rules.",
        ("troubleshoot rules",
         "troubleshoot rules new --rules ./team-rules 'ERROR DATASET /mnt/imagenet NOT MOUNTED'",
         "troubleshoot rules lint --rules ./team-rules")),
    ("rules", "lint"): (
        "Check rule files: each problem as file:line: message; exit 2 when there is an error.",
        ("troubleshoot rules lint",
         "troubleshoot rules lint --rules ./team-rules -p ./plugin.py")),
    ("rules", "test"): (
        "Run every rule's examples through the real scanner; exit 1 when an example fails or a "
        "rule file does not load.",
        ("troubleshoot rules test",
         "troubleshoot rules test --rules ./team-rules")),
    ("rules", "list"): (
        "The effective rules (after team folders added, replaced or disabled some) and where each came from.",
        ("troubleshoot rules list",
         "troubleshoot rules list --rules ./team-rules --format json")),
    ("rules", "show"): (
        "One rule: its patterns, conditions, explanation, fixes with their parameters, references.",
        ("troubleshoot rules show torch-cuda-oom",
         "troubleshoot rules show team-dataset-missing --rules ./team-rules")),
    ("rules", "why"): (
        "Trace one rule on a log: which patterns matched which lines, each condition and the facts it read.",
        ("troubleshoot rules why torch-cuda-oom --log train.log",
         "troubleshoot rules why nouveau-loaded-facts --snapshot node07.json")),
    ("rules", "patterns"): (
        "Every log pattern, one per line (POSIX ERE for `grep -E -f`, or Python syntax).",
        ("troubleshoot rules patterns > patterns.txt",
         "troubleshoot rules patterns --syntax python")),
    ("rules", "symptoms"): (
        "Every symptom id a rule may use: the shipped taxonomy and each team folder's symptoms.yaml, "
        "with where each comes from.",
        ("troubleshoot rules symptoms",
         "troubleshoot rules symptoms --rules ./team-rules --format json")),
    ("rules", "new"): (
        "Scaffold a rule file from a pasted log line: the variable parts (numbers, hex, paths, "
        "versions, quoted names) become named captures or classes, the line a `match` example. The "
        "file passes `rules lint` and `rules test` as written; edit the title, explanation and no_match.",
        ("troubleshoot rules new 'ERROR DATASET /mnt/imagenet NOT MOUNTED'",
         "troubleshoot rules new --rules ./team-rules --id team-dataset-missing 'ERROR DATASET /mnt/a NOT MOUNTED'",
         "tail -n 1 train.log | troubleshoot rules new --out team-rules/new.yaml -")),
}


def subparsers(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """(path, parser) for the parser and every subcommand under it, depth first."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from subparsers(sub, path + (name,))


def apply(parser: argparse.ArgumentParser) -> None:
    """Set each parser's description and an `examples:` epilog from HELP."""
    for path, p in subparsers(parser):
        entry = HELP.get(path)
        if entry is None:
            continue
        description, examples = entry
        p.description = description
        p.epilog = "examples:\n" + "\n".join(f"  {e}" for e in examples)
        p.formatter_class = _Formatter


class _Formatter(argparse.HelpFormatter):
    """Descriptions wrapped to the terminal; the examples epilog kept line for line."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text.startswith("examples:\n"):
            return text
        return super()._fill_text(text, width, indent)
