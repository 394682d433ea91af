from troubleshoot.cli import entry

entry()
