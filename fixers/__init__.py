"""The shipped fixers of troubleshoot (installed as `troubleshoot_fixers`).

They register through the `troubleshoot` entry point in pyproject.toml, exactly like a
third-party fixer package (see docs/plugins.md).
"""
