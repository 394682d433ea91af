"""`troubleshoot diagnose|probe|run` leave without the interpreter's teardown: everything they
print still comes out, their exit status is kept, and atexit handlers still run."""

import os
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def troubleshoot(*args, cwd=None, **kw):
    return subprocess.run([sys.executable, "-m", "troubleshoot", *args], capture_output=True, text=True,
                          timeout=120, cwd=cwd or ROOT, **kw)


def test_the_whole_output_and_the_exit_status_come_out(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB\n" * 3)
    out = troubleshoot("diagnose", "--no-probe", "--format", "json", "--log", str(log), "--fail-on", "error")
    assert out.returncode == 1, out.stderr
    assert out.stdout.rstrip().endswith("}") and '"cuda-oom"' in out.stdout
    big = troubleshoot("diagnose", "--no-probe", "--log", str(log))
    assert big.returncode == 0 and "CUDA out of memory" in big.stdout


def test_atexit_handlers_of_a_plugin_still_run(tmp_path):
    marker = tmp_path / "atexit-ran"
    plugin = tmp_path / "leaving.py"
    plugin.write_text(textwrap.dedent(f"""
        import atexit
        atexit.register(lambda: open({str(marker)!r}, "w").write("ran"))
    """))
    log = tmp_path / "train.log"
    log.write_text("all fine\n")
    out = troubleshoot("diagnose", "--no-probe", "-p", str(plugin), "--log", str(log))
    assert out.returncode == 0, out.stderr
    assert marker.read_text() == "ran"


def test_a_reader_that_leaves_early_is_no_error(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    p = subprocess.Popen([sys.executable, "-m", "troubleshoot", "diagnose", "--no-probe", "--format", "json", "--log",
                          str(log)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    p.stdout.read(10)
    p.stdout.close()  # `| head -c 10`
    err = p.stderr.read()
    assert p.wait(timeout=120) in (0, 120) and b"Traceback" not in err


def test_a_thread_still_running_gets_the_ordinary_exit(tmp_path):
    """A plugin's non-daemon thread is waited for, as Python always does: this one only finishes
    once the main thread has (os._exit would have ended it first)."""
    marker = tmp_path / "thread-finished"
    plugin = tmp_path / "lingering.py"
    plugin.write_text(textwrap.dedent(f"""
        import threading
        def later():
            threading.main_thread().join()
            open({str(marker)!r}, "w").write("done")
        threading.Thread(target=later).start()
    """))
    log = tmp_path / "train.log"
    log.write_text("all fine\n")
    out = troubleshoot("diagnose", "--no-probe", "-p", str(plugin), "--log", str(log))
    assert out.returncode == 0, out.stderr
    assert marker.read_text() == "done"
