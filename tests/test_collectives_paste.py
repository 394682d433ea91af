"""Collective-hang reports pasted into a log are facts of the log's job: PyTorch's flight-recorder
analyzer (fr_trace / torchfrtrace) and NCCL's RAS status (ncclras, as text, JSON and monitor
events) name the collective and the ranks that are missing, dead, unresponsive or behind."""

import random

import pytest

from conftest import REPO
from troubleshoot import paste
from troubleshoot.paste import collectives
from troubleshoot.paste.needles import needles_in
from troubleshoot.paste.parsers import PARSERS

FIXTURES = REPO / "tests" / "fixtures" / "collectives"

# The entries these parsers have in troubleshoot.paste.parsers.PARSERS, with their needles.
COLLECTIVE_PARSERS = tuple((parse, needles) for parse, needles in PARSERS if parse.module == "collectives")


@pytest.fixture
def registered():
    """`paste.read` reads these reports: the parsers are registered."""
    assert len(COLLECTIVE_PARSERS) == 3


def lines_of(name: str) -> list[str]:
    return (FIXTURES / name).read_text().split("\n")


FR = "flight-recorder"
RAS = "nccl-ras"

# fixture -> (parser, every collectives fact it shows, {fact: the line that shows it})
EXPECTED = {
    "fr-2.5-tutorial-not-all-joining.txt": (collectives.flight_recorder, {
        "source": FR, "seq": 5, "group": "0:default_pg", "op": "ALLREDUCE", "missing_ranks": [1],
        "world_size": 2, "state": "scheduled"},
        {"seq": "Not all ranks joining collective 5 at entry 4", "missing_ranks": "missing ranks: {1}",
         "world_size": "expected ranks: 2"}),
    "fr-pr140969-not-all-joining.txt": (collectives.flight_recorder, {
        "source": FR, "seq": 31117, "group": "0:default_pg", "op": "ALLREDUCE", "missing_ranks": [3, 4, 5, 6, 7],
        "world_size": 8, "state": "scheduled"},
        {"seq": "Not all ranks joining collective: sequence number: 31117",
         "missing_ranks": "missing ranks: {3, 4, 5, 6, 7}", "world_size": "world size: 8"}),
    "fr-torchcomms-tutorial-not-all-joining.txt": (collectives.flight_recorder, {
        "source": FR, "seq": 4, "group": "main_comm:gloo", "op": "ALLREDUCE", "missing_ranks": [1],
        "world_size": 2, "state": "scheduled"},
        {"seq": "Not all ranks joining collective, sequence number: 4", "group": "group info: main_comm:gloo"}),
    "fr-issue140563-size-mismatch.txt": (collectives.flight_recorder, {
        "source": FR, "seq": 39, "group": "0:default_pg", "op": "ALLREDUCE", "world_size": 128,
        "state": "scheduled", "culprit_ranks": [22, 110], "mismatch": "SIZE_OR_SYNTAX_MISMATCH"},
        {"seq": "Collective 39 at entry 38 errors", "culprit_ranks": "error msg: Culprit rank 22;"}),
    "fr-from-source-has-errors.txt": (collectives.flight_recorder, {
        "source": FR, "seq": 39, "group": "0:default_pg", "op": "ALLREDUCE", "world_size": 128,
        "state": "scheduled", "culprit_ranks": [22], "mismatch": "SIZE_OR_SYNTAX_MISMATCH"},
        {"seq": "Collective sequence number: 39 has errors", "mismatch": "error msg: Culprit rank 22;"}),
    "fr-from-source-missing-dumps.txt": (collectives.flight_recorder, {
        "source": FR, "missing_dump_ranks": [2, 3]},
        {"missing_dump_ranks": "AssertionError: Missing dump files from ranks {2, 3}"}),
    "fr-from-source-missed-dumps.txt": (collectives.flight_recorder, {
        "source": FR, "missing_dump_ranks": [2, 3]},
        {"missing_dump_ranks": "missed FR dumps from ranks ({2, 3})"}),
    "ras-2.24-docs-ok.txt": (collectives.nccl_ras, {
        "source": RAS, "comm_errors": ["OK"]},
        {"source": "Job summary", "comm_errors": "RUNNING      OK"}),
    "ras-2.24-docs-mismatch-opcounts.txt": (collectives.nccl_ras, {
        "source": RAS, "comm_errors": ["MISMATCH"], "group": "27a079b828ff1a75", "behind_ranks": [0, 2, 3, 4, 5, 7]},
        {"group": "#0-0 (27a079b828ff1a75) MISMATCH", "behind_ranks": "Rank 0 -- GPU 0 managed by process 483072"}),
    "ras-2.24-docs-status-mismatch.txt": (collectives.nccl_ras, {
        "source": RAS, "comm_errors": ["MISMATCH", "OK"], "group": "9e17999afaa87dbb"},
        {"comm_errors": "FINALIZE  MISMATCH"}),
    "ras-2.24-docs-incomplete-timeout.txt": (collectives.nccl_ras, {
        "source": RAS, "comm_errors": ["INCOMPLETE"], "group": "cf264af53edbe986", "missing_ranks": [21],
        "unresponsive_processes": [{"pid": 3487984, "node": "172.16.64.213", "gpu": "5"}]},
        {"source": "Communicators... (2.05s)", "missing_ranks": "The missing rank: 21",
         "unresponsive_processes": "Process 3487984 on node 172.16.64.213 managing GPU 5"}),
    "ras-2.24-docs-dead.txt": (collectives.nccl_ras, {
        "source": RAS, "group": "cf264af53edbe986", "missing_ranks": [21],
        "dead_processes": [{"pid": 3487984, "node": "172.16.64.213", "gpu": "5"}]},
        {"dead_processes": "Process 3487984 on node 172.16.64.213 managing GPU 5"}),
    "ras-2.26.2-issue1911-mismatch-allgather.txt": (collectives.nccl_ras, {
        "source": RAS, "comm_errors": ["MISMATCH"], "group": "fa93daea854b060b", "op": "ALLGATHER",
        "ahead_ranks": [12, 13]},
        {"source": "NCCL version 2.26.2 compiled with CUDA 12.6",
         "op": "Communicator ranks have different AllGather operation counts",
         "ahead_ranks": "Rank 12 -- GPU 4 managed by process 323032 on node 10.137.190.124"}),
    "ras-2.26.2-issue1730-ok-then-watchdog.txt": (collectives.nccl_ras, {
        "source": RAS, "comm_errors": ["OK"]},
        {"comm_errors": "RUNNING      OK"}),
    "ras-2.27.3-issue1762-incomplete.txt": (collectives.nccl_ras, {
        "source": RAS, "comm_errors": ["INCOMPLETE", "MISMATCH"], "group": "b3398875b8b2a063", "missing_ranks": [1],
        "unresponsive_ranks": [1], "unresponsive_processes": [{"pid": 60004, "node": "10.4.109.13", "gpu": "0"}]},
        {"source": "NCCL version 2.27.3 compiled with CUDA 12.9",
         "unresponsive_ranks": "Rank 1 -- GPU 0 managed by process 60004 on node 10.4.109.13"}),
    "ras-2.29-docs-json.json": (collectives.nccl_ras_json, {
        "source": RAS, "group": "0xae94423cfbb2ef4a", "missing_ranks": [1], "unresponsive_ranks": [1]},
        {"group": '"hash": "0xae94423cfbb2ef4a"', "unresponsive_ranks": '"unresponsive": true'}),
    "ras-2.29-docs-monitor-peer-dead.txt": (collectives.nccl_ras, {
        "source": RAS, "dead_processes": [{"pid": 1524345, "node": "172.16.64.245", "gpu": "1"}]},
        {"source": "RAS Monitor Mode", "dead_processes": "PEER_DEAD: Process 1524345"}),
    "ras-2.30.7-walkthrough-straggler.txt": (collectives.nccl_ras, {
        "source": RAS, "comm_errors": ["MISMATCH"], "group": "78db921d1c117b4a", "op": "ALLREDUCE",
        "behind_ranks": [7]},
        {"behind_ranks": "Rank 7 has launched up to operation 60"}),
    "ras-2.30.7-walkthrough-incomplete.txt": (collectives.nccl_ras, {
        "source": RAS, "comm_errors": ["INCOMPLETE"], "group": "1bdb83b038775869", "missing_ranks": [7],
        "unresponsive_ranks": [7], "unresponsive_processes": [{"pid": 3748990, "node": "node1", "gpu": "3"}]},
        {"missing_ranks": "Rank 7 -- GPU 3 managed by process 3748990 on node node1"}),
    "ras-from-source-async-error.txt": (collectives.nccl_ras, {
        "source": RAS, "group": "cf264af53edbe986", "error_ranks": [21]},
        {"error_ranks": "Rank 21 reported Remote process error"}),
    "ras-2.30.7-walkthrough-dead.txt": (collectives.nccl_ras, {
        "source": RAS, "dead_processes": [{"pid": 3748990, "node": "node1", "gpu": "3"}]},
        {"source": "Communicators... (0.002s)"}),
}


def test_every_fixture_is_expected():
    assert sorted(EXPECTED) == sorted(p.name for p in FIXTURES.iterdir() if p.name != "SOURCE.md")


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_gives_its_facts(name):
    parse, facts, shown_by = EXPECTED[name]
    lines = lines_of(name)
    found = parse(lines)
    assert found is not None
    assert found.facts == {"collectives": {"available": True, **facts}}
    assert set(found.lines) == {f"collectives.{k}" for k in facts}
    for key, text in shown_by.items():
        assert text in lines[found.lines[f"collectives.{key}"]], key


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_read_from_a_log_gives_the_same_facts(name, registered):
    """Through `paste.read`, as part of a job's log: the needles let the parser run, and each
    fact's evidence is its line (1-based, as the log numbers it)."""
    _, facts, shown_by = EXPECTED[name]
    before = ["[rank0]:[W603 17:40:01.000000000 ProcessGroupNCCL.cpp:1000] step 1200 loss 2.31", ""]
    text = "\n".join(before) + "\n" + (FIXTURES / name).read_text()
    got = paste.read(text)
    assert got.facts["collectives"] == {"available": True, **facts}
    for key, shown in shown_by.items():
        number, line = got.lines[f"collectives.{key}"]
        assert shown in line and text.split("\n")[number - 1].strip() == line


def test_each_fixture_holds_a_needle_of_its_parser():
    by_name = {parse.__name__: needles for parse, needles in COLLECTIVE_PARSERS}
    for name, (parse, _, _) in EXPECTED.items():
        text = (FIXTURES / name).read_text()
        assert needles_in(text, by_name[parse.__name__]), name


def _repository_texts() -> list[str]:
    """Every text fixture and rule example of the repository: logs these parsers must read right,
    or leave alone."""
    from troubleshoot.engine.ruleset import load_ruleset

    texts = [p.read_text(errors="replace") for p in sorted((REPO / "tests" / "fixtures").rglob("*"))
             if p.is_file() and p.suffix in (".txt", ".log", ".out", ".json") and p.stat().st_size < 4 << 20]
    for rule in load_ruleset(use_config=False).rules:
        texts += list(rule.examples.match) + list(rule.examples.no_match)
    return texts


def test_whatever_a_parser_reads_its_needles_let_it_run():
    """The literal guard never hides a report: every text any of these parsers reads facts from
    holds one of that parser's needles; and only the collective fixtures (some of them also the
    examples of the rules that read these facts) give collective facts."""
    readers = 0
    for text in dict.fromkeys(t.strip() + "\n" for t in _repository_texts()):  # a rule example is its fixture
        lines = [t.rstrip("\r") for t in text.split("\n")]
        for parse, needles in COLLECTIVE_PARSERS:
            if parse(lines) is not None:
                readers += 1
                assert needles_in(text, needles), (parse.__name__, text[:200])
    assert readers == len(EXPECTED)


@pytest.mark.parametrize("text,ranks", [
    ("{1}", [1]), ("{3, 4, 5, 6, 7}", [3, 4, 5, 6, 7]), ("set()", []), ("[0, 1]", [0, 1]), ("(2, 0)", [0, 2]),
    ("21", [21]), ("21,22", [21, 22]), ("0-3,5", [0, 1, 2, 3, 5]), ("7-8", [7, 8]), (" {0, 2} ", [0, 2]),
    ("{a, b}", None), ("3-1", None), ("0-", None), ("-3", None), ("1,,2", None), ("", None),
    ("0-4294967295", None), ("{1, 2", [1, 2]), ("ranks 1", None),
])
def test_rank_lists_as_printed(text, ranks):
    assert collectives.ranks_of(text) == ranks


@pytest.mark.parametrize("profiling_name,op", [
    ("nccl:all_reduce", "ALLREDUCE"), ("nccl:_all_gather_base", "_ALLGATHER_BASE"),
    ("nccl:reduce_scatter", "REDUCE_SCATTER"), ("nccl:send 1->2", "SEND"), ("xccl:all_to_all_single", "ALLTOALL_BASE"),
    ("nccl:new_op", "NEW_OP"), ("nccl:", None), ("nccl:all-reduce", None),
])
def test_analyzer_op_names_read_as_the_watchdog_names_them(profiling_name, op):
    assert collectives._torch_op(profiling_name) == op


def test_first_block_of_several_wins():
    # The analyzer reports each process group's first mismatch first; what follows in that group
    # is its consequence.
    first = lines_of("fr-torchcomms-tutorial-not-all-joining.txt")
    second = lines_of("fr-pr140969-not-all-joining.txt")
    found = collectives.flight_recorder(first + second)
    assert found.facts["collectives"]["seq"] == 4 and found.facts["collectives"]["missing_ranks"] == [1]
    assert found.lines["collectives.missing_ranks"] == 4


def test_dead_process_of_a_missing_rank_makes_the_rank_dead():
    # RAS 2.26+ names each missing rank's process; one the DEAD section names is a dead rank.
    lines = lines_of("ras-2.27.3-issue1762-incomplete.txt")
    at = lines.index("INCOMPLETE")
    dead = lines[:at] + ["DEAD", "  1 job process is considered dead (unreachable via the RAS network)",
                         lines[at + 2], ""] + lines[at + 4:]
    facts = collectives.nccl_ras(dead).facts["collectives"]
    assert facts["dead_ranks"] == [1] and "unresponsive_ranks" not in facts
    assert facts["dead_processes"] == [{"pid": 60004, "node": "10.4.109.13", "gpu": "0"}]


STRAGGLER_RANK = "  Rank 7 has launched up to operation 60 -- GPU 3 managed by process 1650386 on node node1"


def test_ranks_behind_on_one_collective_type_are_not_compared_with_another():
    # From 2.26 RAS breaks the counts down per collective type, one section each, a blank line
    # after each: the first section that lists ranks is read, whatever the later ones say.
    lines = lines_of("ras-2.30.7-walkthrough-straggler.txt")[:-1]
    later = ["", "  Communicator ranks have different AllGather operation counts",
             "  7 ranks have launched up to operation 3", STRAGGLER_RANK, ""]
    facts = collectives.nccl_ras(lines + later).facts["collectives"]
    assert facts["op"] == "ALLREDUCE" and facts["behind_ranks"] == [7]
    # A first section that names no rank (every group too large to list) leaves the next one to read.
    at = lines.index("  Communicator ranks have different AllReduce operation counts")
    unnamed = ["  Communicator ranks have different AllGather operation counts",
               "  4 ranks have launched up to operation 10", "  4 ranks have launched up to operation 11", ""]
    facts = collectives.nccl_ras(lines[:at] + unnamed + lines[at:]).facts["collectives"]
    assert facts["op"] == "ALLREDUCE" and facts["behind_ranks"] == [7]


@pytest.mark.parametrize("text", [
    "",
    "step 1 loss 2.3\n" * 50,
    "Group     Comms     Nodes     Ranks     Ranks     Ranks    Status  Errors\n",  # a header without rows
    "DEAD\nTIMEOUT\nINCOMPLETE\n",
    "missing ranks: {1}\ngroup info: 0:default_pg\n",  # field lines without the analyzer's header
    "Not all ranks joining collective for the third time today\n",
    '{"missing_ranks": [\n  {"rank": 1}\n]}\n',  # no communicator hash before it
    "[2025-12-19 13:07:07] PEER_DEAD: 10.0.0.1<40000>\n",  # a peer RAS could not name
    "Missing dump files from ranks {a}\n",
])
def test_other_text_gives_no_facts(text):
    lines = text.split("\n")
    assert all(parse(lines) is None for parse, _ in COLLECTIVE_PARSERS)


def test_garbled_and_cut_reports_never_raise():
    rnd = random.Random(20240606)
    reports = [(FIXTURES / name).read_text().split("\n") for name in sorted(EXPECTED)]
    trials = []
    for lines in reports:
        trials += [lines[:n] for n in range(len(lines))]  # cut after any line
        trials += [[t[: rnd.randrange(len(t) + 1)] for t in lines]]  # each line cut anywhere
        trials += [rnd.sample(lines, len(lines)) for _ in range(5)]  # lines out of order
    alphabet = "0123456789-,{}[]() #:abcdefINCOMPLETERankProcess\t"
    for _ in range(300):
        line = "".join(rnd.choice(alphabet) for _ in range(rnd.randrange(80)))
        trials.append([line, rnd.choice(rnd.choice(reports)), line])
    for lines in trials:
        for parse, _ in COLLECTIVE_PARSERS:
            found = parse(lines)
            assert found is None or found.facts["collectives"]["source"] in (FR, RAS)
