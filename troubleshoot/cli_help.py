"""What the command line tells its user: each command's description, real invocations and exit
statuses (as data), the `did you mean` of a misspelt word, and the one `--fail-on` option.

Every parser in the tree (`diagnose`, `rules lint`, `fleet probe`...) has an entry in HELP;
tests/test_cli_help.py checks that, and that every example parses.
"""

from __future__ import annotations

import argparse

# (command path) -> (description, examples). An example is a whole command line as a user types it.
HELP: dict[tuple[str, ...], tuple[str, tuple[str, ...]]] = {
    (): ("Diagnose failing or slow AI training jobs on NVIDIA GPUs: read the machine, read the log, "
         "explain what broke and preview, apply and undo the fix. With no command: the TUI on a terminal.",
         ("troubleshoot",
          "troubleshoot diagnose train.log",
          "troubleshoot run -- python train.py",
          "troubleshoot rules symptoms",
          "troubleshoot completion bash > ~/.local/share/bash-completion/completions/troubleshoot")),
    ("diagnose",): (
        "Ranked diagnoses of a log (a file, a folder of per-rank logs, a glob, or stdin), checked "
        "against this machine's facts (or a saved snapshot). Each LOG argument is read as `--log LOG`: "
        "the logs of one job, as arguments and --log alike, are diagnosed together in the order given. "
        "Text for people, JSON for scripts; --fail-on makes a CI step fail on a diagnosis of that severity.",
        ("troubleshoot diagnose train.log",
         "python train.py 2>&1 | troubleshoot diagnose",
         "troubleshoot diagnose logs/rank*.log --no-probe --format json --fail-on error",
         "troubleshoot diagnose --log logs/ --snapshot node07.json --rules ./team-rules")),
    ("tui",): (
        "The interactive terminal UI: machine facts, ranked diagnoses with evidence, fix preview, "
        "apply and undo, the rules browser. One log, as LOG or --log LOG. Press ? inside for the keys.",
        ("troubleshoot tui",
         "troubleshoot tui train.log",
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
        "runs, and diagnose the failure when it exits non-zero. Name the job after run's own options; "
        "put `--` before it when its first word starts with '-'.",
        ("troubleshoot run python train.py --bs 64",
         "troubleshoot run -- python train.py --bs 64",
         "troubleshoot run -- python examples/host_oom.py",
         "troubleshoot run --format json --report r.json -- torchrun --nproc-per-node 8 train.py")),
    ("fleet",): (
        "Many nodes: collect one snapshot per node through Slurm, then compare them (drift, "
        "outliers) and diagnose each with the job's logs; check them and drain or resume through "
        "Slurm within limits; report on what the event store remembers.",
        ("troubleshoot fleet probe --slurm --nodes 4 --out snaps/",
         "troubleshoot fleet diagnose snaps/ --log logs/",
         "troubleshoot fleet check --snapshots snaps/ --slurm")),
    ("fleet", "probe"): (
        "Run `troubleshoot probe` on each node through srun and save <node>.json into --out DIR; "
        "a node that does not answer in --timeout is named, not waited for.",
        ("troubleshoot fleet probe --slurm --nodes 4 --out snaps/",
         "troubleshoot fleet probe --slurm --job 4242 --out snaps/",
         "troubleshoot fleet probe --slurm --nodelist 'gpu[01-04]' --out snaps/ --timeout 30")),
    ("fleet", "diagnose"): (
        "Diagnose and compare a folder of node snapshots (and the logs in it or given with --log).",
        ("troubleshoot fleet diagnose snaps/",
         "troubleshoot fleet diagnose snaps/ --log 'logs/*.log' --format json",
         "troubleshoot fleet diagnose snaps/ --format json --fail-on error")),
    ("fleet", "check"): (
        "Every node's verdict (as `troubleshoot check`), from recorded snapshots (--snapshots DIR) or "
        "the nodes probed through srun; with --slurm, failing nodes are drained and the ones "
        "troubleshoot drained resumed, within the limits, the worst faults first (docs/admin.md).",
        ("troubleshoot fleet check --snapshots snaps/",
         "troubleshoot fleet check --snapshots snaps/ --slurm --max-drain 2",
         "troubleshoot fleet check --slurm --partition gpu --format json")),
    ("fleet", "report"): (
        "What the event store says about the fleet over a period: the share of nodes without an "
        "incident, repeat offenders, the mean time between incidents per class, and the incident "
        "rates before and after a date.",
        ("troubleshoot fleet report",
         "troubleshoot fleet report --since 2026-01-01 --around 2026-09-01 --format json")),
    ("check",): (
        "A node's verdict for a health check, a prolog or a preflight: PASS, WARN or FAIL, one line "
        "per finding with its class ([hw], [driver], [config], [user]) and recovery action, from a "
        "bounded probe or a recorded --snapshot. With --slurm, a failing node is drained with the "
        "finding as its reason and a node troubleshoot drained is resumed after passing checks in a "
        "row; a node drained by anyone else is never touched (docs/admin.md).",
        ("troubleshoot check",
         "troubleshoot check --slurm --config /etc/troubleshoot/config.yaml",
         "troubleshoot check --snapshot node07.json --node node07 --format json",
         "troubleshoot check --format npd")),
    ("remediate",): (
        "A failing node's repair ladder: record the incident, keep the evidence before anything "
        "changes, drain, repair (reset the GPU, restart Fabric Manager, reboot), verify with a matrix "
        "product, an NCCL all-reduce and dcgmi where installed, then resume, or escalate and leave "
        "the node drained. A dry run unless --apply (as root).",
        ("troubleshoot remediate --slurm",
         "troubleshoot remediate --slurm --apply",
         "troubleshoot remediate --node node07 --snapshot node07.json --format json")),
    ("events",): (
        "What the admin loop recorded in its event store: every check verdict, incident, drain, "
        "resume, limit hold, repair, verification and escalation, oldest first.",
        ("troubleshoot events --node node07",
         "troubleshoot events --since 2026-12-01 --kind drain --kind resume --format json")),
    ("breaker",): (
        "The circuit breaker of the admin loop: open after repeated failed verifications, when every "
        "action is only reported; `reset` closes it once a person has looked.",
        ("troubleshoot breaker status",
         "troubleshoot breaker reset --why 'bad batch of risers replaced'")),
    ("bundle",): (
        "Pack what a support ticket needs into one .tar.gz: this machine's snapshot (or --snapshot), "
        "the logs (each cut to its start and end), the diagnoses as JSON and Markdown, the history of "
        "applied fixes, the version and a manifest. Host names, IP and MAC addresses, user names and "
        "home paths become placeholders, the same in every file (--no-redact keeps them). The archive "
        "is readable by you alone and never replaces a file without --force.",
        ("troubleshoot bundle --log train.log",
         "troubleshoot bundle --log logs/ --snapshot node07.json --out ticket-4242.tar.gz",
         "troubleshoot bundle --log slurm-4242.out --no-probe --max-log-size 50MiB")),
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
        "Run rules' examples through the real scanner; exit 1 when an example fails or a rule file "
        "does not load. With --rules, the rules of those folders alone (a team's own, and the shipped "
        "rules they replace); with --all too, every effective rule; without --rules, every rule.",
        ("troubleshoot rules test",
         "troubleshoot rules test --rules ./team-rules",
         "troubleshoot rules test --rules ./team-rules --all")),
    ("rules", "list"): (
        "The effective rules (after team folders added, replaced or disabled some) and where each came from.",
        ("troubleshoot rules list",
         "troubleshoot rules list --rules ./team-rules --format json")),
    ("rules", "show"): (
        "One rule: its patterns, conditions, explanation, fixes with their parameters, references.",
        ("troubleshoot rules show torch-cuda-oom",
         "troubleshoot rules show team-dataset-missing --rules ./team-rules")),
    ("rules", "why"): (
        "Trace one rule on a log: which patterns matched which lines, each condition and the facts it "
        "read. Machine facts come from --snapshot only: this machine is never probed (--no-probe is "
        "accepted, as `diagnose` takes it).",
        ("troubleshoot rules why torch-cuda-oom --log train.log",
         "troubleshoot rules why torch-cuda-oom --log train.log --no-probe",
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
    ("completion",): (
        "Print a completion script for bash, zsh or tcsh, made from this version's own parser: "
        "commands, options, their choices, and file or folder names where an option takes a path. "
        "Write it where the shell loads completions once (bash: the folder below; zsh: a file named "
        "_troubleshoot in a folder on $fpath; tcsh: source it from ~/.tcshrc), or try it in the "
        "current bash with `source <(troubleshoot completion bash)`.",
        ("troubleshoot completion bash > ~/.local/share/bash-completion/completions/troubleshoot",
         "troubleshoot completion zsh > ~/.zfunc/_troubleshoot",
         "troubleshoot completion tcsh > ~/.troubleshoot.tcsh")),
}

# (command path) -> the exit statuses its help lists after the examples, as the code returns them.
_STATUS_RAN = "  0    it ran, whatever it found"
_STATUS_USAGE = "  2    bad usage or unreadable input: one line `troubleshoot: error: ...`"
_STATUS_INTERRUPTED = "  130  interrupted (Ctrl-C)"
_STATUS_FAIL_ON = "  1    --fail-on SEVERITY: a diagnosis of that severity or worse was found"
EXIT_STATUS: dict[tuple[str, ...], tuple[str, ...]] = {
    (): ("  0    the command ran (diagnose: whatever it found)",
         "  1    diagnose, fleet diagnose: --fail-on's severity or worse was found; rules test: an example",
         "       failed; fix --apply: a fix failed or did not verify; undo: a file was not restored;",
         "       fleet probe: a node gave no snapshot",
         "  2    bad usage or unreadable input (one line `troubleshoot: error: ...`); rules lint: an error",
         _STATUS_INTERRUPTED,
         "  run: the job's own status (128+N: signal N ended it; 127: command not found; 126: not executable)"),
    ("diagnose",): (_STATUS_RAN, _STATUS_FAIL_ON, _STATUS_USAGE, _STATUS_INTERRUPTED),
    ("fleet", "diagnose"): (_STATUS_RAN, "  1    --fail-on SEVERITY: a node has a diagnosis of that severity or worse "
                                         "(a drift or outlier is a warning)",
                            _STATUS_USAGE, _STATUS_INTERRUPTED),
    ("run",): ("  N    the job's own exit status, whatever was diagnosed; 128+N when signal N ended it",
               "  127  the command was not found",
               "  126  the command cannot be executed (not executable, no #! line, a folder)",
               "  2    bad usage, before the job starts: one line `troubleshoot: error: ...`"),
    ("check",): ("  0    PASS (--format npd: PASS or WARN, node-problem-detector's OK)",
                 "  1    WARN (--format npd: FAIL, NonOK)",
                 "  2    FAIL; or bad usage, unreadable input (--format npd: Unknown, said on stdout)"),
    ("remediate",): ("  0    nothing to repair, or (--apply) the node was verified and resumed, or reboots",
                     "  1    a repair is due (dry run), or (--apply) it was held, escalated or needs service",
                     _STATUS_USAGE),
    ("fleet", "check"): ("  0    every node passed", "  1    a node warned, or gave no facts", "  2    a node failed; or "
                         "bad usage"),
    ("breaker",): ("  0    closed (status), or closed now (reset)", "  1    open (status)", _STATUS_USAGE),
    ("rules", "test"): ("  0    every example passed", "  1    an example failed, or a rule file did not load",
                        _STATUS_USAGE),
    ("rules", "lint"): ("  0    no error (warnings allowed)", "  2    an error in a rule file, or bad usage"),
}


def subparsers(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """(path, parser) for the parser and every subcommand under it, depth first."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from subparsers(sub, path + (name,))


def apply(parser: argparse.ArgumentParser) -> None:
    """Set each parser's description and an epilog from HELP and EXIT_STATUS: `examples:`, then
    `exit status:` where the command has more than 0 and 2."""
    for path, p in subparsers(parser):
        entry = HELP.get(path)
        if entry is None:
            continue
        description, examples = entry
        p.description = description
        p.epilog = "examples:\n" + "\n".join(f"  {e}" for e in examples)
        if path in EXIT_STATUS:
            p.epilog += "\n\nexit status:\n" + "\n".join(EXIT_STATUS[path])
        p.formatter_class = _Formatter


# model.SEVERITIES (worst first), named here so that building a parser imports no model
# (tests/test_cli_habits.py checks that they agree).
FAIL_ON_CHOICES = ("error", "warning", "info")


def add_fail_on_arg(p: argparse.ArgumentParser, where: str = "") -> None:
    """`--fail-on SEVERITY` (diagnose, fleet diagnose); `where` the diagnosis is looked for."""
    *worse, least = FAIL_ON_CHOICES
    p.add_argument("--fail-on", choices=FAIL_ON_CHOICES, metavar="SEVERITY",
                   help=f"exit 1 when a diagnosis of SEVERITY ({', '.join(worse)} or {least}) or worse is "
                        f"found{where}: fails a CI step")


def fail_on(threshold: str | None, diagnoses) -> int:
    """The exit status of --fail-on: 1 when a diagnosis is at least as severe as `threshold`
    (SEVERITIES runs worst first), else 0."""
    from troubleshoot.model import SEVERITIES

    if threshold is None:
        return 0
    worst = SEVERITIES.index(threshold)
    return 1 if any(SEVERITIES.index(d.severity) <= worst for d in diagnoses) else 0


class _Formatter(argparse.HelpFormatter):
    """Descriptions wrapped to the terminal; the examples epilog kept line for line."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text.startswith("examples:\n"):
            return text
        return super()._fill_text(text, width, indent)
