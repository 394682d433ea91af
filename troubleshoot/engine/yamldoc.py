"""Safe YAML loading that keeps line numbers and refuses YAML 1.1 traps.

PyYAML composes the document (C loader when present, never an unsafe constructor); we build
the Python values ourselves so that every mapping and list knows the line of each entry,
duplicate keys are errors instead of silently winning, and scalars YAML 1.1 would quietly turn
into something else (`12.10` -> 12.1, `no` -> False, `1:30` -> 90) are reported.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import yaml


def _yaml() -> ModuleType:
    """PyYAML, imported when a document is parsed: runs whose rule files and tables come from
    the cache never load it."""
    import yaml

    return yaml


def _loader(yaml: ModuleType):
    # The C loader when PyYAML was built with libyaml; never an unsafe constructor.
    return getattr(yaml, "CSafeLoader", None) or yaml.SafeLoader

MAX_NODES = 200_000
MAX_DEPTH = 64

_BOOL_WORDS = {"true", "false"}
_TAG = "tag:yaml.org,2002:"


class YamlError(Exception):
    def __init__(self, line: int | None, message: str):
        self.line = line
        self.message = message
        super().__init__(message)


@dataclass(frozen=True)
class Trap:
    line: int
    message: str


class LDict(dict):
    """A mapping that remembers its own line and the line of each key."""

    line: int = 0
    key_lines: dict

    def line_of(self, key) -> int:
        return self.key_lines.get(key, self.line)


class LList(list):
    """A list that remembers its own line and the line of each item."""

    line: int = 0
    item_lines: list

    def line_of(self, index: int) -> int:
        return self.item_lines[index] if 0 <= index < len(self.item_lines) else self.line


def load(text: str) -> tuple[object, list[Trap]]:
    """Parse one YAML document; return its value and the traps found in it."""
    yaml = _yaml()
    try:
        _check_size(text, yaml)
        node = yaml.compose(text, Loader=_loader(yaml))
    except yaml.MarkedYAMLError as exc:
        # For an unfinished construct (an unclosed bracket or quote, a key without its colon)
        # the context mark is where it began: that is the line to fix. In a block mapping or
        # list, the problem mark is the line that broke it (mis-indented), the context only
        # where the mapping began.
        block = bool(exc.context and exc.context.startswith("while parsing a block"))
        mark = (exc.problem_mark if block else None) or exc.context_mark or exc.problem_mark
        line = mark.line + 1 if mark else None
        detail = exc.problem or str(exc)
        if block and exc.context_mark and exc.problem_mark:
            what = exc.context.removeprefix("while parsing ")
            detail = (f"{detail}: is this line indented like the ones above it? ({what} that starts at "
                      f"line {exc.context_mark.line + 1})")
        elif exc.context and exc.problem_mark and exc.context_mark:
            detail = f"{exc.context} that starts here: {detail} (at line {exc.problem_mark.line + 1})"
        raise YamlError(line, f"invalid YAML: {detail}") from None
    except yaml.YAMLError as exc:
        raise YamlError(None, f"invalid YAML: {exc}") from None
    except UnicodeEncodeError as exc:  # text decoded with surrogateescape (a command-line argument)
        raise YamlError(None, f"not UTF-8 text ({exc.reason} at character {exc.start})") from None
    builder = _Builder(yaml)
    if node is None:
        return None, []
    return builder.build(node, 0), builder.traps


def _check_size(text: str, yaml: ModuleType) -> None:
    """Count nodes and nesting from the parser's event stream before anything is composed: a
    huge or deep document is refused at the line where it crosses the limit, without building
    a tree of millions of nodes first."""
    nodes = depth = 0
    for event in yaml.parse(text, Loader=_loader(yaml)):
        if isinstance(event, (yaml.ScalarEvent, yaml.AliasEvent)):
            nodes += 1
        elif isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            nodes += 1
            depth += 1
            if depth > MAX_DEPTH:
                raise YamlError(event.start_mark.line + 1, f"nesting deeper than {MAX_DEPTH} levels")
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            depth -= 1
        else:
            continue
        if nodes > MAX_NODES:
            raise YamlError(event.start_mark.line + 1, f"document too large (over {MAX_NODES} nodes)")


def encode(value):
    """A loaded document as plain tuples (for a cache that stores data, never code)."""
    if isinstance(value, LDict):
        return ("D", value.line, tuple((k, value.key_lines.get(k, value.line), encode(v)) for k, v in value.items()))
    if isinstance(value, LList):
        return ("L", value.line, tuple((ln, encode(v)) for ln, v in zip(value.item_lines, value)))
    return value


def decode(value):
    if isinstance(value, tuple):
        kind, line, items = value
        if kind == "D":
            out = LDict()
            out.line, out.key_lines = line, {}
            for k, kline, v in items:
                out[k] = decode(v)
                out.key_lines[k] = kline
            return out
        out_l = LList()
        out_l.line, out_l.item_lines = line, []
        for ln, v in items:
            out_l.append(decode(v))
            out_l.item_lines.append(ln)
        return out_l
    return value


class _Builder:
    def __init__(self, yaml: ModuleType) -> None:
        self.traps: list[Trap] = []
        self.nodes = 0
        self.mapping, self.sequence = yaml.MappingNode, yaml.SequenceNode

    def build(self, node: yaml.Node, depth: int):
        self.nodes += 1
        line = node.start_mark.line + 1
        if self.nodes > MAX_NODES:
            raise YamlError(line, f"document too large or aliases expand too far (over {MAX_NODES} nodes)")
        if depth > MAX_DEPTH:
            raise YamlError(line, f"nesting deeper than {MAX_DEPTH} levels")
        if isinstance(node, self.mapping):
            out = LDict()
            out.line, out.key_lines = line, {}
            for key_node, value_node in node.value:
                if key_node.tag == _TAG + "merge":
                    raise YamlError(key_node.start_mark.line + 1, "merge keys (<<) are not supported")
                key = self.build(key_node, depth + 1)
                kline = key_node.start_mark.line + 1
                if not isinstance(key, (str, int, float, bool)) or key is None:
                    raise YamlError(kline, "mapping keys must be plain values")
                if key in out:
                    # Reported, not raised: lint must show every problem of the file in one run.
                    self.traps.append(Trap(kline, f"duplicate key {key!r} (first at line {out.key_lines[key]})"))
                    continue
                out[key] = self.build(value_node, depth + 1)
                out.key_lines[key] = kline
            return out
        if isinstance(node, self.sequence):
            out_l = LList()
            out_l.line, out_l.item_lines = line, []
            for item in node.value:
                out_l.append(self.build(item, depth + 1))
                out_l.item_lines.append(item.start_mark.line + 1)
            return out_l
        return self._scalar(node, line)

    def _scalar(self, node: yaml.ScalarNode, line: int):
        raw, tag = node.value, node.tag
        if tag == _TAG + "str" or node.style in ("'", '"', "|", ">"):
            return raw
        if tag == _TAG + "null":
            return None
        if tag == _TAG + "bool":
            if raw.lower() not in _BOOL_WORDS:
                self.traps.append(Trap(line, f"'{raw}' is read as a boolean by YAML 1.1; quote it or write true/false"))
            return raw.lower() in ("true", "yes", "on", "y")
        if tag == _TAG + "int":
            if ":" in raw or raw.lower().startswith(("0o", "0x", "0b")) or (len(raw) > 1 and raw.startswith("0")):
                self.traps.append(Trap(line, f"'{raw}' is read as a number in another base by YAML 1.1; quote it"))
            try:
                return int(raw.replace("_", ""), 0)
            except ValueError:
                return raw
        if tag == _TAG + "float":
            try:
                value = float(raw.replace("_", ""))
            except ValueError:
                return raw
            if re.fullmatch(r"\d+\.\d+", raw) and repr(value) != raw:
                self.traps.append(Trap(line, f"'{raw}' is read as the number {value!r}; quote version-like values"))
            return value
        # Timestamps, binary and other YAML 1.1 types stay text: rules have no use for them.
        return raw
