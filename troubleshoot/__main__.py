"""`python -m troubleshoot`: the same command as the installed `troubleshoot` executable."""

import os
import sys

# `python -m` puts the working folder first on sys.path, so a json.py or yaml.py in the folder a
# user runs the tool from would be imported in its place. The installed executable never has it.
if not sys.flags.safe_path and sys.path and sys.path[0] in ("", os.getcwd()):
    del sys.path[0]

from troubleshoot.cli import entry  # noqa: E402

entry()
