"""`troubleshoot bundle`: one .tar.gz to attach to a ticket. The command's context gives the
logs, the machine's facts and the diagnoses (as `diagnose` gets them), the fix journal its
history; bundle.py packs and redacts them."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from troubleshoot.console import PROG, warn_problems
from troubleshoot.errors import TroubleshootError
from troubleshoot.textsafe import terminal_safe

if TYPE_CHECKING:
    from troubleshoot.context import CommandContext
    from troubleshoot.sources import LogSource

DEFAULT_MAX_LOG = "10MiB"


def add_parser(sub, add_rules_arg) -> None:
    # the description and examples are cli_help.HELP's, as every command's
    b = sub.add_parser("bundle", help="pack logs, snapshot, diagnoses and fix history into one .tar.gz for a ticket")
    b.add_argument("--log", metavar="PATH", action="append",
                   help="log file, folder of per-rank logs or glob (repeatable); each is diagnosed whole and packed "
                        "cut to --max-log-size")
    facts = b.add_mutually_exclusive_group()
    facts.add_argument("--snapshot", metavar="FILE", help="a saved snapshot instead of probing this machine")
    facts.add_argument("--no-probe", action="store_true", help="no snapshot: do not probe this machine")
    b.add_argument("--python", metavar="PATH", help="interpreter whose frameworks to probe (a venv or conda env)")
    b.add_argument("--here", action="store_true",
                   help="the logs came from this machine: diagnose them with its facts, as diagnose --here")
    b.add_argument("--out", metavar="FILE",
                   help="the archive to write (default: troubleshoot-bundle-<UTC time>.tar.gz here); never "
                        "replaces a file without --force")
    b.add_argument("--force", action="store_true", help="replace --out when it exists")
    b.add_argument("--no-redact", action="store_true",
                   help="keep host names, addresses, user names and paths as they are (check the bundle before "
                        "you share it)")
    b.add_argument("--max-log-size", metavar="SIZE", default=DEFAULT_MAX_LOG,
                   help=f"bytes kept of each log: its start and end, at line breaks (default {DEFAULT_MAX_LOG}; "
                        "many logs share 64MiB; 0: every log whole)")
    add_rules_arg(b)


def cmd_bundle(args, ctx: CommandContext) -> int:
    from troubleshoot import bundle
    from troubleshoot.fixes import journal
    from troubleshoot.inputwatch import human_size

    out = _out_path(args.out, args.force)
    max_log = _max_log(args.max_log_size)
    ctx.plugins  # a -p plugin that cannot load stops the command before anything is read
    logs = ctx.log_sources()
    files = [_regular(s) for s in logs]
    if not files and not ctx.options.probe and not ctx.options.snapshot:
        raise TroubleshootError("nothing to bundle: give a log (--log PATH), or let troubleshoot probe this machine "
                                "(drop --no-probe)")
    if args.no_redact:
        ctx.warn("--no-redact: the bundle keeps host names, addresses, user names and paths as they are; "
                 "read it before you share it")
    result = ctx.diagnose(ctx.sources(logs))
    warn_problems(result.ruleset, ctx)
    machine = ctx.machine()
    source = result.source if machine.origin is None or logs else machine.origin
    from troubleshoot.report import jsonfmt

    meta = jsonfmt.result_meta(result, machine.origin)
    names = None if args.no_redact else _names(ctx, machine.facts)
    contents = bundle.Contents(
        logs=tuple(files), facts=machine.facts, facts_origin=machine.origin, diagnoses=tuple(result.diagnoses),
        meta=meta, source=source, history=tuple(_history(journal)), names=names)
    written = bundle.write(contents, out, redact=not args.no_redact, force=args.force, max_log_bytes=max_log)
    print(terminal_safe(f"{PROG}: wrote {written.path} ({len(written.members)} files, {human_size(written.size)}"
                        f"{'' if args.no_redact else ', redacted'}); attach it to the ticket", keep_newlines=False),
          file=sys.stderr)
    return 0


def _out_path(value: str | None, force: bool) -> Path:
    """Checked before anything is read or probed: the folder exists, the name is free (or --force)."""
    if value is None:
        from datetime import datetime, timezone

        value = f"troubleshoot-bundle-{datetime.now(timezone.utc).strftime('%Y%m%d-%H%M%S')}.tar.gz"
    if not value:
        raise TroubleshootError("--out: an empty path; give a file name")
    p = Path(os.path.expanduser(value))
    if p.is_dir():
        raise TroubleshootError(f"--out {value}: is a folder; give a file name")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise TroubleshootError(f"--out {value}: no folder {parent}")
    if os.path.lexists(p) and not force:
        raise TroubleshootError(f"--out {value}: already exists; give --force to replace it")
    return p


def _max_log(value: str) -> int | None:
    from troubleshoot.values import parse_bytes

    try:
        n = parse_bytes(value)
    except ValueError:
        raise TroubleshootError(f"--max-log-size {value}: not a size (such as 10MiB, 500KB; 0: whole logs)") from None
    return None if n == 0 else max(n, 1024)  # a cut log keeps at least a few lines


def _regular(source: LogSource):
    """A log the bundle reads twice (to diagnose, to pack): a regular file, never a pipe."""
    from troubleshoot.bundle import LogFile

    if source.path is None:
        raise TroubleshootError(f"{source.name}: a bundle packs log files; save the output to a file first "
                                "(a pipe can be read only once)")
    try:
        mode = os.stat(source.path).st_mode
    except OSError as exc:
        raise TroubleshootError(f"cannot read log {source.name}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(mode):
        raise TroubleshootError(f"{source.name}: not a regular file; a bundle packs log files "
                                "(a pipe or a device can be read only once)")
    return LogFile(source.name, source.path)


def _history(journal) -> list:
    try:
        return journal.entries()
    except OSError as exc:  # an unreadable state folder: the bundle says so rather than failing
        return [("journal", f"cannot read the fix journal: {exc.strerror or exc}")]


def _names(ctx: CommandContext, facts: dict | None) -> dict | None:
    """The host area whose names redaction replaces: the snapshot's, unless it has none or is
    redacted already; then this machine's identity (its host probe alone)."""
    host = (facts or {}).get("host")
    if isinstance(host, dict) and host.get("hostname") and (facts or {}).get("redacted") is not True:
        return host
    if "host" not in ctx.probe_names():
        return None
    return ctx.probe_areas(["host"], None).get("host")
