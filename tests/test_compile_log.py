"""torch.compile recompiling, read from the log (troubleshoot.paste.compiled), and GPU memory
that grows in a validation loop. The recompile lines are the messages of torch/_dynamo/guards.py
("Recompiling function NAME in FILE:LINE") and torch/_dynamo/convert_frame.py ("torch._dynamo hit
config.%s (%s)" with "   function: 'NAME' (FILE:LINE)") under TORCH_LOGS' prefix; the validation
lines are OpenMMLab's (mmengine's LogProcessor: "Epoch(val) [E][I/N] ... memory: MiB")."""


from conftest import diagnose_pasted as diagnose, run_cli
from troubleshoot import paste

RECOMPILE = ("V1206 10:01:02.000000 123 torch/_dynamo/guards.py:2997] [0/{n}] [__recompiles] "
             "Recompiling function forward in /work/model.py:120\n"
             "V1206 10:01:02.000000 123 torch/_dynamo/guards.py:2997] [0/{n}] [__recompiles]     "
             "triggered by the following guard failure(s):\n")
LIMIT = ("W1206 10:01:09.000000 123 torch/_dynamo/convert_frame.py:1001] [0/8] torch._dynamo hit config.{limit} (8)\n"
         "W1206 10:01:09.000000 123 torch/_dynamo/convert_frame.py:1001] [0/8]    function: 'decode' (/work/model.py:300)\n")


def growing(n: int = 6) -> list[str]:
    return [f"step {100 * (i + 1)} loss 2.0 allocated: {1000 + 500 * i}.0 MB\n" for i in range(n)]


def test_recompilations_and_the_limit_are_read_as_facts():
    for limit in ("recompile_limit", "cache_size_limit"):  # renamed after PyTorch 2.6
        text = RECOMPILE.format(n=1) + RECOMPILE.format(n=2) + LIMIT.format(limit=limit)
        got = paste.read(text).facts["compile"]
        assert got == {"available": True, "recompiles": 2, "functions": ["forward", "decode"],
                       "limit_hit": True, "limit": f"{limit} (8)"}


def test_a_memory_leak_in_a_job_that_recompiles_names_the_recompilations():
    lines = growing()
    text = "".join(lines[:2]) + RECOMPILE.format(n=1) + "".join(lines[2:4]) + RECOMPILE.format(n=2) + "".join(lines[4:])
    (d,) = diagnose(text)["diagnoses"]
    assert d["rule"] == "gpu-memory-allocated-keeps-growing"
    assert "2 recompilations by torch.compile (forward)" in d["explain"]
    plain = diagnose("".join(lines))["diagnoses"][0]
    assert d["confidence"] > plain["confidence"] and "recompilations" not in plain["explain"]


def test_recompilations_alone_are_no_diagnosis():
    text = RECOMPILE.format(n=1) + RECOMPILE.format(n=2) + LIMIT.format(limit="recompile_limit")
    assert diagnose(text)["diagnoses"] == []


def test_the_recompilations_are_not_facts_of_the_machine():
    p = run_cli("diagnose", "--no-probe", "--log", "-", input=("".join(growing()) + RECOMPILE.format(n=1)).encode())
    assert "From the log: torch" not in p.stdout.decode() and "compile" not in p.stdout.decode().splitlines()[0]


def val(memory: list[int], train: int | None = None) -> str:
    out = []
    for i, mib in enumerate(memory):
        if train is not None:
            out.append(f"Epoch(train)  [2][{50 * (i + 1):4d}/1000]  lr: 2.0000e-02  eta: 0:10:00  time: 0.3012  "
                       f"data_time: 0.0101  memory: {train}  loss: 1.2\n")
        out.append(f"Epoch(val) [1][{50 * (i + 1):3d}/500]    eta: 0:00:25  time: 0.0569  data_time: 0.0023  memory: {mib}\n")
    return "".join(out)


def test_memory_that_grows_through_a_validation_loop_is_a_leak_of_that_loop():
    got = diagnose(val([1204, 1390, 1577, 1763, 1949, 2136], train=3456))["diagnoses"]
    assert [d["rule"] for d in got] == ["gpu-memory-grows-during-validation"]
    assert "from 1204 to 2136 MiB" in " ".join(got[0]["explain"].split())


def test_flat_validation_memory_beside_training_memory_is_no_leak():
    # training peaks above validation, both flat: the two series are read apart, not as a saw-tooth
    assert diagnose(val([1204] * 6, train=3456))["diagnoses"] == []
