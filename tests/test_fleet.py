"""Many logs and many nodes: first failure vs consequences, fleet drift/outliers, the example
Kubernetes manifest. Logs are real public lines (tests/fixtures/ranks/SOURCE.md); snapshots are
the healthy fixture snapshot edited with values from the recorded machines in tests/fixtures/machines."""

from __future__ import annotations

import copy
import json
import shlex
import shutil
import sys

import pytest
import yaml

from conftest import REPO, run_cli
from fakes.slurm import fake_slurm
from troubleshoot.fleet import collect

RANKS = REPO / "tests" / "fixtures" / "ranks"
BASE = json.loads((REPO / "tests" / "fixtures" / "snapshots" / "base.json").read_text())
# The Xid 79 line as recorded in tests/fixtures/machines/xid-79/dmesg.txt, on this node's GPU address.
XID79_LINE = (REPO / "tests/fixtures/machines/xid-79/dmesg.txt").read_text().splitlines()[1]


def diagnose_json(*args):
    p = run_cli("diagnose", "--no-probe", "--format", "json", *args)
    assert p.returncode == 0, p.stderr.decode()
    return json.loads(p.stdout)


def check_first_failure(doc, node):
    top, second = doc["diagnoses"][0], doc["diagnoses"][1]
    assert top["symptom"] == "cuda-oom" and top["ranks"] == [3] and top["nodes"] == [node]
    assert top["first_seen"] and "0225 07:05:33" in top["first_seen"]
    assert second["symptom"] == "nccl-timeout" and second["ranks"] == [0, 1, 2]
    assert any("consequence of cuda-oom" in n for n in second["notes"])
    assert doc["summary"].startswith(f"rank 3 on node {node} failed first with cuda-oom")
    assert "3 ranks then timed out in NCCL" in doc["summary"]
    assert doc["schema"] == 1


def test_per_rank_files_give_the_failing_rank_first(tmp_path):
    doc = diagnose_json("--log", str(RANKS / "per-rank"))
    check_first_failure(doc, "gpu-02")
    top = doc["diagnoses"][0]
    assert top["files"] == [str(RANKS / "per-rank" / "job.gpu-02.rank3.log")]
    assert top["evidence"][0]["file"] == top["files"][0] and top["evidence"][0]["line"] == 3
    assert doc["diagnoses"][1]["nodes"] == ["gpu-01", "gpu-02"] and len(doc["diagnoses"][1]["files"]) == 3
    # The same through a glob and through several --log
    glob = diagnose_json("--log", str(RANKS / "per-rank" / "job.*.rank*.log"))
    many = diagnose_json(*[a for f in sorted((RANKS / "per-rank").iterdir()) for a in ("--log", str(f))])
    for other in (glob, many):
        assert [(d["rule"], d["ranks"]) for d in other["diagnoses"]] == [(d["rule"], d["ranks"]) for d in doc["diagnoses"]]


def test_srun_label_merged_log_gives_the_same_with_original_line_numbers():
    doc = diagnose_json("--log", str(RANKS / "merged" / "slurm-4242.out"))
    check_first_failure(doc, "liangxianchen-funasr-15wh-train-lxc0-w-0")  # the host its NCCL line names
    top = doc["diagnoses"][0]
    lines = (RANKS / "merged" / "slurm-4242.out").read_text().splitlines()
    assert "OutOfMemoryError" in lines[top["first_line"] - 1] and lines[top["first_line"] - 1].startswith("3: ")
    assert "4 ranks" in doc["source"]


def test_text_report_leads_with_the_first_failure():
    p = run_cli("diagnose", "--no-probe", "--log", str(RANKS / "per-rank"))
    out = p.stdout.decode()
    assert out.splitlines()[0].startswith("rank 3 on node gpu-02 failed first with cuda-oom")
    assert "seen on rank 3 · node gpu-02" in out


def test_one_log_keeps_the_single_log_contract():
    doc = diagnose_json("--log", str(RANKS / "per-rank" / "job.gpu-02.rank3.log"))
    top = doc["diagnoses"][0]
    assert top["symptom"] == "cuda-oom" and top["ranks"] == [3] and top["nodes"] == ["gpu-02"]
    assert doc["summary"] is None and doc["logs"] == 1 and doc["lines"] == 3


def node_snapshots(folder):
    """Four nodes of one cluster: one with an older driver, one GPU at x8 of x16, one Xid 79."""
    folder.mkdir()
    nodes = {f"gpu-0{i}": copy.deepcopy(BASE) for i in range(1, 6)}
    for name, snap in nodes.items():
        snap["host"]["hostname"] = name
    # tests/fixtures/machines/pcie-degraded/nvidia-smi-q.txt: Driver Version 550.54.14, CUDA 12.4
    nodes["gpu-02"]["nvml"].update(driver_version="550.54.14", cuda_driver_version="12.4")
    nodes["gpu-02"]["kernel"]["nvidia_module_version"] = "550.54.14"
    nodes["gpu-03"]["nvml"]["gpus"][0].update(pcie_width_current=8, pcie_width_max=16)
    nodes["gpu-04"]["kernel"]["xid_events"] = [{
        "code": 79, "pci": "0000:03:00", "pid": None, "process": None,
        "message": "GPU has fallen off the bus.", "line": XID79_LINE.split("kernel: ", 1)[1]}]
    for name, snap in nodes.items():
        (folder / f"{name}.json").write_text(json.dumps(snap))
    return folder


# What each node runs instead of `troubleshoot probe` (`fleet probe --command`): on the node named
# first it never answers, as a probe stuck in a driver call (it waits until its job step is
# ended); every other node prints the healthy snapshot at once.
NODE_PROBE = r"""
import os, sys, threading
if os.environ["SLURMD_NODENAME"] == sys.argv[1]:
    threading.Event().wait()
sys.stdout.write(open(sys.argv[2]).read())
"""


@pytest.mark.slow  # waits out a node's deadline by design
def test_fleet_probe_cuts_off_a_hanging_node_at_its_deadline_while_the_others_arrive(tmp_path):
    probe = tmp_path / "node_probe.py"
    probe.write_text(NODE_PROBE)
    base = REPO / "tests" / "fixtures" / "snapshots" / "base.json"
    env, _ = fake_slurm(tmp_path)
    env["FAKE_SLURM_NAMES"] = "node1\nnode2\nnode3"
    deadline = 4
    p = run_cli("fleet", "probe", "--slurm", "--job", "4242", "--out", str(tmp_path / "snaps"), "--timeout",
                str(deadline), "--command", shlex.join([sys.executable, str(probe), "node2", str(base)]),
                "--format", "json", env=env, timeout=120)
    assert p.returncode == 1, p.stderr.decode()
    nodes = {n["node"]: n for n in json.loads(p.stdout)["nodes"]}
    assert {name: n["status"] for name, n in nodes.items()} == {"node1": "ok", "node2": "timeout", "node3": "ok"}
    # reported at its deadline: its step ended by SIGTERM, not waited for past it
    assert deadline <= nodes["node2"]["seconds"] < deadline + collect.GRACE
    assert nodes["node2"]["error"] == f"no snapshot within {deadline} s; its job step was terminated"
    assert sorted(f.name for f in (tmp_path / "snaps").iterdir()) == ["node1.json", "node3.json"]
    assert "2 of 3 nodes answered; no snapshot from node2" in p.stderr.decode()


def test_fleet_diagnose_names_exactly_the_broken_nodes(tmp_path):
    d = node_snapshots(tmp_path / "snaps")
    p = run_cli("fleet", "diagnose", str(d), "--format", "json")
    assert p.returncode == 0, p.stderr.decode()
    doc = json.loads(p.stdout)
    by_node = {}
    for f in doc["findings"]:
        by_node.setdefault(f["node"], set()).add((f["kind"], f["what"]))
    assert by_node == {
        "gpu-02": {("drift", "driver"), ("drift", "CUDA driver version"), ("drift", "kernel module")},
        "gpu-03": {("outlier", "PCIe link")},
        "gpu-04": {("outlier", "Xid events")},
    }
    assert doc["per_node"]["gpu-01"] == [] and doc["per_node"]["gpu-05"] == []
    assert [x["symptom"] for x in doc["per_node"]["gpu-04"]] == ["gpu-hardware-fault"]
    assert "pcie-degraded" in [x["symptom"] for x in doc["per_node"]["gpu-03"]]
    drift = next(f for f in doc["findings"] if f["what"] == "driver")
    assert drift["value"] == "550.54.14" and drift["expected"] == "555.42.02"
    text = run_cli("fleet", "diagnose", str(d)).stdout.decode()
    rows = {ln.split()[0] for ln in text.splitlines() if ln.startswith("gpu-0")}
    assert rows == {"gpu-01", "gpu-02", "gpu-03", "gpu-04", "gpu-05"}
    assert "gpu-01  ok" in text and "gpu-05  ok" in text
    assert "GPU 0 PCIe link at gen4 x8 of x16" in text and "Xid 79" in text


def test_fleet_diagnose_groups_a_finding_shared_by_nodes(tmp_path):
    d = tmp_path / "snaps"
    d.mkdir()
    for i in range(1, 5):
        snap = copy.deepcopy(BASE)
        if i != 4:  # as tests/test_scenarios.py's docker scenario (recorded docker info without the nvidia runtime)
            snap["docker"].update(runtimes=["io.containerd.runc.v2", "runc"], nvidia_runtime=False, daemon_json=None,
                                  daemon_json_nvidia_runtime=None)
        (d / f"node{i}.json").write_text(json.dumps(snap))
    doc = json.loads(run_cli("fleet", "diagnose", str(d), "--format", "json").stdout)
    group = next(g for g in doc["groups"] if g["symptom"] == "docker-gpu-missing")
    assert group["nodes"] == ["node1", "node2", "node3"]
    text = run_cli("fleet", "diagnose", str(d)).stdout.decode()
    assert "3 nodes: docker-gpu-missing" in text


def test_fleet_diagnose_reads_the_job_logs_with_the_snapshots(tmp_path):
    d = node_snapshots(tmp_path / "snaps")
    shutil.copytree(RANKS / "per-rank", d / "logs")
    doc = json.loads(run_cli("fleet", "diagnose", str(d), "--format", "json").stdout)
    assert doc["summary"].startswith("rank 3 on node gpu-02 failed first with cuda-oom")
    assert doc["diagnoses"][0]["symptom"] == "cuda-oom"
    assert doc["per_node"]["gpu-02"][0]["symptom"] == "cuda-oom"


def test_fleet_diagnose_bad_input_is_one_line(tmp_path):
    (tmp_path / "empty").mkdir()
    for target in (tmp_path / "missing", tmp_path / "empty"):
        p = run_cli("fleet", "diagnose", str(target))
        err = p.stderr.decode()
        assert p.returncode == 2 and err.startswith("troubleshoot: error:") and err.count("\n") == 1
    d = node_snapshots(tmp_path / "snaps")
    (d / "broken.json").write_text("{not json")
    p = run_cli("fleet", "diagnose", str(d), "--format", "json")
    assert p.returncode == 0 and "broken.json" in p.stderr.decode() and "Traceback" not in p.stderr.decode()


def test_node_names_from_snapshots_reach_the_terminal_without_control_sequences(tmp_path):
    d = tmp_path / "snaps"
    d.mkdir()
    for name in ("a", "b\x1b[2Jx"):
        (d / f"{name}.json").write_text(json.dumps(BASE))
    out = run_cli("fleet", "diagnose", str(d)).stdout.decode()
    assert "\x1b" not in out and "b\\x1b[2Jx" in out


def test_kubernetes_example_manifest_has_the_kubernetes_object_shape():
    kv = pytest.importorskip("kubernetes_validate")
    path = REPO / "docs" / "examples" / "kubernetes" / "troubleshoot-probe-daemonset.yaml"
    docs = [x for x in yaml.safe_load_all(path.read_text()) if x]
    assert [x["kind"] for x in docs] == ["DaemonSet"]
    for doc in docs:
        kv.validate(doc, "1.30.0", strict=True)  # raises on an unknown field or a wrong type
        spec = doc["spec"]
        assert spec["selector"]["matchLabels"].items() <= spec["template"]["metadata"]["labels"].items()
        pod = spec["template"]["spec"]
        volumes = {v["name"] for v in pod["volumes"]}
        for c in pod["containers"]:
            assert {m["name"] for m in c["volumeMounts"]} <= volumes
            assert "troubleshoot probe --format json --save" in " ".join(c["command"] + c["args"])
    broken = copy.deepcopy(docs[0])
    broken["spec"]["template"]["spec"]["containers"][0]["volumeMount"] = []
    with pytest.raises(Exception):
        kv.validate(broken, "1.30.0", strict=True)


@pytest.mark.asyncio
async def test_fleet_view_lists_nodes_and_shows_the_selected_nodes_findings(tmp_path):
    from troubleshoot import pipeline
    from troubleshoot.fleet.diagnose import diagnose_fleet
    from troubleshoot.tui.fleet import FleetApp

    res = diagnose_fleet(node_snapshots(tmp_path / "snaps"), pipeline.load_rules())
    app = FleetApp(res)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        table = app.query_one("#nodes")
        assert [table.get_row_at(i)[0] for i in range(table.row_count)][-2:] == ["gpu-01", "gpu-05"]
        detail = app.query_one("#detail")
        first = str(detail.content)
        assert first.startswith(table.get_row_at(0)[0])
        seen = {}
        for i in range(table.row_count):
            seen[table.get_row_at(i)[0]] = str(detail.content)
            await pilot.press("down")
            await pilot.pause()
        assert "driver 550.54.14 (others: 555.42.02 on 4 nodes)" in seen["gpu-02"]
        assert "GPU 0 PCIe link at gen4 x8 of x16" in seen["gpu-03"]
        assert "Xid 79" in seen["gpu-04"] and "gpu-hardware-fault" in seen["gpu-04"]
        assert "No drift, no outlier, no diagnosis." in seen["gpu-01"]


# ------------------------------------------------------------------ files beside the snapshots


def test_fleet_diagnose_leaves_out_files_that_are_neither_snapshots_nor_logs_and_names_them(tmp_path):
    d = node_snapshots(tmp_path / "snaps")
    (d / "README.md").write_text("# cluster A, collected 2024-06-26\n")
    (d / "NOTES.md").write_text("gpu-03 was reseated\n")
    (d / "nvidia-bug-report.log.gz").write_bytes(b"\x1f\x8b\x08\x00" + bytes(64))
    (d / "core").write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 4)
    p = run_cli("fleet", "diagnose", str(d))
    assert p.returncode == 0, p.stderr.decode()
    assert "gpu-01  ok" in p.stdout.decode()
    [note] = p.stderr.decode().splitlines()
    assert note.startswith("troubleshoot: warning: 4 files are not snapshots or text logs and were left out: ")
    for name, kind in (("NOTES.md", "Markdown"), ("README.md", "Markdown"), ("core", "an ELF executable or library"),
                       ("nvidia-bug-report.log.gz", "gzip-compressed")):
        assert f"{d / name} ({kind})" in note, name
    doc = json.loads(run_cli("fleet", "diagnose", str(d), "--format", "json").stdout)
    assert sorted((s["file"], s["why"]) for s in doc["skipped"]) == [
        (str(d / "NOTES.md"), "Markdown"), (str(d / "README.md"), "Markdown"),
        (str(d / "core"), "an ELF executable or library"), (str(d / "nvidia-bug-report.log.gz"), "gzip-compressed")]
    assert doc["warnings"] == [note.removeprefix("troubleshoot: warning: ")]
    assert doc["logs"] == 0 and doc["left_out"] == 0 and len(doc["nodes"]) == 5


def test_fleet_diagnose_reads_the_logs_beside_a_readme(tmp_path):
    d = node_snapshots(tmp_path / "snaps")
    shutil.copytree(RANKS / "per-rank", d / "logs")
    (d / "logs" / "README.md").write_text("ranks of job 42\n")
    doc = json.loads(run_cli("fleet", "diagnose", str(d), "--format", "json").stdout)
    assert doc["summary"].startswith("rank 3 on node gpu-02 failed first with cuda-oom")
    assert [s["file"] for s in doc["skipped"]] == [str(d / "logs" / "README.md")]


def test_fleet_diagnose_of_a_folder_with_only_a_readme_says_what_it_left_out(tmp_path):
    (tmp_path / "snaps").mkdir()
    (tmp_path / "snaps" / "README.md").write_text("snapshots go here\n")
    p = run_cli("fleet", "diagnose", str(tmp_path / "snaps"))
    err = p.stderr.decode()
    assert p.returncode == 2 and err.count("\n") == 1
    assert err == (f"troubleshoot: error: no snapshots (<node>.json) or logs in {tmp_path / 'snaps'}; "
                   f"{tmp_path / 'snaps' / 'README.md'}: not a snapshot or a text log (Markdown); left out\n")


# ------------------------------------------------------------------ nodes that differ with no majority


def _two_drivers(first: str, second: str) -> dict:
    nodes = {"gpu-01": copy.deepcopy(BASE), "gpu-02": copy.deepcopy(BASE)}
    nodes["gpu-01"]["nvml"]["driver_version"] = first
    nodes["gpu-02"]["nvml"]["driver_version"] = second
    return nodes


@pytest.mark.parametrize("first, second", [("535.161.08", "555.42.02"), ("555.42.02", "535.161.08")])
def test_two_nodes_that_differ_are_both_named_and_neither_is_blamed(first, second):
    from troubleshoot.fleet.compare import compare

    drift = [f for f in compare(_two_drivers(first, second)) if f.what == "driver"]
    split = f"nodes differ, no majority: {first} on gpu-01; {second} on gpu-02"
    assert [(f.node, f.value, f.expected, f.text) for f in drift] == [
        ("gpu-01", first, None, f"driver {first} ({split})"), ("gpu-02", second, None, f"driver {second} ({split})")]


def test_a_tie_names_each_value_with_its_nodes_and_a_majority_still_names_the_odd_node():
    from troubleshoot.fleet.compare import compare

    nodes = {f"gpu-0{i}": copy.deepcopy(BASE) for i in range(1, 7)}
    for i, snap in enumerate(nodes.values()):
        snap["nvml"]["driver_version"] = ("535.161.08", "555.42.02", "550.54.14")[i % 3]
    drift = [f for f in compare(nodes) if f.what == "driver"]
    assert [f.node for f in drift] == list(nodes) and {f.expected for f in drift} == {None}
    assert drift[0].text == ("driver 535.161.08 (nodes differ, no majority: 535.161.08 on gpu-01, gpu-04; "
                             "555.42.02 on gpu-02, gpu-05; 550.54.14 on gpu-03, gpu-06)")
    nodes["gpu-06"]["nvml"]["driver_version"] = "535.161.08"  # 3 of 6: the most frequent value, alone
    drift = [f for f in compare(nodes) if f.what == "driver"]
    assert [(f.node, f.text) for f in drift] == [
        ("gpu-02", "driver 555.42.02 (others: 535.161.08 on 3 nodes)"),
        ("gpu-03", "driver 550.54.14 (others: 535.161.08 on 3 nodes)"),
        ("gpu-05", "driver 555.42.02 (others: 535.161.08 on 3 nodes)")]


def test_a_worse_link_or_limit_is_found_whichever_node_is_named_first():
    from troubleshoot.fleet.compare import compare

    for slow in ("gpu-01", "gpu-02"):
        nodes = {"gpu-01": copy.deepcopy(BASE), "gpu-02": copy.deepcopy(BASE)}
        nodes[slow]["nvml"]["gpus"][0]["pcie_gen_current"] = 3
        nodes[slow]["io"]["nofile_soft"] = 1024
        found = [(f.node, f.what, f.text) for f in compare(nodes)]
        assert found == [(slow, "PCIe link", "GPU 0 PCIe link at gen3 x16 of x16 (no majority; as many nodes at gen4 x16)"),
                         (slow, "open files limit", "open files limit 1024 (no majority; as many nodes at 1048576)")]


def test_fleet_text_of_two_nodes_that_differ_blames_neither(tmp_path):
    d = tmp_path / "snaps"
    d.mkdir()
    for node, snap in _two_drivers("535.161.08", "555.42.02").items():
        (d / f"{node}.json").write_text(json.dumps(snap))
    out = run_cli("fleet", "diagnose", str(d)).stdout.decode()
    split = "nodes differ, no majority: 535.161.08 on gpu-01; 555.42.02 on gpu-02"
    assert f"gpu-01  drift: driver 535.161.08 ({split})" in out
    assert f"gpu-02  drift: driver 555.42.02 ({split})" in out
    assert "others:" not in out


def test_a_tie_across_ten_thousand_nodes_names_a_few_of_each_side_and_counts_the_rest():
    from troubleshoot.fleet import compare as cmp

    one = cmp.extract(BASE)
    other = cmp.extract(_two_drivers("535.161.08", "535.161.08")["gpu-01"])
    nodes = {f"gpu-{i:05d}": (one if i % 2 else other) for i in range(10_000)}
    drift = [f for f in cmp.compare_nodes(nodes) if f.what == "driver"]
    assert len(drift) == 10_000 and {f.expected for f in drift} == {None}
    assert drift[0].text == ("driver 535.161.08 (nodes differ, no majority: 535.161.08 on gpu-00000, gpu-00002, "
                             "gpu-00004 and 4997 more; 555.42.02 on gpu-00001, gpu-00003, gpu-00005 and 4997 more)")
