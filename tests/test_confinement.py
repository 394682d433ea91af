"""Fixes an operator can trust: nothing outside --root, no lost lines, undo that keeps newer work."""

import json
import multiprocessing
import os
from pathlib import Path

import pytest

from conftest import REPO, run_main
from troubleshoot import safeio, snapshot
from troubleshoot.errors import TroubleshootError
from troubleshoot.fixes import executor, journal
from troubleshoot.fixes.plan import EnsureLine, Plan, WriteFile

BASE_SNAPSHOT = str(REPO / "tests" / "fixtures" / "snapshots" / "base.json")


def tree(d: Path) -> dict[str, bytes | str]:
    out = {}
    for p in sorted(d.rglob("*")):
        if p.is_symlink():
            out[str(p.relative_to(d))] = "->" + os.readlink(p)
        elif p.is_file():
            out[str(p.relative_to(d))] = p.read_bytes()
    return out


def fix(*args):
    return run_main("fix", *args)


def no_traceback(p) -> None:
    assert b"Traceback" not in p.stderr + p.stdout, (p.stderr + p.stdout).decode()


@pytest.fixture
def outside(tmp_path) -> Path:
    d = tmp_path / "outside"
    d.mkdir()
    (d / "fstab").write_text("SECRET=outside / ext4 defaults 0 1\n")
    return d


def test_symlinked_directory_under_root_does_not_lead_out(tmp_path, outside):
    root = tmp_path / "root"
    root.mkdir()
    (root / "etc").symlink_to(outside)  # ROOT/etc -> /.../outside, as in the report
    before = tree(outside)
    p = fix("blacklist-nouveau", "--root", str(root), "--snapshot", BASE_SNAPSHOT, "--apply", "--yes")
    no_traceback(p)
    # (its verification may fail: the kernel probe reads ROOT/etc/modprobe.d as the host sees it)
    assert p.returncode in (0, 1) and b"Applied as" in p.stdout, p.stderr
    assert tree(outside) == before, "a file was written outside the root"
    # The link is followed as inside the root (like chroot): its absolute target starts at ROOT.
    landed = root / str(outside).lstrip("/") / "modprobe.d" / "blacklist-nouveau.conf"
    assert landed.read_text().startswith("blacklist nouveau")
    assert (root / "etc").is_symlink()


def test_dotdot_in_a_path_parameter_is_refused(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    victim = tmp_path / "x"
    p = fix("set-env", "--param", "name=A", "--param", "value=1", "--param", "profile=/../../../../" + str(victim),
            "--root", str(root), "--apply", "--yes", "--no-probe")
    no_traceback(p)
    assert p.returncode == 2 and b"'..' is not allowed" in p.stderr
    assert not victim.exists() and tree(root) == {}


@pytest.mark.parametrize("link", ["absolute", "relative-escaping"])
def test_symlinked_target_outside_the_root_is_never_read_copied_or_replaced(tmp_path, outside, link):
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    target = str(outside / "fstab") if link == "absolute" else "../../../../../../../../" + str(outside / "fstab")
    (root / "etc" / "fstab").symlink_to(target)
    before = tree(outside)
    args = ["ramdisk", "--param", "size=1G", "--param", "fstab=true", "--root", str(root), "--snapshot", BASE_SNAPSHOT]
    dry = fix(*args)
    no_traceback(dry)
    assert b"SECRET" not in dry.stdout, "the outside file's content was shown"
    p = fix(*args, "--apply", "--yes")
    assert p.returncode == 0, p.stderr
    assert tree(outside) == before
    assert os.readlink(root / "etc" / "fstab") == target, "the symlink was replaced"
    state = Path(os.environ["XDG_STATE_HOME"]) / "troubleshoot" / "journal"
    assert not any(b"SECRET" in f.read_bytes() for f in state.rglob("*") if f.is_file())
    assert b"SECRET" not in b"".join(v for v in tree(root).values() if isinstance(v, bytes))
    eid = journal.entries()[0][0]
    u = run_main("undo", eid)
    assert u.returncode == 0, u.stderr
    assert os.readlink(root / "etc" / "fstab") == target and tree(outside) == before


def test_symlinked_target_inside_the_root_is_edited_in_place(tmp_path):
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    (root / "data").mkdir()
    (root / "data" / "fstab").write_text("UUID=a / ext4 defaults 0 1\n")
    (root / "etc" / "fstab").symlink_to("../data/fstab")
    p = fix("ramdisk", "--param", "size=1G", "--param", "fstab=true", "--root", str(root), "--snapshot", BASE_SNAPSHOT,
            "--apply", "--yes")
    assert p.returncode == 0, p.stderr
    assert b"is a symlink" in p.stdout
    assert (root / "etc" / "fstab").is_symlink()
    assert "tmpfs /mnt/ramdisk tmpfs" in (root / "data" / "fstab").read_text()


def test_a_symlink_planted_after_the_preview_is_not_followed(tmp_path, outside):
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    prep = executor.prepare(Plan("t", "t", {}, (WriteFile("/etc/modprobe.d/x.conf", "x\n"),)), str(root))
    (root / "etc" / "modprobe.d").symlink_to(outside)  # swapped in between preview and apply
    out = executor.apply(prep)
    assert out.failed and "symlink" in out.failed
    assert sorted(os.listdir(outside)) == ["fstab"]


def test_edit_after_fix_then_undo_refuses_with_the_diff_and_force_restores(tmp_path):
    conf = tmp_path / "app.conf"
    conf.write_text("a=1\n")
    out = executor.apply(executor.prepare(Plan("t", "t", {}, (EnsureLine(str(conf), "b=2"),))))
    conf.write_text("a=1\nb=2\nmine=3\n")  # the user's newer work
    p = run_main("undo", out.entry.id)
    no_traceback(p)
    err = p.stderr.decode()
    assert p.returncode == 2 and str(conf) in err and "+mine=3" in err and "--force" in err
    assert conf.read_text() == "a=1\nb=2\nmine=3\n", "undo lost the newer edit"
    p = run_main("undo", out.entry.id, "--force")
    assert p.returncode == 0, p.stderr
    assert conf.read_text() == "a=1\n" and b"overwritten" in p.stdout


def test_a_created_file_the_user_extended_is_not_deleted(tmp_path):
    new = tmp_path / "new.conf"
    out = executor.apply(executor.prepare(Plan("t", "t", {}, (WriteFile(str(new), "x\n"),))))
    new.write_text("x\nuser line\n")
    with pytest.raises(executor.UndoConflict) as exc:
        executor.undo(out.entry.id)
    assert str(new) in str(exc.value) and "+user line" in exc.value.conflicts[0].diff
    assert new.read_text() == "x\nuser line\n"
    executor.undo(out.entry.id, force=True)
    assert not new.exists()


def test_undo_of_an_unchanged_file_still_works_after_a_plan_edited_it_twice(tmp_path):
    conf = tmp_path / "two.conf"
    conf.write_text("a\n")
    out = executor.apply(executor.prepare(Plan("t", "t", {}, (EnsureLine(str(conf), "b"), EnsureLine(str(conf), "c")))))
    assert conf.read_text() == "a\nb\nc\n"
    executor.undo(out.entry.id)
    assert conf.read_text() == "a\n"


def _apply_one(args):
    fstab, line, barrier = args
    barrier.wait()
    prep = executor.prepare(Plan("t", "t", {}, (EnsureLine("/etc/fstab", line),)), fstab)
    out = executor.apply(prep)
    return out.failed


def test_two_concurrent_applies_on_one_fstab_never_lose_a_line(tmp_path):
    ctx = multiprocessing.get_context("fork")
    for run in range(20):
        root = tmp_path / f"r{run}"
        (root / "etc").mkdir(parents=True)
        (root / "etc" / "fstab").write_text("UUID=a / ext4 defaults 0 1\n")
        barrier = ctx.Barrier(2)
        lines = ["tmpfs /mnt/ramdisk tmpfs size=8G,mode=1777 0 0", "tmpfs /dev/shm tmpfs defaults,size=32G 0 0"]
        procs = [ctx.Process(target=_apply_one, args=((str(root), ln, barrier),)) for ln in lines]
        for p in procs:
            p.start()
        for p in procs:
            p.join(60)
            assert p.exitcode == 0
        have = (root / "etc" / "fstab").read_text().splitlines()
        assert have[0] == "UUID=a / ext4 defaults 0 1" and set(lines) <= set(have), f"run {run}: {have}"


def test_a_change_between_preview_and_apply_is_kept(tmp_path):
    conf = tmp_path / "f"
    conf.write_text("a\n")
    prep = executor.prepare(Plan("t", "t", {}, (EnsureLine(str(conf), "b"),)))
    conf.write_text("a\nother\n")
    out = executor.apply(prep)
    assert conf.read_text() == "a\nother\nb\n" and out.notes


def test_undo_accepts_only_ids_in_the_state_directory(tmp_path):
    conf = tmp_path / "victim.conf"
    conf.write_text("precious\n")
    evil = tmp_path / "evil"
    (evil / "backups").mkdir(parents=True)
    (evil / "backups" / "0").write_text("overwritten\n")
    (evil / "journal.json").write_text(json.dumps({
        "schema": 1, "id": "evil", "fixer": "t", "started": "2020-01-01T00:00:00", "status": "applied", "root": None,
        "steps": [{"index": 0, "kind": "write", "status": "done", "target": str(conf), "path": str(conf),
                   "existed": True, "backup": "backups/0"}]}))
    state = journal.state_dir()
    state.mkdir(parents=True, exist_ok=True)
    rel = os.path.relpath(evil, state)
    for bad in (rel, "../../x", str(evil), "."):
        p = run_main("undo", bad)
        no_traceback(p)
        assert p.returncode == 2 and b"not a fix id" in p.stderr
    (state / "linked").symlink_to(evil)
    p = run_main("undo", "linked")
    assert p.returncode == 2 and b"symlink" in p.stderr
    assert conf.read_text() == "precious\n"


@pytest.mark.parametrize("steps", [
    [{"kind": "write"}],
    [{"index": 0, "kind": "write", "status": "done", "target": 5, "existed": True}],
    [{"index": 0, "kind": "write", "status": "done", "target": "/etc/x", "existed": True, "backup": "../../etc/shadow"}],
    [{"index": 0, "kind": "command", "status": "done", "argv": "rm -rf /"}],
    ["not a step"],
    {"a": 1},
])
def test_malformed_journal_steps_are_one_line_errors(tmp_path, steps):
    out = executor.apply(executor.prepare(Plan("t", "t", {}, (WriteFile(str(tmp_path / "x"), "x"),))))
    path = out.entry.folder / "journal.json"
    data = json.loads(path.read_text())
    data["steps"] = steps
    path.write_text(json.dumps(data))
    p = run_main("undo", out.entry.id)
    no_traceback(p)
    assert p.returncode == 2 and b"not a valid troubleshoot journal" in p.stderr
    assert (tmp_path / "x").exists()


def test_a_journal_target_outside_its_root_is_not_trusted(tmp_path):
    root = tmp_path / "root"
    out = executor.apply(executor.prepare(Plan("t", "t", {}, (WriteFile("/etc/x", "x"),)), str(root)))
    path = out.entry.folder / "journal.json"
    data = json.loads(path.read_text())
    data["steps"][0]["target"] = str(tmp_path / "elsewhere")
    path.write_text(json.dumps(data))
    with pytest.raises(TroubleshootError, match="outside the root"):
        executor.undo(out.entry.id)


def test_undo_without_id_takes_the_fix_written_last_not_the_highest_id(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    first = executor.apply(executor.prepare(Plan("zzz-first", "t", {}, (WriteFile(str(a), "a"),)))).entry
    second = executor.apply(executor.prepare(Plan("aaa-second", "t", {}, (WriteFile(str(b), "b"),)))).entry
    # Same second, ids that sort the other way: only the time tells which came last.
    for e, t in ((first, "2026-01-01T00:00:00.000001+00:00"), (second, "2026-01-01T00:00:00.000002+00:00")):
        e.data["started"] = t
        e.save()
    assert [eid for eid, _ in journal.entries()] == [second.id, first.id]
    p = run_main("undo", "--yes")
    assert p.returncode == 0, p.stderr
    assert a.exists() and not b.exists()


def test_snapshot_save_ignores_a_planted_temp_symlink(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    out = tmp_path / "snap.json"
    for name in (f".snap.json.tmp-{os.getpid()}", ".snap.json.tmp"):
        (tmp_path / name).symlink_to(victim)
    snapshot.save({"schema": 1}, out)
    assert victim.read_text() == "keep\n" and json.loads(out.read_text()) == {"schema": 1}
    assert not out.is_symlink()


def test_resolve_under_never_leaves_the_root(tmp_path):
    root = tmp_path / "r"
    (root / "a").mkdir(parents=True)
    (root / "a" / "up").symlink_to("../../../../..")
    (root / "loop").symlink_to("loop")
    assert safeio.resolve_under(root, "/a/up/etc/passwd") == root.resolve() / "etc" / "passwd"
    with pytest.raises(safeio.UnsafePath):
        safeio.resolve_under(root, "/loop/x")
    with pytest.raises(safeio.UnsafePath):
        safeio.resolve_under(root, "a/../../x")
