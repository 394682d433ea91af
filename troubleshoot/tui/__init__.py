"""The Textual TUI. Imported only by `troubleshoot` / `troubleshoot tui`: never by the CLI's other
commands, which start much faster without Textual."""
