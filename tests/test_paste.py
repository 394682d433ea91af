"""State dumps pasted into a log are facts of the machine the log came from: fact rules work on a
pasted log alone (--no-probe), and the evidence names the pasted line."""

import json

import pytest

from conftest import REPO, run_cli
from troubleshoot import paste
from troubleshoot.probes import nvml
from troubleshoot.probes.base import ProbeContext
from troubleshoot.paste import needles as paste_needles, reader
from troubleshoot.paste.nvsmi_q import ReplayNVML
from troubleshoot.paste.parsers import PARSERS
from troubleshoot.scan.ansi import ANSI

PASTED = REPO / "tests" / "fixtures" / "pasted"
MACHINES = REPO / "tests" / "fixtures" / "machines"


def diagnose(path) -> list[dict]:
    p = run_cli("diagnose", "--no-probe", "--format", "json", "--log", str(path))
    assert p.returncode == 0, p.stderr.decode()
    return json.loads(p.stdout)["diagnoses"]


def log_evidence(d: dict) -> list[str]:
    return [e["text"] for e in d["evidence"] if e["source"] == "log"]


@pytest.mark.parametrize("name,symptom,line", [
    ("lsmod-nouveau.txt", "nouveau-conflict", "nouveau              1601536  1"),
    ("lspci-nouveau-in-use.txt", "nouveau-conflict", "Kernel driver in use: nouveau"),
    ("lspci-rtx2060-x8.txt", "pcie-degraded", "LnkSta:\tSpeed 8GT/s (ok), Width x8 (downgraded)"),
    ("nvsmi-470-pip-torch-cu121.txt", "driver-too-old", "torch                    2.1.0+cu121"),
])
def test_pasted_dump_gives_its_diagnosis_without_probing(name, symptom, line):
    ds = diagnose(PASTED / name)
    assert ds and ds[0]["symptom"] == symptom, [d["rule"] for d in ds]
    assert any(line in t for t in log_evidence(ds[0]))


def test_driver_and_torch_from_the_paste_are_both_evidence():
    d = diagnose(PASTED / "nvsmi-470-pip-torch-cu121.txt")[0]
    assert any("Driver Version: 470.86" in t for t in log_evidence(d))
    assert "12.1" in d["explain"]


def test_nvidia_smi_q_paste_reads_like_the_probe():
    text = (MACHINES / "pcie-degraded" / "nvidia-smi-q.txt").read_text()
    got = paste.read("some job output\n" + text + "\nTraceback (most recent call last):\n").facts["nvml"]
    probed = nvml.probe(ProbeContext(nvml=ReplayNVML(MACHINES / "pcie-degraded" / "nvidia-smi-q.txt")))
    assert got["driver_version"] == probed["driver_version"]
    assert [g["pcie_width_current"] for g in got["gpus"]] == [g["pcie_width_current"] for g in probed["gpus"]]


def test_ldconfig_with_two_cudarts():
    text = ("$ ldconfig -p | grep cudart\n"
            "\tlibcudart.so.12 (libc6,x86-64) => /usr/local/cuda-12.4/targets/x86_64-linux/lib/libcudart.so.12\n"
            "\tlibcudart.so.11.0 (libc6,x86-64) => /usr/local/cuda-11.0/targets/x86_64-linux/lib/libcudart.so.11.0\n"
            "\tlibcudart.so (libc6,x86-64) => /usr/local/cuda-12.4/targets/x86_64-linux/lib/libcudart.so\n")
    got = paste.read(text)
    assert got.facts["cuda"]["versions"]["libcudart"] == ["11.0", "12"]
    assert got.lines["cuda.versions.libcudart"][0] == 2


def test_docker_info_runtimes():
    text = " Server Version: 24.0.7\n Runtimes: io.containerd.runc.v2 runc\n Default Runtime: runc\n"
    docker = paste.read(text).facts["docker"]
    assert docker["runtimes"] == ["io.containerd.runc.v2", "runc"] and docker["nvidia_runtime"] is False


def test_pip_list_and_collect_env():
    got = paste.read("torch                     1.8.0+cu101\ntorchvision               0.9.0+cu101\n").facts
    assert got["frameworks"]["torch"] == {"version": "1.8.0+cu101", "cuda": "10.1"}
    env = paste.read("PyTorch version: 2.1.0+cu121\nCUDA used to build PyTorch: 12.1\n"
                     "Nvidia driver version: 525.105.17\n").facts
    assert env["frameworks"]["torch"]["cuda"] == "12.1"
    assert env["nvml"]["driver_version"] == "525.105.17" and env["nvml"]["cuda_driver_version"] == "12.0"


def test_ordinary_training_lines_are_not_dumps():
    text = "Epoch 3 100\nstep 1200 loss 1.234\ntorch.cuda.OutOfMemoryError: CUDA out of memory.\n"
    assert not paste.read(text)


def test_pasted_facts_override_probed_ones_and_keep_the_rest():
    merged = paste.merge({"nvml": {"available": False, "gpus": []}, "io": {"cpu_count": 8}},
                         paste.read((PASTED / "lspci-rtx2060-x8.txt").read_text()))
    assert merged["nvml"]["gpus"][0]["pcie_width_current"] == 8 and merged["io"] == {"cpu_count": 8}


def _dump_texts():
    """Every real dump the tests and the shipped fact rules' examples hold."""
    from troubleshoot.engine.ruleset import load_ruleset

    texts = [p.read_text() for p in sorted(PASTED.glob("*.txt"))]
    texts += [p.read_text() for p in sorted(MACHINES.glob("*/*.txt"))]
    for rule in load_ruleset(use_config=False).rules:
        if not rule.log:
            texts += list(rule.examples.match) + list(rule.examples.no_match)
    return texts


def test_each_parser_needs_one_of_its_needles():
    # The literal guard must never hide a dump: whatever a parser reads from a text, the text
    # holds one of that parser's needles.
    checked = 0
    for text in _dump_texts():
        lines = [t.rstrip("\r") for t in text.split("\n")]
        for parse, needles in PARSERS:
            if parse(lines) is not None:
                checked += 1
                assert set(needles) & paste_needles.needles_in(text, needles), (parse.__name__, text[:200])
    assert checked >= 10


def test_needles_found_in_one_pass_are_those_a_search_per_needle_finds(monkeypatch):
    """A long head is searched for every needle at once (hyperscan, when installed): the same
    needles as one `in` per needle, non-ASCII text, colour and a needle at the very start too."""
    import random

    from troubleshoot.paste import monitor

    needles = tuple(dict.fromkeys(n for _, ns in PARSERS + monitor.CPU_PARSERS for n in ns))
    rnd = random.Random(4)
    for trial in range(6):
        words = ["step 1 loss 0.2", "é漢字 \x1b[31mred\x1b[0m", "torch/utils/data", "GPU0 ", "x = y"]
        words += rnd.sample(needles, 3)
        text = "\n".join(rnd.choice(words) for _ in range(20000))
        if trial % 2:
            text = "GPU 0: H100\n" + text
        assert len(text) >= paste_needles.ONE_PASS_CHARS
        want = {n for n in needles if n in text or (n[0] == "\n" and text.startswith(n[1:]))}
        assert paste_needles.needles_in(text, needles) == want
    monkeypatch.setattr(paste_needles, "ONE_PASS_CHARS", 1 << 40)  # the search per needle, for comparison
    assert paste_needles.needles_in(text, needles) == want


def test_a_log_head_read_as_bytes_gives_what_its_text_gives():
    """`read_head` looks for the needles in the raw bytes and decodes only when one may be there:
    it must find every dump `read` finds in the decoded text, with colour codes inside a needle,
    a needle at the very start behind an escape, invalid UTF-8 and heads past ONE_PASS_CHARS."""
    import random

    needles = paste_needles.needles_of(PARSERS)
    dumps = [t for t in _dump_texts() if paste.read(t)]
    assert len(dumps) >= 10
    filler = ["step 1 loss 0.2", "é漢字 \x1b[31mred\x1b[0m", "torch/utils/data", "GPU0 ", "x = y"]
    rnd = random.Random(7)
    for trial in range(24):
        dump = rnd.choice(dumps)
        if trial % 3 == 1:  # colour inside every needle it holds: only the stripped text holds them
            for n in needles:
                if len(n.strip()) > 2 and n in dump:
                    k = len(n) // 2
                    dump = dump.replace(n, n[:k] + "\x1b[1m" + n[k:])
        body = "\n".join(rnd.choice(filler) for _ in range(rnd.choice((3, 9000))))
        text = (dump + "\n" + body) if trial % 2 else (body + "\n" + dump)
        if trial % 4 == 3:
            text = "\x1b[0m" + text.lstrip("\n")
        raw = text.encode("utf-8") + (b"\xff\xfe broken" if trial % 5 == 0 else b"")
        want = paste.read(raw.decode("utf-8", "replace"))
        assert paste.read_head(raw) == want, trial
        stripped = ANSI.sub("", raw.decode("utf-8", "replace"))
        assert paste_needles.needles_in(stripped, needles) <= paste_needles.needles_in_bytes(raw, needles), trial
    assert paste.read_head(b"") == paste.Pasted() and not paste.read_head(b"step 1 loss 0.2\n" * 10000)


def test_a_log_without_dumps_is_never_split_into_lines(monkeypatch):
    calls = []
    spied = tuple((lambda lines, p=parse: calls.append(p.__name__) or p(lines), needles)
                  for parse, needles in PARSERS)
    monkeypatch.setattr(reader, "PARSERS", spied)
    log = "".join(f"step {i} loss {1 / (i + 1):.4f} lr 3e-4\n" for i in range(2000)) + (
        "Traceback (most recent call last):\n"
        '  File "/opt/conda/lib/python3.10/site-packages/torch/nn/modules/module.py", line 1501, in _call_impl\n'
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 7.79 GiB total capacity)\n")
    assert not paste.read(log) and calls == []
    assert paste.read(log + "torch                     1.8.0+cu101\n") and calls == ["packages"]


@pytest.mark.parametrize("line,value", [
    ("CUDA_VISIBLE_DEVICES=0,1,2,3", "0,1,2,3"),  # env | grep CUDA (pytorch/pytorch#38616)
    ("export CUDA_VISIBLE_DEVICES=\"1\"", "1"),
    ("(venv) user@node1 run# CUDA_VISIBLE_DEVICES=2 python train.py --bs 8", "2"),
    ("root@3f2c:/workspace$ export CUDA_VISIBLE_DEVICES=MIG-89c850dc-38e3-57df-85c7-690c186b68e9",
     "MIG-89c850dc-38e3-57df-85c7-690c186b68e9"),
])
def test_pasted_device_selection_is_the_env_of_the_job(line, value):
    got = paste.read(f"some output\n{line}\nmore output\n")
    assert got.facts["env"] == {"CUDA_VISIBLE_DEVICES": value}
    assert got.lines["env.CUDA_VISIBLE_DEVICES"] == (2, line)


@pytest.mark.parametrize("line", [
    "# CUDA_VISIBLE_DEVICES=0 python train.py",  # a comment in a pasted script
    "os.environ['CUDA_VISIBLE_DEVICES'] = '0'",
    "Setting up with CUDA_VISIBLE_DEVICES=0 from the launcher",
])
def test_mentions_of_the_variable_are_not_its_value(line):
    assert "env" not in paste.read(line + "\n").facts
