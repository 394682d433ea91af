"""The probe stays fast without lying: framework facts from version files and a cache that an
install, driver or boot change invalidates, IO pressure without a sleep, progress on a
terminal, and the entry-point list cached until a package is installed."""

import io
import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from troubleshoot import usercache
from troubleshoot.probes import frameworks
from troubleshoot.probes import io as io_probe
from troubleshoot.probes.base import ProbeContext, ProbeOutcome

FAKE_TORCH_INIT = textwrap.dedent("""\
    import os
    from . import version
    __version__ = version.__version__
    with open(os.environ["FAKE_TORCH_IMPORTS"], "a") as f:
        f.write("import\\n")

    class _Cudnn:
        @staticmethod
        def version():
            return 90100

    class backends:
        cudnn = _Cudnn

    class cuda:
        @staticmethod
        def get_arch_list():
            return ["sm_80", "sm_90"]

        @staticmethod
        def is_available():
            return False

        @staticmethod
        def device_count():
            return 0
""")


def _fake_torch(root: Path, version: str, cuda: str) -> None:
    pkg = root / "torch"
    pkg.mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").write_text(FAKE_TORCH_INIT)
    (pkg / "version.py").write_text(f"from typing import Optional\n__version__ = {version!r}\n"
                                    f"cuda: Optional[str] = {cuda!r}\nhip: Optional[str] = None\n")


def test_framework_facts_cached_and_refreshed_when_the_install_changes(tmp_path, monkeypatch):
    site = tmp_path / "site"
    _fake_torch(site, "2.4.1+cu124", "12.4")
    imports = tmp_path / "imports.txt"
    imports.write_text("")
    monkeypatch.setenv("PYTHONPATH", str(site))
    monkeypatch.setenv("FAKE_TORCH_IMPORTS", str(imports))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))

    first = frameworks.probe(ProbeContext())
    assert first["cached"] is False and imports.read_text().count("import") == 1
    want = {"version": "2.4.1+cu124", "cuda": "12.4", "hip": None, "cudnn": 90100, "arch_list": ["sm_80", "sm_90"],
            "cuda_available": False, "device_count": 0}
    assert {k: first["torch"][k] for k in want} == want

    second = frameworks.probe(ProbeContext())
    assert second["cached"] is True and imports.read_text().count("import") == 1  # no import the second time
    assert {k: second["torch"][k] for k in want} == want

    _fake_torch(site, "2.5.0+cu126", "12.6")  # reinstalled: new version file
    os.utime(site / "torch" / "version.py", ns=(1, 1))
    third = frameworks.probe(ProbeContext())
    assert third["cached"] is False and imports.read_text().count("import") == 2
    assert third["torch"]["version"] == "2.5.0+cu126" and third["torch"]["cuda"] == "12.6"

    # What a CUDA init depends on changed (here the visible devices): imported again.
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="1")
    fourth = frameworks.probe(ProbeContext(env=env))
    assert fourth["cached"] is False and imports.read_text().count("import") == 3


def test_a_cache_file_others_can_write_is_not_believed(tmp_path, monkeypatch):
    site = tmp_path / "site"
    _fake_torch(site, "2.4.1+cu124", "12.4")
    imports = tmp_path / "imports.txt"
    imports.write_text("")
    monkeypatch.setenv("PYTHONPATH", str(site))
    monkeypatch.setenv("FAKE_TORCH_IMPORTS", str(imports))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    frameworks.probe(ProbeContext())
    (cached,) = (tmp_path / "cache" / "troubleshoot" / "frameworks").glob("*.cache")
    head, payload = usercache.unpack_entry(cached.read_bytes())
    doc = json.loads(payload)
    doc["torch"]["cuda_available"] = True
    cached.write_bytes(usercache.pack_entry(head, json.dumps(doc).encode()))  # a well-formed entry...
    os.chmod(cached, 0o666)  # ...that anyone could have written
    again = frameworks.probe(ProbeContext())
    assert again["cached"] is False and again["torch"]["cuda_available"] is False


def test_frameworks_facts_match_what_importing_torch_reports(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    script = ("import json, torch\n"
              "print(json.dumps({'version': torch.__version__, 'cuda': torch.version.cuda,"
              " 'hip': getattr(torch.version, 'hip', None), 'cudnn': torch.backends.cudnn.version(),"
              " 'arch_list': torch.cuda.get_arch_list() if torch.version.cuda else [],"
              " 'cuda_available': torch.cuda.is_available(), 'device_count': torch.cuda.device_count()}))\n")
    truth = json.loads(subprocess.run([sys.executable, "-c", script], capture_output=True, check=True,
                                      timeout=120).stdout.decode().strip().splitlines()[-1])
    for expect_cached in (False, True):  # imported once, then from the cache
        facts = frameworks.probe(ProbeContext())
        assert facts["available"] is True and facts["cached"] is expect_cached
        assert {k: facts["torch"][k] for k in truth} == truth


def test_io_pressure_read_without_a_sample_where_the_kernel_has_it(tmp_path):
    proc = tmp_path / "proc"
    (proc / "pressure").mkdir(parents=True)
    (proc / "pressure" / "io").write_text("some avg10=12.50 avg60=3.00 avg300=1.00 total=1\n"
                                          "full avg10=4.00 avg60=1.00 avg300=0.50 total=1\n")
    (proc / "meminfo").write_text("MemTotal: 2048000 kB\nMemAvailable: 1024000 kB\n")

    def no_sleep(_seconds):
        raise AssertionError("slept although /proc/pressure/io has the averages")

    facts = io_probe.probe(ProbeContext(root=tmp_path, sleep=no_sleep))
    assert facts["pressure_some_avg10"] == 12.5 and facts["pressure_full_avg10"] == 4.0
    assert facts["iowait_pct"] is None and facts["sample_seconds"] is None

    (proc / "pressure" / "io").unlink()
    slept = []
    (proc / "stat").write_text("cpu  100 0 100 1000 50 0 0 0 0 0\n")
    facts = io_probe.probe(ProbeContext(root=tmp_path, sleep=slept.append))
    assert slept == [0.5] and facts["sample_seconds"] == 0.5 and facts["pressure_some_avg10"] is None


class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_progress_appears_on_a_terminal_only_when_probes_are_slow():
    from troubleshoot.report.progress import ProbeProgress

    quick = _Tty()
    with ProbeProgress(["nvml", "frameworks"], stream=quick, delay=30) as p:
        p.on_result(ProbeOutcome("nvml", {}, 0.1, "ok"))
    assert quick.getvalue() == ""

    slow = _Tty()
    with ProbeProgress(["nvml", "frame\x1b[2Jworks"], stream=slow, delay=0.01, interval=0.01) as p:
        p.on_result(ProbeOutcome("nvml", {}, 0.1, "ok"))
        deadline = time.monotonic() + 30
        while "waiting for" not in slow.getvalue() and time.monotonic() < deadline:
            threading.Event().wait(0.01)
    out = slow.getvalue()
    assert "waiting for frame\\x1b[2Jworks" in out and "nvml" not in out.split("waiting for")[-1]
    assert out.endswith("\r\x1b[K")  # the line is cleared when the probes are done

    piped = io.StringIO()  # not a terminal: no progress thread at all
    with ProbeProgress(["nvml"], stream=piped, delay=0.0, interval=0.01) as p:
        assert p._thread is None
    assert piped.getvalue() == ""


def test_entry_points_are_cached_until_a_folder_on_the_path_changes(tmp_path, monkeypatch):
    from troubleshoot import plugins

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    extra = tmp_path / "site"
    extra.mkdir()
    monkeypatch.setattr(sys, "path", [sys.path[0], str(extra), *sys.path[1:]])
    first = plugins._entry_points()
    assert ("fixers", "troubleshoot_fixers.plugin") in first
    assert plugins._entry_points() == first  # from the cache
    dist = extra / "acme_ts-1.0.dist-info"  # a package installed into a folder on the path
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-ts\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[troubleshoot]\nacme = acme_ts.plugin\n")
    os.utime(extra, ns=(1, 10**18))
    assert ("acme", "acme_ts.plugin") in plugins._entry_points()
