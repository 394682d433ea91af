"""The one on-disk cache (usercache.Cache): an entry is read back only for the stamp, program
version and format it was written with, whole and from a private folder of this user's; anything
else is a miss, never an exception."""

import os
import stat
from pathlib import Path

import pytest

from troubleshoot import usercache

CACHE = usercache.Cache("test-entries", format=1)


def folder() -> Path:
    return Path(os.environ["XDG_CACHE_HOME"]) / "troubleshoot" / "test-entries"


def test_an_entry_is_read_back_for_its_stamp_only():
    CACHE.put("key", ("a.yaml", 10, 20), b"payload")
    assert CACHE.get("key", ("a.yaml", 10, 20)) == b"payload"
    assert CACHE.get("key", ("a.yaml", 10, 21)) is None
    assert CACHE.get("other key", ("a.yaml", 10, 20)) is None
    assert usercache.Cache("test-entries", format=2).get("key", ("a.yaml", 10, 20)) is None
    CACHE.put("key", ("a.yaml", 10, 21), b"new")  # one file per key: the new stamp replaces the old
    assert CACHE.get("key", ("a.yaml", 10, 21)) == b"new" and len(list(folder().iterdir())) == 1


def test_another_program_version_misses(monkeypatch):
    import troubleshoot

    CACHE.put("key", (), b"payload")
    monkeypatch.setattr(troubleshoot, "__version__", "0.0.0-other")
    assert CACHE.get("key", ()) is None


def test_the_folder_lives_under_xdg_cache_home_and_is_private():
    CACHE.put("key", (), b"payload")
    (entry,) = folder().iterdir()
    assert stat.S_IMODE(folder().stat().st_mode) == 0o700 and stat.S_IMODE(entry.stat().st_mode) == 0o600
    assert entry == CACHE.path("key") and entry.suffix == ".cache"


@pytest.mark.parametrize("damage", ["truncated", "flipped", "foreign", "empty", "head"])
def test_a_damaged_or_foreign_entry_is_a_miss(damage):
    CACHE.put("key", ("s",), b"payload" * 100)
    path = CACHE.path("key")
    blob = path.read_bytes()
    path.write_bytes({"truncated": blob[:-10], "flipped": blob[:-5] + b"X" + blob[-4:],
                      "foreign": b"{\"json\": true}", "empty": b"",
                      "head": blob[:30] + b"\xff" * 8 + blob[38:]}[damage])
    assert CACHE.get("key", ("s",)) is None


def test_an_entry_of_parts_reads_back_each_part_and_is_checked_as_one():
    """put_parts/get_parts (the scan database's ids and bytes): each part comes back as it went
    in; an entry of parts is not a payload, nor the reverse; a damaged one is a miss, and a
    head that claims more bytes than the file holds asks for no buffer of that size."""
    import marshal

    CACHE.put_parts("db", ("s",), (b"ids", b"database" * 1000))
    assert CACHE.get_parts("db", ("s",)) == [b"ids", b"database" * 1000]
    assert CACHE.get("db", ("s",)) is None and CACHE.get_parts("db", ("t",)) is None
    CACHE.put("one", ("s",), b"payload")
    assert CACHE.get_parts("one", ("s",)) is None
    path = CACHE.path("db")
    blob = path.read_bytes()
    path.write_bytes(blob[:-1] + b"X")
    assert CACHE.get_parts("db", ("s",)) is None
    head = marshal.dumps((CACHE.head(("s",)), (3, 1 << 40), 0))
    path.write_bytes(usercache._MAGIC + usercache._HEAD_SIZE.pack(len(head)) + head + b"ids")
    assert CACHE.get_parts("db", ("s",)) is None


def test_an_entry_others_can_write_or_in_a_folder_others_can_write_is_a_miss():
    CACHE.put("key", (), b"payload")
    path = CACHE.path("key")
    os.chmod(path, 0o666)
    assert CACHE.get("key", ()) is None
    os.chmod(path, 0o600)
    os.chmod(folder(), 0o777)
    assert CACHE.get("key", ()) is None
    CACHE.put("key", (), b"other")  # nor is anything written there
    os.chmod(folder(), 0o700)
    assert CACHE.get("key", ()) == b"payload"


def test_a_symlinked_entry_is_a_miss(tmp_path):
    CACHE.put("key", (), b"payload")
    path = CACHE.path("key")
    real = tmp_path / "elsewhere"
    real.write_bytes(path.read_bytes())
    os.chmod(real, 0o600)
    path.unlink()
    path.symlink_to(real)
    assert CACHE.get("key", ()) is None


def test_a_write_replaces_the_entry_whole_and_leaves_no_temporary_file():
    for i in range(5):
        CACHE.put("key", (i,), bytes([i]) * 1000)
    assert [p.name for p in folder().iterdir()] == [CACHE.path("key").name]
    assert CACHE.get("key", (4,)) == b"\x04" * 1000


def test_a_write_that_cannot_happen_never_raises(tmp_path, monkeypatch):
    CACHE.put("key", (object(),), b"payload")  # a stamp marshal cannot hold: not kept
    assert not folder().exists()
    blocked = tmp_path / "file-not-folder"
    blocked.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))
    CACHE.put("key", (), b"payload")
    assert CACHE.get("key", ()) is None


def test_a_cache_that_keeps_a_few_entries_drops_the_least_recently_used():
    small = usercache.Cache("test-entries", format=1, keep=3)
    for i in range(3):
        small.put(i, (), b"x")
        os.utime(small.path(i), ns=(i * 10**9, i * 10**9))  # distinct ages whatever the clock
    assert small.get(0, ()) == b"x"  # read: now the most recently used
    small.put(3, (), b"x")
    assert sorted(p.name for p in folder().iterdir()) == sorted(small.path(k).name for k in (0, 2, 3))


def test_file_stamps_name_a_missing_file_as_missing(tmp_path):
    f = tmp_path / "a"
    f.write_text("x")
    st = f.stat()
    stamps = usercache.file_stamps([f, tmp_path / "gone"])
    assert stamps[0] == (str(f), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)
    assert stamps[1] == (str(tmp_path / "gone"), None)
    with pytest.raises(OSError):
        usercache.file_stamp(tmp_path / "gone")
