"""Redaction of text, data and diagnoses by the snapshot's rules (`snapshot.redact`): the same
names (the host name, user name and home folder a snapshot records), the same addresses (IPv4,
IPv6, MAC) and the same placeholders (`<host-1a2b3c4d>`), so that one key gives one host the
same placeholder in a snapshot, a log and a report.

Every value goes through `snapshot.redact` itself, wrapped in a document that carries the
host's names: there is one set of rules, kept in snapshot.py. One pass is added after it: the
host and user names where they follow a dot (file names), with the placeholders snapshot.redact
gives them. A value is redacted once only: the rules are not idempotent
(`/home/<user-1a2b3c4d>` would be rewritten again).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import Any

from troubleshoot import snapshot
from troubleshoot.model import Diagnosis, Evidence

# The shape of snapshot._placeholder's output, to count what a text had replaced; tests pin the
# two together (tests/test_bundle.py).
PLACEHOLDER = re.compile(r"<(host|user|home|mac|ip|ip6)-[0-9a-f]{8}>")
WHAT = ("host names", "user names", "home folders", "IPv4 and IPv6 addresses", "MAC addresses")
# The fields of a snapshot's `host` area that name someone (snapshot.redact reads these).
NAME_FIELDS = ("hostname", "user", "home")


class Redactor:
    """Redacts with one key and one host's names: every member of one bundle shares one."""

    def __init__(self, host: Mapping | None, key: bytes | None = None):
        self.key = key if key is not None else snapshot.redaction_key()
        host = host if isinstance(host, Mapping) else {}
        self.host = {k: host[k] for k in NAME_FIELDS if isinstance(host.get(k), str)}
        self._done: dict[str, str] = {}
        self._placeholders: dict[str, str] = {}  # name -> placeholder, for names after a dot
        self._dotted = self._dotted_names()

    def facts(self, facts: dict) -> dict:
        """A snapshot redacted as `probe --redact` redacts it, with this redactor's key and names
        (the same output when they are the snapshot's own), marked `redacted`."""
        out = self.data(facts)
        out["redacted"] = True
        return out

    def data(self, value: Any) -> Any:
        """A JSON-like value (dicts, lists, strings) with every string redacted, keys too."""
        # "\0": a key no name can be, so that redaction leaves it as it is
        wrapped = snapshot.redact({"host": dict(self.host), "\0": value}, self.key)["\0"]
        return _walk(wrapped, self._after_dot)

    def text(self, text: str) -> str:
        """One text redacted; the same text again costs nothing."""
        done = self._done.get(text)
        if done is None:
            done = self.data(text)
            if len(text) < 4096:  # short values repeat (a file name, a node); a log does not
                self._done[text] = done
        return done

    def _dotted_names(self) -> re.Pattern | None:
        """The host and user names where they follow a dot, which the snapshot's rules leave
        (they keep `torch.vm` whole for a host named `vm`): the node in a rank log's name,
        `4242-train.gpu-07.rank0.log`, must not reach a ticket."""
        for field_name in ("hostname", "user"):
            name = self.host.get(field_name)
            if name:  # its placeholder, as the snapshot's rules make it (none for `root`)
                placeholder = snapshot.redact({"host": {field_name: name}, "\0": name}, self.key)["\0"]
                if placeholder != name:
                    self._placeholders[name] = placeholder
        if not self._placeholders:
            return None
        longest_first = sorted(self._placeholders, key=len, reverse=True)
        return re.compile("|".join(rf"(?<=\.){re.escape(n)}(?![\w-])" for n in longest_first))

    def _after_dot(self, text: str) -> str:
        if self._dotted is None or "." not in text:
            return text
        return self._dotted.sub(lambda m: self._placeholders[m.group(0)], text)

    def diagnoses(self, diagnoses: Sequence[Diagnosis]) -> list[Diagnosis]:
        """Diagnoses whose values from logs and facts are redacted (evidence, captures, notes,
        nodes, files, fix parameters), for a renderer. The rule stays as it was written; a log
        line that changed loses its match span (its offsets no longer hold)."""
        return [self._rebuild(d) for d in diagnoses]

    def _rebuild(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, tuple):
            return tuple(self._rebuild(v) for v in value)
        if isinstance(value, list):
            return [self._rebuild(v) for v in value]
        if isinstance(value, Mapping):
            return {k: self._rebuild(v) for k, v in value.items()}
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            # the rule is the rule set's, not the job's: its texts are filled with the
            # (redacted) captures when rendered
            changes = {f.name: self._rebuild(getattr(value, f.name)) for f in dataclasses.fields(value)
                       if f.init and f.name != "rule"}
            new = dataclasses.replace(value, **changes)
            if isinstance(new, Evidence) and new.text != value.text:
                new = dataclasses.replace(new, span=None)
            return new
        return value


def _walk(value: Any, change) -> Any:
    """`value` with `change` applied to every string in it, dict keys too."""
    if isinstance(value, str):
        return change(value)
    if isinstance(value, dict):
        return {_walk(k, change): _walk(v, change) for k, v in value.items()}
    if isinstance(value, list):
        return [_walk(v, change) for v in value]
    return value


def counts(text: str) -> dict[str, int]:
    """How many placeholders of each kind `text` holds: what redaction replaced in it."""
    out: dict[str, int] = {}
    for m in PLACEHOLDER.finditer(text):
        out[m.group(1)] = out.get(m.group(1), 0) + 1
    return dict(sorted(out.items()))
