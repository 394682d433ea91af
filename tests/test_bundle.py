"""`troubleshoot bundle`: one .tar.gz for a ticket. Each test makes a real archive with the
command's own parser and context (cli_bundle.add_parser, cmd_bundle), opens it with tarfile and
reads what a person helping with the ticket would read."""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import stat
import tarfile

import pytest
from conftest import REPO, run_cli

from troubleshoot import __version__, bundle, cli_bundle, context, snapshot
from troubleshoot.errors import TroubleshootError
from troubleshoot.fixes import journal
from troubleshoot.redact import PLACEHOLDER, Redactor, counts

BASE = REPO / "tests" / "fixtures" / "snapshots" / "base.json"  # host gpu-node-07, user ana, home /home/ana
HOST, USER, HOME = "gpu-node-07", "ana", "/home/ana"
IP, PEER, MAC = "10.1.2.3", "10.1.2.4", "0a:1b:2c:3d:4e:5f"
LOG = f"""\
[2024-06-01 10:00:00] launching on {HOST} as {USER}, cwd {HOME}/project
{HOST}:15325:16199 [2] NCCL INFO Bootstrap : Using eth0:{IP}<0>
{HOST}:15325:16199 [2] NCCL WARN NET/Socket : Connect to {PEER}<43567> failed : Connection refused (run by {USER} from {HOME}/project)
  File "{HOME}/project/train.py", line 12, in <module>
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 79.15 GiB of which 3.12 MiB is free. Process 4242 has 79.14 GiB memory in use.
link ether {MAC} on {HOST}
"""
MEMBERS = {"version.txt", "snapshot.json", "logs/001-train.log", "diagnoses.json", "report.md", "history.json",
           "manifest.json"}


def parser() -> argparse.ArgumentParser:
    """The command's own parser, as the dispatcher mounts it."""
    ap = argparse.ArgumentParser(prog="troubleshoot")
    sub = ap.add_subparsers(dest="command")
    cli_bundle.add_parser(sub, lambda p: p.add_argument("--rules", metavar="DIR", action="append", default=[]))
    return ap


def make(*argv: str, warnings: list | None = None) -> int:
    args = parser().parse_args(["bundle", *argv])
    return cli_bundle.cmd_bundle(args, context.build(args, warn=(warnings if warnings is not None else []).append))


def members(path) -> dict[str, bytes]:
    with tarfile.open(path, "r:gz") as tar:
        out = {}
        for info in tar.getmembers():
            assert info.isfile(), info.name
            out[info.name] = tar.extractfile(info).read()
    return out


def short(archive: dict[str, bytes]) -> dict[str, str]:
    return {name.split("/", 1)[1]: data.decode() for name, data in archive.items()}


@pytest.fixture
def job(tmp_path):
    log = tmp_path / "train.log"
    log.write_text(LOG)
    return log


def test_bundle_holds_every_member_and_redacts_the_log_the_report_and_the_json(job, tmp_path, capsys):
    out = tmp_path / "ticket.tar.gz"
    assert make("--log", str(job), "--snapshot", str(BASE), "--out", str(out)) == 0
    files = short(members(out))
    assert set(files) == MEMBERS
    for name, text in files.items():
        for secret in (HOST, IP, PEER, MAC, HOME):
            assert secret not in text, f"{secret} in {name}"
        assert not re.search(rf"\b{USER}\b", text), f"user name in {name}"
    # one placeholder per value in every member: the snapshot's host is the log's and the report's
    red = json.loads(files["snapshot.json"])
    host, home = red["host"]["hostname"], red["host"]["home"]
    assert red["redacted"] is True and PLACEHOLDER.fullmatch(host) and PLACEHOLDER.fullmatch(home)
    assert f"launching on {host} as " in files["logs/001-train.log"]
    assert f'File "{home}/project/train.py"' in files["logs/001-train.log"]
    assert f"{host}:15325:16199 [2] NCCL WARN NET/Socket : Connect to <ip-" in files["report.md"]
    doc = json.loads(files["diagnoses.json"])
    nccl = next(d for d in doc["diagnoses"] if d["symptom"] == "nccl-error")
    assert nccl["evidence"][0]["text"].startswith(f"{host}:15325:16199 ")
    assert nccl["evidence"][0]["span"] is None  # its offsets were the original line's
    assert nccl["nodes"] == [host]
    assert nccl["captures"]["detail"].endswith(f"(run by {red['host']['user']} from {home}/project)")
    assert f"(run by {red['host']['user']} from {home}/project)" in files["report.md"]
    assert {d["symptom"] for d in doc["diagnoses"]} >= {"cuda-oom", "nccl-error"}
    assert f"wrote {out}" in capsys.readouterr().err


def test_the_manifest_lists_every_member_with_its_size_hash_and_what_was_redacted(job, tmp_path):
    import hashlib

    out = tmp_path / "b.tar.gz"
    make("--log", str(job), "--snapshot", str(BASE), "--out", str(out))
    archive = members(out)
    manifest = json.loads(archive["troubleshoot-bundle/manifest.json"])
    assert manifest["troubleshoot"] == __version__ and manifest["redaction"]["enabled"] is True
    listed = {m["name"]: m for m in manifest["members"]}
    assert set(listed) == set(archive)
    for name, data in archive.items():
        if name.endswith("manifest.json"):
            continue
        assert listed[name]["bytes"] == len(data) and listed[name]["sha256"] == hashlib.sha256(data).hexdigest()
        assert listed[name]["redacted"] == (None if name.endswith("version.txt") else counts(data.decode()))
    log = listed["troubleshoot-bundle/logs/001-train.log"]
    assert log["redacted"] == {"home": 3, "host": 4, "ip": 2, "mac": 1, "user": 2} and log["cut"] is None
    assert log["source"] == str(job)
    assert archive["troubleshoot-bundle/version.txt"].decode().startswith(f"troubleshoot {__version__}\n")


def test_placeholders_counted_are_the_ones_the_snapshot_writes():
    facts = json.loads(BASE.read_text())
    text = json.dumps(snapshot.redact(facts))
    assert counts(text) == {"home": 2, "host": 1, "ip": 1, "user": 1}
    r = Redactor(facts["host"])
    assert r.facts(facts) == snapshot.redact(facts, r.key)  # a bundle's snapshot is `probe --redact`'s
    assert r.facts(facts)["host"]["hostname"] == r.text(HOST) == r.data({"a": [HOST]})["a"][0]
    assert r.text(f"4242-train.{HOST}.rank0.log") == f"4242-train.{r.text(HOST)}.rank0.log"
    assert r.text(f"~/.{USER}.rc") == f"~/.{r.text(USER)}.rc" and r.text("torch.nvml") == "torch.nvml"


def test_paths_under_the_home_folder_are_redacted_in_every_member_and_the_manifest(tmp_path):
    home = tmp_path / "users" / USER
    (home / "jobs").mkdir(parents=True)
    facts = json.loads(BASE.read_text())
    facts["host"]["home"] = str(home)
    snap = home / "node07.json"
    snap.write_text(json.dumps(facts))
    log = home / "jobs" / "train.log"
    log.write_text(LOG)
    out = tmp_path / "b.tar.gz"
    make("--log", str(log), "--snapshot", str(snap), "--out", str(out))
    files = short(members(out))
    placeholder = json.loads(files["snapshot.json"])["host"]["home"]
    for name, text in files.items():
        assert str(home) not in text, name
    manifest = json.loads(files["manifest.json"])
    assert manifest["facts"] == f"snapshot {placeholder}/node07.json"
    assert f"Source: `{placeholder}/jobs/train.log`" in files["report.md"]
    assert json.loads(files["diagnoses.json"])["source"] == f"{placeholder}/jobs/train.log"


def test_no_member_path_leaves_the_bundle_folder(tmp_path):
    odd = tmp_path / f"{HOST}..rank0 log;$(id).log"
    odd.write_text("step 1\n")
    out = tmp_path / "b.tar.gz"
    make("--log", str(odd), "--snapshot", str(BASE), "--out", str(out))
    with tarfile.open(out, "r:gz") as tar:
        names = tar.getnames()
        for info in tar.getmembers():
            assert info.uname == "" and info.gname == "" and info.uid == 0 and info.mode == 0o600
    assert names and len(names) == len(set(names))
    for name in names:
        parts = name.split("/")
        assert not name.startswith("/") and ".." not in parts and parts[0] == bundle.TOP, name
        assert HOST not in name and re.fullmatch(r"[A-Za-z0-9._/-]+", name), name
    log = next(n for n in names if "/logs/" in n)
    assert log.startswith("troubleshoot-bundle/logs/001-host-") and log.endswith(".rank0_log_id_.log")


def test_a_rank_folder_keeps_one_member_per_log_each_named_by_its_file(tmp_path):
    ranks = tmp_path / "ranks"
    ranks.mkdir()
    for r in range(3):
        (ranks / f"job.{HOST}.rank{r}.log").write_text(f"rank {r} on {HOST}\n")
    out = tmp_path / "b.tar.gz"
    make("--log", str(ranks), "--snapshot", str(BASE), "--out", str(out))
    files = short(members(out))
    logs = sorted(n for n in files if n.startswith("logs/"))
    assert [n.split("-", 1)[0] for n in logs] == ["logs/001", "logs/002", "logs/003"]
    assert [files[n].split(" on ")[0] for n in logs] == ["rank 0", "rank 1", "rank 2"]
    assert all(HOST not in n and HOST not in files[n] for n in logs)


def test_a_big_log_keeps_its_start_and_end_and_says_which_lines_were_left_out(tmp_path):
    log = tmp_path / "big.log"
    lines = [f"step {i:05d} loss 0.{i:04d} on {HOST}\n" for i in range(1, 5001)]
    log.write_text("".join(lines))
    out = tmp_path / "b.tar.gz"
    make("--log", str(log), "--snapshot", str(BASE), "--out", str(out), "--max-log-size", "20KiB")
    archive = members(out)
    text = archive["troubleshoot-bundle/logs/001-big.log"].decode()
    entry = next(m for m in json.loads(archive["troubleshoot-bundle/manifest.json"])["members"]
                 if m["name"].endswith("big.log"))
    cut = entry["cut"]
    first, last = cut["left_out_lines"]
    kept = text.splitlines(keepends=True)
    marker = kept[first - 1]
    assert marker.startswith(f"[troubleshoot bundle: lines {first}-{last} (") and "left out here" in marker
    assert [ln.split(" loss")[0] for ln in kept[:first - 1]] == [ln.split(" loss")[0] for ln in lines[:first - 1]]
    assert [ln.split(" loss")[0] for ln in kept[first:]] == [ln.split(" loss")[0] for ln in lines[last:]]
    assert cut["original_bytes"] == log.stat().st_size
    assert cut["kept_from_start_bytes"] + cut["left_out_bytes"] + cut["kept_from_end_bytes"] == log.stat().st_size
    assert cut["kept_from_start_bytes"] + cut["kept_from_end_bytes"] <= 20 << 10
    assert HOST not in text and "step 05000" in text and "step 00001" in text


def test_zero_keeps_every_log_whole(tmp_path):
    log = tmp_path / "big.log"
    log.write_text("x" * 100 + "\n" * 30000)
    out = tmp_path / "b.tar.gz"
    make("--log", str(log), "--no-probe", "--out", str(out), "--max-log-size", "0", "--no-redact")
    assert members(out)["troubleshoot-bundle/logs/001-big.log"] == log.read_bytes()


def test_the_archive_is_private_and_an_existing_file_is_replaced_only_with_force(job, tmp_path):
    out = tmp_path / "b.tar.gz"
    out.write_bytes(b"an earlier bundle")
    out.chmod(0o644)
    with pytest.raises(TroubleshootError, match=r"already exists; give --force"):
        make("--log", str(job), "--snapshot", str(BASE), "--out", str(out))
    assert out.read_bytes() == b"an earlier bundle"
    assert make("--log", str(job), "--snapshot", str(BASE), "--out", str(out), "--force") == 0
    assert stat.S_IMODE(out.stat().st_mode) == 0o600 and tarfile.is_tarfile(out)
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []  # no temporary file left


def test_the_name_is_taken_between_the_check_and_the_write(job, tmp_path, monkeypatch):
    out = tmp_path / "b.tar.gz"
    archive = bundle._archive

    def and_another_writer(raw, members):  # another process takes the name while this one writes
        archive(raw, members)
        out.write_bytes(b"theirs")

    monkeypatch.setattr(bundle, "_archive", and_another_writer)
    with pytest.raises(TroubleshootError, match="already exists"):
        make("--log", str(job), "--snapshot", str(BASE), "--out", str(out))
    assert out.read_bytes() == b"theirs" and [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_bad_output_paths_are_refused_before_anything_is_read(job, tmp_path):
    with pytest.raises(TroubleshootError, match=r"--out .*: is a folder"):
        make("--log", str(job), "--no-probe", "--out", str(tmp_path))
    with pytest.raises(TroubleshootError, match=r"--out .*: no folder"):
        make("--log", str(job), "--no-probe", "--out", str(tmp_path / "missing" / "b.tar.gz"))
    with pytest.raises(TroubleshootError, match=r"--max-log-size lots: not a size"):
        make("--log", str(job), "--no-probe", "--out", str(tmp_path / "b.tar.gz"), "--max-log-size", "lots")


def test_a_log_from_a_pipe_is_refused_with_one_line(tmp_path):
    with pytest.raises(TroubleshootError, match=r"^stdin: a bundle packs log files; save the output to a file first"):
        make("--log", "-", "--no-probe", "--out", str(tmp_path / "b.tar.gz"))
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(TroubleshootError, match=r"fifo: not a regular file"):
        make("--log", str(fifo), "--no-probe", "--out", str(tmp_path / "b.tar.gz"))
    assert not (tmp_path / "b.tar.gz").exists()


def test_no_redact_keeps_the_values_and_warns(job, tmp_path):
    out = tmp_path / "b.tar.gz"
    warnings: list[str] = []
    make("--log", str(job), "--snapshot", str(BASE), "--out", str(out), "--no-redact", warnings=warnings)
    files = short(members(out))
    assert files["logs/001-train.log"] == LOG
    assert json.loads(files["snapshot.json"])["host"]["hostname"] == HOST
    for name in ("report.md", "diagnoses.json"):  # what the redacted bundle hides is there to hide
        assert all(value in files[name] for value in (HOST, PEER, USER, f"{HOME}/project")), name
    manifest = json.loads(files["manifest.json"])
    assert manifest["redaction"] == {"enabled": False}
    assert all(m.get("redacted") is None for m in manifest["members"])
    assert any("--no-redact" in w and "read it before you share it" in w for w in warnings)


def test_without_a_snapshot_this_machines_own_names_are_redacted(tmp_path):
    me = socket.gethostname()
    log = tmp_path / "train.log"
    log.write_text(f"started on {me} at 10.9.8.7\n")
    out = tmp_path / "b.tar.gz"
    make("--log", str(log), "--no-probe", "--out", str(out))
    files = short(members(out))
    assert "snapshot.json" not in files and set(files) == MEMBERS - {"snapshot.json"}
    assert re.fullmatch(r"started on <host-[0-9a-f]{8}> at <ip-[0-9a-f]{8}>\n", files["logs/001-train.log"])
    assert json.loads(files["manifest.json"])["facts"] is None


def test_the_fix_history_is_packed_redacted_without_backups(job, tmp_path):
    e = journal.Entry.create("set-env", {"file": f"{HOME}/.bashrc"}, None, {"title": "Set NCCL_DEBUG"})
    e.backup(0, b"export SECRET_TOKEN=abc\n")
    e.data["steps"].append({"kind": "write", "status": "done", "target": f"{HOME}/.bashrc", "existed": True,
                            "backup": "backups/0"})
    e.data["status"] = "applied"
    e.save()
    out = tmp_path / "b.tar.gz"
    make("--log", str(job), "--snapshot", str(BASE), "--out", str(out))
    files = short(members(out))
    history = json.loads(files["history.json"])["history"]
    assert [h["id"] for h in history] == [e.id] and history[0]["status"] == "applied"
    home = json.loads(files["snapshot.json"])["host"]["home"]
    assert history[0]["params"] == {"file": f"{home}/.bashrc"} and history[0]["steps"][0]["target"] == f"{home}/.bashrc"
    assert not any("SECRET_TOKEN" in text for text in files.values())


def test_bundle_command_writes_the_archive_through_the_real_cli(job, tmp_path):
    out = tmp_path / "ticket.tar.gz"
    p = run_cli("bundle", "--log", str(job), "--snapshot", str(BASE), "--out", str(out))
    assert p.returncode == 0, p.stderr.decode()
    assert p.stderr.decode().startswith(f"troubleshoot: wrote {out} (7 files, ") and b"Traceback" not in p.stderr
    assert set(short(members(out))) == MEMBERS and stat.S_IMODE(out.stat().st_mode) == 0o600
    again = run_cli("bundle", "--log", str(job), "--snapshot", str(BASE), "--out", str(out))
    assert again.returncode == 2
    assert again.stderr.decode() == f"troubleshoot: error: --out {out}: already exists; give --force to replace it\n"


def test_a_full_disk_leaves_no_half_archive_and_says_so_in_one_line(tmp_path, tiny_disk):
    log = tmp_path / "noise.log"
    log.write_text("\n".join(os.urandom(48).hex() for _ in range(4000)) + "\n")  # compresses to ~200 KB
    out = tiny_disk / "b.tar.gz"
    with pytest.raises(TroubleshootError, match=rf"^cannot write {re.escape(str(out))}: No space left on device$"):
        make("--log", str(log), "--snapshot", str(BASE), "--out", str(out))
    assert list(tiny_disk.iterdir()) == []
