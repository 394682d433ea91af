"""Renderers of diagnoses: text for people, JSON for scripts, Markdown for issues and chat."""
