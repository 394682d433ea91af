"""What a pasted collective-hang report says about the log's job: which collective (op, sequence
number, process group or communicator) and which ranks are missing, dead, unresponsive, behind
or named as culprits.

Two reports are read, as facts of the `collectives` area:

- PyTorch's flight-recorder analyzer (`python -m torch.distributed.flight_recorder.fr_trace`,
  `torchfrtrace`): the first "Not all ranks joining collective ..." or "Collective ... errors"
  block, and the ranks whose dumps were missing. Its header changed between releases (2.5:
  "collective 5 at entry 4"; late 2024: "collective: sequence number: N"; now "collective,
  sequence number: N"); the field lines under it ("group info: ", "missing ranks: ", ...) did not.
- NCCL's RAS status (`ncclras`, or `echo status | nc localhost 28028`), as text from 2.24 on, as
  JSON (`ncclras -f json`, 2.28.7 on) and as monitor-mode events (`ncclras -m`, 2.29 on).

Each parser takes the log's lines and returns a `Found` or None, like troubleshoot.paste.dumps.
Where a report names several collectives or communicators the first one wins: the analyzer stops
pairing a group's collectives at its first mismatch, and RAS lists errors before warnings and the
largest communicators first.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from troubleshoot.paste.dumps import Found

AREA = "collectives"
# A rank list longer than this is not a job's (a range such as "0-4294967295" from a garbled paste).
MAX_RANKS = 1 << 17

# ------------------------------------------------------------------------ rank lists

_INT_LIST = re.compile(r"^\s*[\[({]?\s*(?P<body>[\d\s,-]*?)\s*[\])}]?\s*$")


def ranks_of(text: str) -> list[int] | None:
    """Sorted ranks of a printed rank list: a Python set or list ("{1, 3}", "[0, 1]", "set()") or
    NCCL's comma list with ranges ("0-3,5"). None when the text is no rank list."""
    text = text.strip()
    if text in ("set()", "[]", "{}", "()"):
        return []
    m = _INT_LIST.match(text)
    if not m or not m.group("body"):
        return None
    ranks: set[int] = set()
    for part in m.group("body").split(","):
        part = part.strip()
        lo, dash, hi = part.partition("-")
        if not lo.isdigit() or (dash and not hi.isdigit()):
            return None
        first, last = int(lo), int(hi) if dash else int(lo)
        if last < first or len(ranks) + last - first >= MAX_RANKS:
            return None
        ranks.update(range(first, last + 1))
    return sorted(ranks)


# ------------------------------------------------------------------------ flight recorder (fr_trace)

_FR_HEAD = re.compile(
    r"^\s*(?:Not all ranks joining collective(?:[,:] sequence number: (?P<seq>\d+)| (?P<seq_at>\d+) at entry \d+)"
    r"|Collective (?:sequence number: )?(?P<err_seq>\d+) (?:at entry \d+ )?(?:has )?errors?)\s*$")
_FR_FIELD = re.compile(r"^\s*(?P<key>internal record id|group info|collective state|collective|missing ranks|"
                       r"world size|expected ranks|error msg|error message): ?(?P<value>.*?)\s*$")
_FR_MISSING_DUMPS = re.compile(r"(?:Missing dump files from ranks |missed FR dumps from ranks \()"
                               r"(?P<ranks>\{[\d, ]*\}|set\(\))")
_CULPRIT = re.compile(r"Culprit rank (\d+);")
_ERROR_TYPE = re.compile(r"Error type: ([A-Z_]+)")
# The analyzer's op names (torch.distributed profiling names) as the watchdog's `OpType=` names them.
_TORCH_OPS = {
    "all_reduce": "ALLREDUCE", "allreduce_coalesced": "ALLREDUCE_COALESCED", "broadcast": "BROADCAST",
    "_broadcast_oop": "BROADCAST", "reduce": "REDUCE", "_reduce_oop": "REDUCE", "all_gather": "ALLGATHER",
    "_all_gather_base": "_ALLGATHER_BASE", "all_gather_into_tensor_coalesced": "ALLGATHER_COALESCED",
    "ALLGATHER_coalesced": "ALLGATHER_COALESCED", "reduce_scatter": "REDUCE_SCATTER",
    "_reduce_scatter_base": "_REDUCE_SCATTER_BASE", "REDUCE_SCATTER_coalesced": "REDUCE_SCATTER_COALESCED",
    "gather": "GATHER", "scatter": "SCATTER", "all_to_all": "ALLTOALL", "all_to_all_single": "ALLTOALL_BASE",
    "barrier": "BARRIER", "send": "SEND", "recv": "RECV", "coalesced": "COALESCED",
}


def _torch_op(profiling_name: str) -> str | None:
    """"nccl:all_reduce" -> "ALLREDUCE"; "nccl:send 1->2" -> "SEND"."""
    _, _, name = profiling_name.partition(":")
    op = (name or profiling_name).split(" ", 1)[0].strip()
    if not re.fullmatch(r"\w+", op):
        return None
    return _TORCH_OPS.get(op, op.upper())


def flight_recorder(lines: list[str]) -> Found | None:
    found = Found()
    head = next((i for i, t in enumerate(lines) if "ollective" in t and _FR_HEAD.match(t)), None)
    if head is not None:
        _fr_block(found, lines, head)
    for i, text in enumerate(lines):
        m = _FR_MISSING_DUMPS.search(text) if "dumps from ranks" in text or "dump files from" in text else None
        ranks = ranks_of(m.group("ranks")) if m else None
        if ranks and f"{AREA}.missing_dump_ranks" not in found.lines:
            found.put(AREA, "missing_dump_ranks", ranks, i)
            found.put(AREA, "source", "flight-recorder", i)
    return found if found.facts else None


def _fr_block(found: Found, lines: list[str], head: int) -> None:
    """The facts of the block whose header is at `head`: its field lines, up to the next header."""
    m = _FR_HEAD.match(lines[head])
    seq = m.group("seq") or m.group("seq_at") or m.group("err_seq")
    found.put(AREA, "source", "flight-recorder", head)
    found.put(AREA, "seq", int(seq), head)
    seen: set[str] = set()
    for i in range(head + 1, min(len(lines), head + 40)):
        if _FR_HEAD.match(lines[i]):
            break
        f = _FR_FIELD.match(lines[i])
        if f and f.group("key") not in seen:
            seen.add(f.group("key"))
            _fr_field(found, f.group("key"), f.group("value"), i)


def _fr_field(found: Found, key: str, value: str, i: int) -> None:
    if key == "group info" and value:
        found.put(AREA, "group", value, i)
    elif key == "collective" and _torch_op(value):
        found.put(AREA, "op", _torch_op(value), i)
    elif key == "collective state" and value:
        found.put(AREA, "state", value, i)
    elif key == "missing ranks" and ranks_of(value) is not None:
        found.put(AREA, "missing_ranks", ranks_of(value), i)
    elif key == "world size" and value.isdigit():
        found.put(AREA, "world_size", int(value), i)
    elif key == "expected ranks" and f"{AREA}.world_size" not in found.lines:
        # 2.5 printed how many ranks were expected; later releases print them, after "world size: ".
        size = int(value) if value.isdigit() else len(ranks_of(value) or [])
        if size:
            found.put(AREA, "world_size", size, i)
    elif key in ("error msg", "error message"):
        culprits = sorted({int(r) for r in _CULPRIT.findall(value)})
        if culprits:
            found.put(AREA, "culprit_ranks", culprits, i)
        kind = _ERROR_TYPE.search(value)
        if kind:
            found.put(AREA, "mismatch", kind.group(1), i)


# ------------------------------------------------------------------------ NCCL RAS (text)

_RAS_START = re.compile(r"^\s*(?:NCCL version \S+ compiled with CUDA|Job summary\s*$|Communicators\.\.\."
                        r"|RAS Monitor Mode)")
_RAS_ROW = re.compile(r"^\s*\d+\s+\d+\s+\d+\s+\d+(?:-\d+)?\s+\d+\s+\d+\s+(?:NOCOMM|INIT|RUNNING|FINALIZE|ABORT)\s+"
                      r"(?P<errors>(?:OK|MISMATCH|ERROR|INCOMPLETE)(?:,(?:MISMATCH|ERROR|INCOMPLETE))*)\s*$")
_RAS_JOB = re.compile(r"^(?P<kind>INCOMPLETE|DEAD|TIMEOUT)\s*$")
_RAS_COMM = re.compile(r"^\s*#\d+-\d+ \((?P<hash>[0-9a-f]+)\) (?P<kind>INCOMPLETE|ERROR|MISMATCH)\s*$")
_RAS_PROCESS = re.compile(r"^\s*Process (?P<pid>\d+) on node (?P<node>\S+) managing GPUs? (?P<gpu>\S.*?)\s*$")
_RAS_PEER_DEAD = re.compile(r"\] PEER(?:_TIMEOUT)?_DEAD: Process (?P<pid>\d+) on node (?P<node>\S+) managing GPUs? "
                            r"(?P<gpu>\S.*?)\s*$")
_RAS_MISSING = re.compile(r"^\s*The missing ranks?: (?P<ranks>[\d,-]+)\s*$")
_RAS_RANK = re.compile(r"^\s*Rank (?P<rank>\d+)(?: has launched up to operation (?P<count>\d+)"
                       r"| (?P<none>has not launched any operations)| has status \S+| reported .+?)? -- "
                       r"(?:GPU \S.*? managed by process (?P<pid>\d+) on node (?P<node>\S+)"
                       r"|\[process information not found\])\s*$")
_RAS_COUNTS = re.compile(r"^\s*Communicator ranks have different (?:(?P<op>\w+) )?operation counts\s*$")
_RAS_ERRORS = re.compile(r"^\s*(?:Initialization|Asynchronous) errors? on \d+ ranks?\s*$")
_RAS_GROUP = re.compile(r"^\s*\d+ ranks (?:have launched up to operation (?P<count>\d+)|(?P<none>have not launched any "
                        r"operations)|have status \S+|reported .+)\s*$")
# NCCL's collective names (ncclFuncStr) as PyTorch's watchdog names the same ops.
_NCCL_OPS = {"AllReduce": "ALLREDUCE", "AllGather": "ALLGATHER", "ReduceScatter": "REDUCE_SCATTER",
             "Broadcast": "BROADCAST", "Reduce": "REDUCE"}


@dataclass
class _Comm:
    """One communicator's section of a RAS status: `#<group>-<n> (<hash>) <KIND>` and its lines."""

    hash: str
    line: int
    mode: str = ""  # which kind of rank lines follow: missing, counts, status, error
    missing: list[tuple[int, int, tuple[str, str] | None]] = field(default_factory=list)  # rank, line, (pid, node)
    counts: dict[int, tuple[int, int]] = field(default_factory=dict)  # rank -> (operations launched, line)
    levels: set[int] = field(default_factory=set)  # every count a group of ranks reached, listed or not
    level: int | None = None  # the count the rank lines that follow have reached
    op: tuple[str, int] | None = None
    error_ranks: list[tuple[int, int]] = field(default_factory=list)


@dataclass
class _Ras:
    comm_errors: dict[str, int] = field(default_factory=dict)  # the table's Errors flags, first line of each
    processes: dict[str, list[tuple[dict, int]]] = field(default_factory=lambda: {"INCOMPLETE": [], "DEAD": []})
    comms: list[_Comm] = field(default_factory=list)
    job_section: str = ""  # INCOMPLETE, DEAD or TIMEOUT: the job-level section being read
    in_comm: bool = False  # reading a communicator's section (it ends at a blank line)
    start: int | None = None  # the output's first line (its version banner, a heading)


def nccl_ras(lines: list[str]) -> Found | None:
    ras = _Ras()
    for i, text in enumerate(lines):
        _ras_line(ras, text, i)
    return _ras_facts(ras)


def _ras_line(ras: _Ras, text: str, i: int) -> None:
    if not text.strip():  # a blank line ends a section
        ras.in_comm, ras.job_section = False, ""
        return
    if ras.start is None and _RAS_START.match(text):
        ras.start = i
    row = _RAS_ROW.match(text)
    if row:
        for flag in row.group("errors").split(","):
            ras.comm_errors.setdefault(flag, i)
        return
    dead = _RAS_PEER_DEAD.search(text) if "PEER" in text else None
    if dead:
        ras.processes["DEAD"].append((_process(dead), i))
        return
    job, comm = _RAS_JOB.match(text), _RAS_COMM.match(text)
    if job or comm or text.startswith(("Errors", "Warnings")):
        ras.job_section = job.group("kind") if job else ""
        if comm:
            mode = {"INCOMPLETE": "missing", "ERROR": "error"}.get(comm.group("kind"), "")
            ras.comms.append(_Comm(comm.group("hash"), i, mode))
        ras.in_comm = bool(comm)
        return
    if ras.comms and not ras.job_section and text.lstrip().startswith("Communicator ranks have different"):
        ras.in_comm = True  # the next collective type's counts: each section ends with a blank line
    if ras.job_section:
        proc = _RAS_PROCESS.match(text) if ras.job_section in ras.processes else None
        if proc:
            ras.processes[ras.job_section].append((_process(proc), i))
    elif ras.in_comm:
        _comm_line(ras.comms[-1], text, i)


def _process(m: re.Match) -> dict:
    return {"pid": int(m.group("pid")), "node": m.group("node"), "gpu": m.group("gpu")}


def _comm_line(comm: _Comm, text: str, i: int) -> None:
    counts = _RAS_COUNTS.match(text)
    if counts:
        # One section per collective type (2.26 on): the first that lists ranks is the one read.
        if comm.counts:
            comm.mode = ""
            return
        name = counts.group("op")
        comm.mode, comm.level, comm.levels = "counts", None, set()
        comm.op = (_NCCL_OPS[name], i) if name in _NCCL_OPS else None
        return
    if "Communicator ranks have different status" in text:
        comm.mode = "status"
        return
    if _RAS_ERRORS.match(text):
        comm.mode = "error"
        return
    missing = _RAS_MISSING.match(text) if comm.mode == "missing" else None
    for rank in (ranks_of(missing.group("ranks")) or []) if missing else []:
        comm.missing.append((rank, i, None))
    group = _RAS_GROUP.match(text) if comm.mode == "counts" else None
    if group and (group.group("count") or group.group("none")):
        comm.level = int(group.group("count") or 0)
        comm.levels.add(comm.level)
    rank = _RAS_RANK.match(text)
    if rank:
        _comm_rank(comm, rank, i)


def _comm_rank(comm: _Comm, rank: re.Match, i: int) -> None:
    r = int(rank.group("rank"))
    if comm.mode == "missing":
        comm.missing.append((r, i, (rank.group("pid"), rank.group("node")) if rank.group("pid") else None))
    elif comm.mode == "counts":
        # A rank alone at its count says the count on its own line; the ranks of a group follow the group's.
        level = 0 if rank.group("none") else int(rank.group("count")) if rank.group("count") else comm.level
        if level is not None:
            comm.counts[r] = (level, i)
            comm.levels.add(level)
    elif comm.mode == "error":
        comm.error_ranks.append((r, i))


def _ras_facts(ras: _Ras) -> Found | None:
    procs = ras.processes
    if not (ras.comm_errors or ras.comms or procs["INCOMPLETE"] or procs["DEAD"]):
        return None
    found = Found()
    first = min([*ras.comm_errors.values(), *(c.line for c in ras.comms), *(i for ps in procs.values() for _, i in ps)])
    first = min(first, ras.start) if ras.start is not None else first
    found.put(AREA, "source", "nccl-ras", first)
    if ras.comm_errors:
        found.put(AREA, "comm_errors", sorted(ras.comm_errors), min(ras.comm_errors.values()))
    for kind, key in (("INCOMPLETE", "unresponsive_processes"), ("DEAD", "dead_processes")):
        if procs[kind]:
            found.put(AREA, key, [p for p, _ in procs[kind]], procs[kind][0][1])
    missing = next((c for c in ras.comms if c.missing), None)
    counted = next((c for c in ras.comms if c.counts and len(c.levels) > 1), None)
    failed = next((c for c in ras.comms if c.error_ranks), None)
    named = missing or counted or failed or (ras.comms[0] if ras.comms else None)
    if named:
        found.put(AREA, "group", named.hash, named.line)
    if missing:
        _missing_facts(found, missing, procs)
    if counted:
        _count_facts(found, counted)
    if failed:
        found.put(AREA, "error_ranks", sorted({r for r, _ in failed.error_ranks}), failed.error_ranks[0][1])
    return found


def _missing_facts(found: Found, comm: _Comm, procs: dict) -> None:
    found.put(AREA, "missing_ranks", sorted({r for r, _, _ in comm.missing}), comm.missing[0][1])
    # A missing rank whose process a job-level section names: RAS's verdict on that process is the rank's.
    for kind, key in (("DEAD", "dead_ranks"), ("INCOMPLETE", "unresponsive_ranks")):
        named = {(str(p["pid"]), p["node"]) for p, _ in procs[kind]}
        hits = [(r, i) for r, i, proc in comm.missing if proc in named]
        if hits:
            found.put(AREA, key, sorted({r for r, _ in hits}), hits[0][1])


def _count_facts(found: Found, comm: _Comm) -> None:
    """Ranks behind (or ahead of) the others in launching the communicator's collectives.

    RAS lists only the outliers' ranks, under the count they reached: those below the highest count
    any group reached are behind, those at it are ahead of a larger group left unlisted."""
    if comm.op:
        found.put(AREA, "op", *comm.op)
    top = max(comm.levels)
    behind = sorted((r, i) for r, (v, i) in comm.counts.items() if v < top)
    ahead = sorted((r, i) for r, (v, i) in comm.counts.items() if v == top)
    if behind:
        found.put(AREA, "behind_ranks", [r for r, _ in behind], min(i for _, i in behind))
    else:
        found.put(AREA, "ahead_ranks", [r for r, _ in ahead], min(i for _, i in ahead))


# ------------------------------------------------------------------------ NCCL RAS (JSON, ncclras -f json)

_JSON_HASH = re.compile(r'^\s*"hash": "(?P<hash>0x[0-9a-f]+)"')
_JSON_RANK = re.compile(r'^\s*"rank": (?P<rank>\d+)')
_JSON_FLAG = re.compile(r'^\s*"(?P<flag>unresponsive|considered_dead)": true')


def nccl_ras_json(lines: list[str]) -> Found | None:
    """The first communicator with missing ranks. Read line by line, not as JSON: NCCL 2.28.9 left a
    comma out of `missing_ranks`, and a paste may be cut short."""
    comm = None  # (hash, line)
    missing: dict[str, list[tuple[int, int]]] = {"missing": [], "unresponsive": [], "considered_dead": []}
    in_missing, rank = False, None
    for i, text in enumerate(lines):
        h = _JSON_HASH.match(text)
        if h:
            if missing["missing"]:
                break
            comm, in_missing = (h.group("hash"), i), False
        elif '"missing_ranks": [' in text:
            in_missing = comm is not None
        elif in_missing and _JSON_RANK.match(text):
            rank = int(_JSON_RANK.match(text).group("rank"))
            missing["missing"].append((rank, i))
        elif in_missing and rank is not None and _JSON_FLAG.match(text):
            missing[_JSON_FLAG.match(text).group("flag")].append((rank, i))
    if comm is None or not missing["missing"]:
        return None
    found = Found()
    found.put(AREA, "source", "nccl-ras", comm[1])
    found.put(AREA, "group", comm[0], comm[1])
    for kind, key in (("missing", "missing_ranks"), ("unresponsive", "unresponsive_ranks"),
                      ("considered_dead", "dead_ranks")):
        if missing[kind]:
            found.put(AREA, key, sorted({r for r, _ in missing[kind]}), missing[kind][0][1])
    return found
