"""Fixes and undo that never harm: no escapes to the terminal, no lost edits, no foreign
journals, attributes kept, clear errors for odd paths and files."""

import errno
import os
import re
import subprocess
from pathlib import Path

import pytest

from conftest import run_main
from troubleshoot import safeio
from troubleshoot.fixes import executor, journal
from troubleshoot.fixes.plan import EnsureLine, Plan, WriteFile

CLIPBOARD = "\x1b]52;c;ZXZpbA==\x07"
TITLE = "\x1b]0;pwned\x07"
CSI_C1 = "\x9b31m"
# Bytes that make a terminal act instead of print: C0 controls but tab and newline, DEL, C1.
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def assert_terminal_safe(p: subprocess.CompletedProcess) -> None:
    for name, raw in (("stdout", p.stdout), ("stderr", p.stderr)):
        text = raw.decode("utf-8", "surrogateescape")
        found = CONTROL.search(text)
        assert found is None, f"{name} carries {found.group(0)!r}: {text!r}"
    assert b"Traceback" not in p.stdout + p.stderr, p.stderr.decode()


def no_traceback(p: subprocess.CompletedProcess) -> None:
    assert b"Traceback" not in p.stdout + p.stderr, (p.stdout + p.stderr).decode()


def only_id() -> str:
    ids = [eid for eid, _ in journal.entries()]
    assert len(ids) == 1, ids
    return ids[0]


def set_env(root: str | Path, profile: str, value: str = "1", *extra: str, cwd: Path | None = None):
    return run_main("fix", "set-env", "--param", "name=A", "--param", f"value={value}", "--param",
                   f"profile={profile}", "--root", str(root), "--no-probe", *extra, cwd=cwd)


# --- what reaches the terminal -------------------------------------------------------------


@pytest.mark.parametrize("existed", [False, True], ids=["created", "edited"])
def test_escapes_in_a_target_path_and_its_content_never_reach_the_terminal(tmp_path, existed):
    root = tmp_path / f"image{CLIPBOARD}{TITLE}{CSI_C1}"  # every target path under it carries them
    profile = root / "home" / "ana" / ".bashrc"
    profile.parent.mkdir(parents=True)
    if existed:
        profile.write_text(f"PS1='{TITLE}$ '\n")
    p = set_env(root, "/home/ana/.bashrc", "1", "--apply", "--yes")
    assert p.returncode == 0, p.stderr
    assert_terminal_safe(p)
    assert b"done: " in p.stdout
    eid = only_id()

    with open(profile, "a") as f:  # the user's later edit, with escapes of its own
        f.write(f"mine {CLIPBOARD}{CSI_C1}\n")
    refused = run_main("undo", eid)
    assert refused.returncode == 2
    assert_terminal_safe(refused)
    assert b"+mine" in refused.stderr and b"--force" in refused.stderr, refused.stderr

    forced = run_main("undo", eid, "--force")
    assert forced.returncode == 0, forced.stderr
    assert_terminal_safe(forced)
    assert (b"restored " if existed else b"removed ") in forced.stdout and b"overwritten" in forced.stdout
    assert profile.exists() == existed


def test_a_failure_naming_a_path_with_escapes_reaches_the_terminal_escaped(tmp_path):
    root = tmp_path / f"image{TITLE}"
    (root / "home" / "ana" / ".bashrc").mkdir(parents=True)  # a folder where the file should be
    p = set_env(root, "/home/ana/.bashrc", "1", "--apply", "--yes")
    assert p.returncode == 2 and b"is a directory" in p.stderr
    assert_terminal_safe(p)


# --- undo compares with what each step wrote ------------------------------------------------


def _full_on_after(monkeypatch) -> None:
    real = journal.Entry.backup

    def backup(self, index, data, kind="backups"):
        if kind == "after":
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, index, data, kind)

    monkeypatch.setattr(journal.Entry, "backup", backup)


@pytest.mark.parametrize("existed", [True, False], ids=["edited", "created"])
def test_undo_leaves_a_file_alone_when_its_step_failed_before_writing(tmp_path, monkeypatch, existed):
    conf = tmp_path / "app.conf"
    if existed:
        conf.write_text("before\n")
    _full_on_after(monkeypatch)  # the journal's disk fills up before the fix touched the file
    out = executor.apply(executor.prepare(Plan("t", "t", {}, (WriteFile(str(conf), "fix\n"),))))
    assert out.failed and "No space left" in out.failed
    assert conf.exists() == existed
    conf.write_text("the user's own work\n")  # later, by hand
    p = run_main("undo", out.entry.id)
    no_traceback(p)
    assert p.returncode == 0, p.stderr
    assert conf.read_text() == "the user's own work\n", "undo replaced a file the fix never wrote"


def test_undo_restores_the_files_written_and_skips_the_one_whose_write_failed(tmp_path, monkeypatch):
    a, b = tmp_path / "a.conf", tmp_path / "b.conf"
    a.write_text("old a\n")
    b.write_text("old b\n")
    real = executor.write_in

    def full_on_b(fd, name, data, mode=None):
        if name == b.name:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd, name, data, mode)

    monkeypatch.setattr(executor, "write_in", full_on_b)
    out = executor.apply(executor.prepare(Plan("t", "t", {}, (WriteFile(str(a), "new a\n"), WriteFile(str(b), "new b\n")))))
    assert out.failed and b.read_text() == "old b\n"
    b.write_text("old b\nthe user's line\n")
    p = run_main("undo", out.entry.id)
    assert p.returncode == 0, p.stderr
    assert a.read_text() == "old a\n" and b.read_text() == "old b\nthe user's line\n"


# --- journals of another user ---------------------------------------------------------------


def _applied(tmp_path: Path) -> tuple[Path, journal.Entry]:
    target = tmp_path / "made.conf"
    out = executor.apply(executor.prepare(Plan("t", "t", {}, (WriteFile(str(target), "x\n"),))))
    assert not out.failed
    return target, out.entry


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
@pytest.mark.parametrize("part", [".", "journal.json", "backups", "after/0"])
def test_undo_refuses_a_journal_owned_by_another_user(tmp_path, part):
    target, entry = _applied(tmp_path)
    os.chown(entry.folder / part, 4242, 4242)
    p = run_main("undo", entry.id)
    no_traceback(p)
    err = p.stderr.decode()
    assert p.returncode == 2 and "not trusting" in err and "4242" in err and len(err.strip().splitlines()) == 1, err
    assert target.read_text() == "x\n"
    assert "not trusting" in run_main("history").stdout.decode()
    assert run_main("undo", "--yes").returncode == 2 and target.exists(), "plain undo picked a foreign journal"


@pytest.mark.parametrize("part, mode", [("journal.json", 0o666), (".", 0o777), ("backups", 0o770)])
def test_undo_refuses_a_journal_other_users_can_write(tmp_path, part, mode):
    target, entry = _applied(tmp_path)
    os.chmod(entry.folder / part, mode)
    p = run_main("undo", entry.id)
    no_traceback(p)
    assert p.returncode == 2 and b"writable by other users" in p.stderr and b"not trusting" in p.stderr, p.stderr
    assert target.read_text() == "x\n"


def test_a_journal_is_private_to_its_user_whatever_the_umask(tmp_path):
    old = os.umask(0o002)
    try:
        target, entry = _applied(tmp_path)
    finally:
        os.umask(old)
    p = run_main("undo", entry.id)
    assert p.returncode == 0, p.stderr
    assert not target.exists()


# --- paths that change while they are checked -----------------------------------------------


def test_a_symlink_turning_into_a_folder_while_resolved_is_an_unsafe_path(tmp_path, monkeypatch):
    root = tmp_path / "root"
    (root / "real").mkdir(parents=True)
    flipping = root / "etc"
    flipping.symlink_to("real")
    real_lstat = os.lstat

    def lstat_then_flip(path, *a, **kw):
        st = real_lstat(path, *a, **kw)
        if str(path) == str(flipping) and flipping.is_symlink():
            flipping.unlink()
            flipping.mkdir()  # replaced between the check and the readlink
        return st

    monkeypatch.setattr(os, "lstat", lstat_then_flip)
    with pytest.raises(safeio.UnsafePath) as exc:
        safeio.resolve_under(root, "/etc/x.conf")
    assert str(flipping) in str(exc.value) and "\n" not in str(exc.value)


# --- extended attributes and ACLs -----------------------------------------------------------


def _acl(extra_uid: int) -> bytes:
    """A POSIX access ACL as the kernel stores it: user::rw- user:UID:r-- group::r-- mask::r-- other::---."""
    import struct

    undefined = 0xFFFFFFFF
    entries = [(0x01, 6, undefined), (0x02, 4, extra_uid), (0x04, 4, undefined), (0x10, 4, undefined),
               (0x20, 0, undefined)]
    return struct.pack("<I", 2) + b"".join(struct.pack("<HHI", t, p, i) for t, p, i in entries)


def _xattrs(p: Path) -> dict[str, bytes]:
    return {k: os.getxattr(p, k) for k in os.listxattr(p) if not k.startswith("security.")}


def test_fix_and_undo_keep_extended_attributes_and_acls(tmp_path):
    root = tmp_path / "root"
    rc = root / "home" / "ana" / ".bashrc"
    rc.parent.mkdir(parents=True)
    rc.write_text("alias ll='ls -l'\n")
    try:
        os.setxattr(rc, "user.origin", b"kept by the team")
    except OSError as exc:
        pytest.skip(f"no user extended attributes on this file system ({exc.strerror})")
    try:
        os.setxattr(rc, "system.posix_acl_access", _acl(4242))
    except OSError:
        pass  # ACLs off on this file system: the user attribute still tells
    before = _xattrs(rc)
    p = set_env(root, "/home/ana/.bashrc", "1", "--apply", "--yes")
    assert p.returncode == 0, p.stderr
    assert "export A=1" in rc.read_text()
    assert _xattrs(rc) == before, "the fix dropped the file's attributes"
    u = run_main("undo", only_id())
    assert u.returncode == 0, u.stderr
    assert rc.read_text() == "alias ll='ls -l'\n" and _xattrs(rc) == before, "undo dropped the file's attributes"


def test_attributes_that_cannot_be_copied_stop_the_fix_with_the_file_unchanged(tmp_path, monkeypatch):
    conf = tmp_path / "app.conf"
    conf.write_text("old\n")
    try:
        os.setxattr(conf, "user.origin", b"x")
    except OSError as exc:
        pytest.skip(f"no user extended attributes on this file system ({exc.strerror})")

    def refuse(*a, **kw):
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "setxattr", refuse)
    out = executor.apply(executor.prepare(Plan("t", "t", {}, (WriteFile(str(conf), "new\n"),))))
    assert out.failed and str(conf) in out.failed and "user.origin" in out.failed, out.failed
    assert conf.read_text() == "old\n" and os.getxattr(conf, "user.origin") == b"x"
    assert not list(tmp_path.glob(".app.conf.*"))


# --- the --root option ----------------------------------------------------------------------


def test_an_empty_root_is_refused(tmp_path):
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    p = set_env("", "/home/ana/.bashrc", "1", "--apply", "--yes", cwd=cwd)
    no_traceback(p)
    err = p.stderr.decode()
    assert p.returncode == 2 and "--root" in err and "empty" in err, err
    assert list(cwd.iterdir()) == [] and journal.entries() == []


def test_a_relative_root_is_resolved_once_and_journalled_absolute(tmp_path):
    cwd = tmp_path / "cwd"
    (cwd / "img" / "home" / "ana").mkdir(parents=True)
    rc = cwd / "img" / "home" / "ana" / ".bashrc"
    rc.write_text("old\n")
    p = set_env("img", "/home/ana/.bashrc", "1", "--apply", "--yes", cwd=cwd)
    assert p.returncode == 0, p.stderr
    assert b"is a symlink" not in p.stdout, p.stdout.decode()
    assert f"files under {cwd / 'img'}".encode() in p.stdout
    data = journal.load(only_id()).data
    assert data["root"] == str(cwd / "img")
    u = run_main("undo", only_id(), cwd=tmp_path)  # from another folder
    assert u.returncode == 0, u.stderr
    assert rc.read_text() == "old\n"


# --- write order ----------------------------------------------------------------------------


def test_plain_undo_takes_the_fix_that_wrote_last_not_the_one_started_last(tmp_path):
    conf = tmp_path / "fstab"
    conf.write_text("base\n")
    early = executor.apply(executor.prepare(Plan("t", "t", {}, (EnsureLine(str(conf), "first"),)))).entry
    late = executor.apply(executor.prepare(Plan("t", "t", {}, (EnsureLine(str(conf), "second"),)))).entry
    # Two applies at once: the one that wrote first had started last.
    for e, t in ((early, "2026-01-01T00:00:00.000002+00:00"), (late, "2026-01-01T00:00:00.000001+00:00")):
        e.data["started"] = t
        e.save()
    p = run_main("undo", "--yes")
    assert p.returncode == 0, p.stderr
    assert late.id.encode() in p.stdout and conf.read_text() == "base\nfirst\n"
    p = run_main("undo", "--yes")
    assert p.returncode == 0, p.stderr
    assert conf.read_text() == "base\n"


# --- failures name the file -----------------------------------------------------------------


def test_a_refused_replace_names_the_target_not_the_temp_file(tmp_path, monkeypatch):
    conf = tmp_path / "app.conf"
    conf.write_text("old\n")
    real_replace = os.replace

    def immutable(src, dst, **kw):
        if dst == conf.name:  # as the kernel answers for a file with chattr +i
            raise OSError(errno.EPERM, "Operation not permitted", src, None, dst)
        return real_replace(src, dst, **kw)

    monkeypatch.setattr(os, "replace", immutable)
    out = executor.apply(executor.prepare(Plan("t", "t", {}, (WriteFile(str(conf), "new\n"),))))
    assert out.failed and f"{conf}: Operation not permitted" in out.failed and ".tmp" not in out.failed, out.failed
    assert conf.read_text() == "old\n" and not list(tmp_path.glob(".app.conf.*"))


def test_an_immutable_file_fails_with_its_own_name(tmp_path):
    root = tmp_path / "root"
    rc = root / "home" / "ana" / ".bashrc"
    rc.parent.mkdir(parents=True)
    rc.write_text("old\n")
    if subprocess.run(["chattr", "+i", str(rc)], capture_output=True).returncode:
        pytest.skip("cannot make a file immutable here (chattr +i needs root and ext4/xfs/btrfs)")
    try:
        p = set_env(root, "/home/ana/.bashrc", "1", "--apply", "--yes")
    finally:
        subprocess.run(["chattr", "-i", str(rc)], capture_output=True)
    no_traceback(p)
    err = p.stderr.decode()
    assert p.returncode == 1 and f"{rc}: Operation not permitted" in err and ".tmp" not in err, err
    assert rc.read_text() == "old\n"


def test_a_plans_commands_never_import_modules_from_the_users_folder(tmp_path, monkeypatch):
    """`fix --apply` runs `python -m pip ...` and other Python tools, often as root: a json.py
    in the folder the user started it from must not run in their place."""
    import sys

    from troubleshoot.fixes.plan import RunCommand

    marker = tmp_path / "ran-from-the-working-folder"
    (tmp_path / "json.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    monkeypatch.chdir(tmp_path)
    plan = Plan("t", "t", {}, (RunCommand((sys.executable, "-c", "import json, os; print(os.getcwd())"), why="x"),))
    out = executor.apply(executor.prepare(plan))
    assert out.failed is None and not marker.exists()
    assert out.entry.data["steps"][0]["output"].strip() == "/"
