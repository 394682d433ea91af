"""Fleets of many nodes: the one-pass comparison against a reference that rebuilds "all the other
nodes" for every node, the --max-nodes cap and what it reports, snapshots read by forked
processes giving what one process gives, and a fleet past ten thousand nodes read whole.

Snapshots are the fixture snapshot (tests/fixtures/snapshots/base.json) with values varied as
nodes of one cluster differ: drivers, GPU counts and links, ECC and Xid counts, limits."""

from __future__ import annotations

import copy
import json
import random
import statistics
from collections import Counter

import pytest
from conftest import REPO, run_cli

from troubleshoot.fleet import compare as cmp
from troubleshoot.fleet import forked
from troubleshoot.fleet.diagnose import diagnose_fleet, snapshot_files

BASE = json.loads((REPO / "tests" / "fixtures" / "snapshots" / "base.json").read_text())
XID79_LINE = (REPO / "tests/fixtures/machines/xid-79/dmesg.txt").read_text().splitlines()[1]


# ---------------------------------------------------------------- the reference: every node against all the others

def ref_compare(nodes):
    """The comparison as defined: for each node, the list of all the other nodes and their median."""
    if len(nodes) < 2:
        return []
    out = []
    for label, path in cmp.DRIFT:
        out += ref_drift(nodes, label, lambda f, p=path: cmp._scalar(cmp.get(f, p)))
    for lib in sorted({lib for f in nodes.values() for lib in ref_libraries(f)}):
        out += ref_drift(nodes, lib, lambda f, n=lib: ref_libraries(f).get(n))
    for check in (ref_pcie, ref_counters, ref_xids, ref_throttle, ref_shm, ref_nouveau, ref_nofile):
        out += check(nodes)
    return sorted(out, key=lambda x: (x.node, x.kind, x.what))


def ref_libraries(facts):
    libs = cmp.get(facts, "cuda.libraries") or []
    return {x["name"]: str(x["version"]) for x in libs if isinstance(x, dict) and x.get("name") and x.get("version")}


def ref_gpus(facts):
    return [g for g in (cmp.get(facts, "nvml.gpus") or []) if isinstance(g, dict)]


def ref_majority(values):
    """The most frequent value, how often, and whether another is as frequent (then the greatest)."""
    counts = Counter(values.values())
    n = max(counts.values())
    top = [v for v, k in counts.items() if k == n]
    return (top[0] if len(top) == 1 else max(top)), n, len(top) > 1


def ref_split(values):
    """Each value with its nodes, most frequent first (as first seen among as frequent)."""
    counts = Counter(values.values())
    ranked = sorted(dict.fromkeys(values.values()), key=lambda v: -counts[v])
    parts = []
    for v in ranked[:cmp.SPLIT_VALUES]:
        names = [n for n, x in values.items() if x == v]
        more = f" and {len(names) - cmp.SPLIT_NODES} more" if len(names) > cmp.SPLIT_NODES else ""
        parts.append(f"{v} on {', '.join(names[:cmp.SPLIT_NODES])}{more}")
    rest = len(ranked) - cmp.SPLIT_VALUES
    if rest > 0:
        parts.append(f"{rest} other value{'s' if rest != 1 else ''}")
    return "; ".join(parts)


def ref_drift(nodes, label, read):
    values = {n: v for n, v in ((n, read(f)) for n, f in nodes.items()) if v is not None}
    if len(set(map(str, values.values()))) < 2:
        return []
    common, n, tied = ref_majority(values)
    if tied:
        text = f"nodes differ, no majority: {ref_split(values)}"
        return [cmp.Finding(node, "drift", label, v, None, f"{label} {v} ({text})") for node, v in values.items()]
    return [cmp.Finding(node, "drift", label, v, common, f"{label} {v} (others: {common} on {n} node{'s' if n != 1 else ''})")
            for node, v in values.items() if v != common]


def ref_pcie(nodes):
    out, by_gpu = [], {}
    for node, f in nodes.items():
        for i, g in enumerate(ref_gpus(f)):
            w, wmax, gen = g.get("pcie_width_current"), g.get("pcie_width_max"), g.get("pcie_gen_current")
            if isinstance(w, int) and isinstance(gen, int):
                by_gpu.setdefault(g.get("index", i), {})[node] = (w, gen, wmax)
    for idx, per_node in sorted(by_gpu.items()):
        common, _, tied = ref_majority({n: (w, gen) for n, (w, gen, _) in per_node.items()})
        peers = ("no majority; as many nodes at " if tied else "most nodes: ") + f"gen{common[1]} x{common[0]}"
        for node, (w, gen, wmax) in per_node.items():
            if ((w, gen) != common and (w < common[0] or gen < common[1])) or (isinstance(wmax, int) and w < wmax):
                of = f" of x{wmax}" if isinstance(wmax, int) else ""
                out.append(cmp.Finding(node, "outlier", "PCIe link", f"GPU {idx}: gen{gen} x{w}{of}",
                                       f"gen{common[1]} x{common[0]}",
                                       f"GPU {idx} PCIe link at gen{gen} x{w}{of} ({peers})"))
    return out


def ref_more_than_peers(totals, label):
    out = []
    for node, v in totals.items():
        others = [x for n, x in totals.items() if n != node]
        typical = statistics.median(others) if others else 0
        if v > typical:
            out.append(cmp.Finding(node, "outlier", label, v, typical, f"{v} {label} (others: {typical:g})"))
    return out


def ref_counters(nodes):
    out = []
    for label, key in cmp.GPU_COUNTERS:
        totals = {n: sum(g.get(key) or 0 for g in ref_gpus(f) if isinstance(g.get(key) or 0, int)) for n, f in nodes.items()}
        out += ref_more_than_peers(totals, label)
    pending = {n: sum(1 for g in ref_gpus(f) if g.get("remapped_rows_pending") or g.get("remapped_rows_failure"))
               for n, f in nodes.items()}
    return out + ref_more_than_peers(pending, "GPUs with pending or failed row remapping")


def ref_xids(nodes):
    events = {n: [e for e in (cmp.get(f, "kernel.xid_events") or []) if isinstance(e, dict)] for n, f in nodes.items()}
    out = []
    for f in ref_more_than_peers({n: len(ev) for n, ev in events.items()}, "Xid events"):
        codes = sorted({e.get("code") for e in events[f.node] if e.get("code") is not None})
        text = f"{f.value} Xid event{'s' if f.value != 1 else ''} (Xid {', '.join(map(str, codes))}; others: {f.expected:g})"
        out.append(cmp.Finding(f.node, "outlier", "Xid events", codes, f.expected, text))
    return out


def ref_throttle(nodes):
    reasons = {n: {r for g in ref_gpus(f) for r in (g.get("throttle_reasons") or []) if r not in cmp.BENIGN_THROTTLE}
               for n, f in nodes.items()}
    out = []
    for node, rs in reasons.items():
        for r in sorted(rs):
            have = sum(1 for x in reasons.values() if r in x)
            if have * 2 < len(nodes) + (len(nodes) == 2):
                out.append(cmp.Finding(node, "outlier", "throttle reason", r, None,
                                       f"GPU clocks throttled by {r} (on {have} of {len(nodes)} nodes)"))
    return out


def ref_shm(nodes):
    sizes = {n: v for n, v in ((n, cmp.get(f, "io.shm_size_mib")) for n, f in nodes.items()) if isinstance(v, (int, float))}
    out = []
    for node, v in sizes.items():
        others = [x for n, x in sizes.items() if n != node]
        if others and v < 0.5 * statistics.median(others):
            m = statistics.median(others)
            out.append(cmp.Finding(node, "outlier", "/dev/shm", v, m, f"/dev/shm {v:g} MiB (others: {m:g} MiB)"))
    return out


def ref_nouveau(nodes):
    loaded = {n: cmp.get(f, "kernel.modules.nouveau") for n, f in nodes.items()}
    if sum(1 for v in loaded.values() if v is True) * 2 >= len(loaded):
        return []
    return [cmp.Finding(n, "outlier", "nouveau", True, False, "nouveau module loaded (not on the others)")
            for n, v in loaded.items() if v is True]


def ref_nofile(nodes):
    limits = {n: v for n, v in ((n, cmp.get(f, "io.nofile_soft")) for n, f in nodes.items()) if isinstance(v, int)}
    if len(limits) < 2:
        return []
    common, _, tied = ref_majority(limits)
    peers = ("no majority; as many nodes at " if tied else "most nodes: ") + str(common)
    return [cmp.Finding(n, "outlier", "open files limit", v, common, f"open files limit {v} ({peers})")
            for n, v in limits.items() if v < common]


# ---------------------------------------------------------------- generated fleets

def varied_node(rnd: random.Random, i: int, pools: int) -> dict:
    """One node of a cluster whose values come from small pools (`pools` values each), so that
    ties, majorities and fleets without one all occur."""
    def pick(*values):
        return rnd.choice(values[:pools])

    snap = copy.deepcopy(BASE)
    snap["host"]["hostname"] = f"node{i:03d}"
    nvml, kernel, io = snap["nvml"], snap["kernel"], snap["io"]
    nvml["driver_version"] = pick("555.42.02", "550.54.14", "535.161.08", None)
    kernel["nvidia_module_version"] = pick("555.42.02", "550.54.14", None)
    snap["frameworks"]["torch"]["version"] = pick("2.4.1+cu124", "2.3.0+cu121", "2.4.1+cu124")
    snap["cuda"]["libraries"][0]["version"] = pick("12.4.127", "12.1.105", "12.4.127")
    if rnd.random() < 0.3:
        snap["cuda"]["libraries"].append({"name": "libnccl", "version": pick("2.21.5", "2.18.1"), "path": "/x", "source": "ldconfig"})
    gpu = nvml["gpus"][0]
    nvml["gpus"] = [dict(gpu, index=k, pcie_width_current=pick(16, 8, 4), pcie_gen_current=pick(4, 3, 1),
                         pcie_width_max=pick(16, None), ecc_uncorrected_volatile=pick(0, 2, 0, 7),
                         remapped_rows_uncorrectable=pick(0, 1), remapped_rows_pending=rnd.random() < 0.1,
                         throttle_reasons=rnd.sample(["gpu_idle", "hw_slowdown", "sw_power_cap", "sw_thermal_slowdown"],
                                                     rnd.randrange(3)))
                    for k in range(pick(1, 2, 8))]
    kernel["xid_events"] = [{"code": pick(79, 48, 119), "message": "x", "line": XID79_LINE}
                            for _ in range(pick(0, 1, 0, 3))]
    kernel["modules"]["nouveau"] = rnd.random() < 0.2
    io["shm_size_mib"] = pick(257948, 64, 257948.0, 128.5)
    io["nofile_soft"] = pick(1048576, 1024, 65536, None)
    return snap


def generated_fleet(seed: int, n: int, pools: int) -> dict[str, dict]:
    rnd = random.Random(seed)
    return {f"node{i:03d}": varied_node(rnd, i, pools) for i in range(n)}


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 8, 25, 80])
@pytest.mark.parametrize("pools", [1, 2, 4])
def test_one_pass_comparison_finds_what_comparing_each_node_with_all_others_finds(n, pools):
    for seed in range(6):
        nodes = generated_fleet(seed * 100 + n, n, pools)
        # repr: the same findings, and the same types in them (a median of 2 and 3 is 2.5, of 4 and 4 is 4.0)
        assert repr(cmp.compare(nodes)) == repr(ref_compare(nodes))


def test_a_tie_singles_out_no_node_whichever_is_seen_first():
    a, b = copy.deepcopy(BASE), copy.deepcopy(BASE)
    b["nvml"]["driver_version"] = "550.54.14"
    for two in ({"n1": a, "n2": b}, {"n1": b, "n2": a}):
        drift = [(f.node, f.what, f.expected) for f in cmp.compare(two) if f.kind == "drift"]
        assert drift == [("n1", "driver", None), ("n2", "driver", None)]
    four = {"n1": b, "n2": a, "n3": b, "n4": a}  # 2 against 2: no majority
    assert {f.node for f in cmp.compare(four) if f.what == "driver"} == {"n1", "n2", "n3", "n4"}
    assert repr(cmp.compare(four)) == repr(ref_compare(four))


def test_no_majority_all_values_differ():
    nodes = {}
    for i, driver in enumerate(["555.42.02", "550.54.14", "535.161.08", "570.86.10", "580.65.06"]):
        nodes[f"n{i}"] = copy.deepcopy(BASE)
        nodes[f"n{i}"]["nvml"]["driver_version"] = driver
    drift = [f for f in cmp.compare(nodes) if f.what == "driver"]
    assert [f.node for f in drift] == ["n0", "n1", "n2", "n3", "n4"] and {f.expected for f in drift} == {None}
    assert drift[0].text == ("driver 555.42.02 (nodes differ, no majority: 555.42.02 on n0; 550.54.14 on n1; "
                             "535.161.08 on n2; 570.86.10 on n3; 1 other value)")
    assert repr(cmp.compare(nodes)) == repr(ref_compare(nodes))


@pytest.mark.parametrize("seed", range(40))
def test_median_of_the_others_from_one_sort(seed):
    rnd = random.Random(seed)
    values = [rnd.choice([0, 1, 1.0, 2, 3, 3.0, 7, 12.5, 64]) for _ in range(rnd.randrange(1, 12))]
    want = [statistics.median(values[:i] + values[i + 1:]) if len(values) > 1 else 0 for i in range(len(values))]
    assert repr(cmp.medians_of_others(values)) == repr(want)


def test_the_comparison_keeps_a_few_values_per_node_not_the_snapshot():
    kept = cmp.extract(BASE)
    assert kept.versions[0] == "555.42.02" and kept.nofile == 1048576 and kept.links == {0: (16, 4, 16)}
    assert not any(isinstance(getattr(kept, name), dict) and len(getattr(kept, name)) > 8 for name in kept.__slots__)


# ---------------------------------------------------------------- a folder of snapshots

def write_fleet(folder, n: int, odd: bool = True) -> dict[str, str]:
    """n snapshots of the fixture with their own host names; with `odd`, three odd nodes (an
    older driver, uncorrectable ECC errors and an Xid 79, a lower open-files limit). {node: odd}."""
    folder.mkdir()
    odd_nodes = {f"gpu-{n // 4:05d}": "driver", f"gpu-{n // 2:05d}": "xid", f"gpu-{3 * n // 4:05d}": "nofile"} if odd else {}
    for i in range(n):
        snap = copy.deepcopy(BASE)
        name = f"gpu-{i:05d}"
        snap["host"]["hostname"] = name
        what = odd_nodes.get(name)
        if what == "driver":
            snap["nvml"].update(driver_version="550.54.14", cuda_driver_version="12.4")
        elif what == "xid":
            snap["nvml"]["gpus"][0]["ecc_uncorrected_volatile"] = 12
            snap["kernel"]["xid_events"] = [{"code": 79, "pci": "0000:03:00", "pid": None, "process": None,
                                             "message": "GPU has fallen off the bus.",
                                             "line": XID79_LINE.split("kernel: ", 1)[1]}]
        elif what == "nofile":
            snap["io"]["nofile_soft"] = 1024
        (folder / f"{name}.json").write_text(json.dumps(snap))
    return odd_nodes


def test_max_nodes_reads_the_first_snapshots_and_the_json_says_how_many_were_left_out(tmp_path):
    write_fleet(tmp_path / "snaps", 6, odd=False)
    p = run_cli("fleet", "diagnose", str(tmp_path / "snaps"), "--max-nodes", "4", "--format", "json")
    assert p.returncode == 0, p.stderr.decode()
    doc = json.loads(p.stdout)
    assert doc["nodes"] == ["gpu-00000", "gpu-00001", "gpu-00002", "gpu-00003"]
    said = "--max-nodes 4: 2 more snapshots left out (gpu-00004.json and after it, in name order)"
    assert doc["warnings"] == [said]
    assert said in p.stderr.decode()


def test_max_nodes_in_the_text_report(tmp_path):
    write_fleet(tmp_path / "snaps", 3, odd=False)
    out = run_cli("fleet", "diagnose", str(tmp_path / "snaps"), "--max-nodes", "2").stdout.decode()
    assert out.endswith("2 nodes, 2 without findings\n1 more node left out (--max-nodes 2)\n")
    assert "gpu-00002" not in out


@pytest.mark.parametrize("option", ["--max-nodes", "--jobs"])
def test_max_nodes_and_jobs_must_be_positive(tmp_path, option):
    write_fleet(tmp_path / "snaps", 2, odd=False)
    p = run_cli("fleet", "diagnose", str(tmp_path / "snaps"), option, "0")
    assert p.returncode == 2 and p.stderr.decode() == f"troubleshoot: error: {option} must be at least 1\n"


@pytest.fixture(scope="module")
def ruleset():
    from troubleshoot import pipeline

    return pipeline.load_rules()


@pytest.fixture
def forking(monkeypatch):
    """Snapshots read by forked processes however few they are and whatever threads the test
    runner keeps (idle: they hold no lock a child needs); the list of the children started."""
    from troubleshoot.scan import children

    started: list = []
    start = children.start

    def counted(work, into):
        start(work, into)
        started.append(into[-1])

    monkeypatch.setattr(children, "forkable", lambda: True)
    monkeypatch.setattr(children, "start", counted)
    monkeypatch.setattr(forked, "MIN_PER_JOB", 1)
    return started


def fleet_with_broken_files(folder) -> None:
    write_fleet(folder, 12)
    (folder / "gpu-00005.json").write_text("{not json")
    (folder / "gpu-00010.json").write_text(json.dumps({"schema": 1, "host": {"hostname": "gpu-00010"}}))


def same_report(a, b) -> None:
    assert (a.nodes, a.findings, a.per_node, a.warnings, a.left_out) == (b.nodes, b.findings, b.per_node, b.warnings,
                                                                          b.left_out)


def test_snapshots_read_by_forked_processes_give_what_one_process_gives(tmp_path, ruleset, forking):
    fleet_with_broken_files(tmp_path / "snaps")
    one = diagnose_fleet(tmp_path / "snaps", ruleset, jobs=1)
    three = diagnose_fleet(tmp_path / "snaps", ruleset, jobs=3)
    assert len(forking) == 2  # this process read the first third
    same_report(one, three)
    assert {f.node for f in three.findings} == {"gpu-00003", "gpu-00006", "gpu-00009"}
    assert [d.symptom for d in three.per_node["gpu-00006"]] == [d.symptom for d in one.per_node["gpu-00006"]] != []
    assert any(r is three.per_node["gpu-00006"][0].rule for r in ruleset.rules)  # the rule set's own, not a copy
    assert any("gpu-00005.json" in w for w in three.warnings) and "gpu-00005" not in three.nodes


def test_a_forked_reader_that_fails_leaves_its_snapshots_to_this_process(tmp_path, ruleset, forking, monkeypatch):
    fleet_with_broken_files(tmp_path / "snaps")
    one = diagnose_fleet(tmp_path / "snaps", ruleset, jobs=1)

    def fails(send, **_):
        send(b"half a report")
        raise RuntimeError("a reader that stops")

    monkeypatch.setattr(forked, "_child", fails)
    same_report(one, diagnose_fleet(tmp_path / "snaps", ruleset, jobs=4))
    assert len(forking) == 3


def test_a_snapshot_is_not_kept_once_read_unless_logs_need_it(tmp_path, ruleset):
    write_fleet(tmp_path / "snaps", 4)
    read = forked.read(snapshot_files(tmp_path / "snaps"), ruleset, keep_facts=False, jobs=1)
    assert read.facts == {} and sorted(read.compared) == read.loaded == [f"gpu-{i:05d}" for i in range(4)]
    assert all(isinstance(v, cmp.NodeFacts) for v in read.compared.values())


@pytest.mark.slow
def test_ten_thousand_and_one_snapshots_are_all_read_and_the_three_odd_nodes_found(tmp_path):
    odd = write_fleet(tmp_path / "snaps", 10_001)
    p = run_cli("fleet", "diagnose", str(tmp_path / "snaps"), "--format", "json", timeout=900)
    assert p.returncode == 0, p.stderr.decode()[-2000:]
    doc = json.loads(p.stdout)
    assert len(doc["nodes"]) == 10_001 and doc["warnings"] == []
    assert {f["node"] for f in doc["findings"]} == set(odd)
    assert {f["what"] for f in doc["findings"] if f["node"] == "gpu-05000"} == {"uncorrectable ECC errors", "Xid events"}
