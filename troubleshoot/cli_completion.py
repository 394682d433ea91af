"""`troubleshoot completion {bash,zsh,tcsh}`: a shell completion script, written by shtab from
the whole parser, so that it completes exactly the commands, options and choices this version
has. An option or argument that names a path completes file names, or folder names where it
takes a folder (its metavar says which).

shtab is imported here and only here: no other command pays for it.
"""

from __future__ import annotations

import argparse
import sys

from troubleshoot.errors import TroubleshootError

# metavar -> what it completes
_FILES = frozenset({"PATH", "FILE", "LOG", "MODULE"})
_FOLDERS = frozenset({"DIR"})


def cmd_completion(shell: str, parser: argparse.ArgumentParser) -> int:
    try:
        import shtab
    except ImportError:  # a dependency, but an install may have left it out
        raise TroubleshootError("completion needs the shtab package (pip install shtab)") from None

    from troubleshoot.cli_help import subparsers

    for _, p in subparsers(parser):
        for action in p._actions:
            if action.metavar in _FILES:
                action.complete = shtab.FILE
            elif action.metavar in _FOLDERS:
                action.complete = shtab.DIRECTORY
    sys.stdout.write(shtab.complete(parser, shell=shell))
    return 0
