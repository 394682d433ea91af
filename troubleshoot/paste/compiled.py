"""What a log says of `torch.compile` recompiling, read as facts of the `compile` area, from the
two messages PyTorch's TorchDynamo prints about it:

- "Recompiling function forward in /path/model.py:120" (torch/_dynamo/guards.py), one per
  recompilation, when the recompiles log is on (`TORCH_LOGS="recompiles"`), followed by the
  guard failures that made it recompile;
- "torch._dynamo hit config.recompile_limit (8)" ("config.cache_size_limit" before PyTorch 2.7;
  torch/_dynamo/convert_frame.py), once a function was compiled as many times as the limit
  allows, with "   function: 'forward' (/path/model.py:120)" on the next line.

Each recompilation keeps another compiled graph (and, with mode="reduce-overhead", another
CUDA-graph memory pool): the memory-growth rules name it as the cause when the log shows it.
"""

from __future__ import annotations

import re

from troubleshoot.paste.dumps import Found

AREA = "compile"
MAX_NAMES = 20
_RECOMPILING = re.compile(r"\bRecompiling function (?P<name>[\w<>.]+) in (?P<where>\S+?):\d+")
_LIMIT = re.compile(r"\btorch\._dynamo hit config\.(?P<limit>\w+) \((?P<value>\d+)\)")
# the next line, bare or under the logger's prefix ("W1206 ... convert_frame.py:1001]    function: ...")
_FUNCTION = re.compile(r"(?:^\s*|\]\s+)function: '(?P<name>[\w<>.]+)'")


def recompiles(lines: list[str]) -> Found | None:
    found = Found()
    names: list[str] = []
    count, first = 0, None
    for i, text in enumerate(lines):
        m = _RECOMPILING.search(text) if "Recompiling function" in text else None
        if m:
            count += 1
            first = i if first is None else first
            if m.group("name") not in names and len(names) < MAX_NAMES:
                names.append(m.group("name"))
            continue
        m = _LIMIT.search(text) if "hit config." in text else None
        if m:
            found.put(AREA, "limit_hit", True, i)
            found.put(AREA, "limit", f"{m.group('limit')} ({m.group('value')})", i)
            after = _FUNCTION.search(lines[i + 1]) if i + 1 < len(lines) else None
            if after and after.group("name") not in names and len(names) < MAX_NAMES:
                names.append(after.group("name"))
    if count:
        found.put(AREA, "recompiles", count, first)
    if names:
        found.put(AREA, "functions", names, first if first is not None else found.lines[f"{AREA}.limit"])
    return found if found.facts else None
