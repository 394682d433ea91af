"""GPU monitoring loops followed over time (troubleshoot.paste.gpuloops): a GPU's utilisation
swinging between busy and idle, its SM clock falling while it stays busy, and the clock event
reasons of a query loop. The samples follow each tool's printed format: `nvidia-smi dmon`'s
header and columns, `--query-gpu` CSV with and without a header (NVML's reason bits as
documented for nvmlClocksEventReasons), and gpustat's one line per GPU."""

import os

import pytest

from conftest import diagnose_pasted as diagnose
from troubleshoot import paste

DMON_HOT = """\
# gpu   pwr  gtemp  mtemp    sm   mem   enc   dec  mclk  pclk
# Idx     W      C      C     %     %     %     %   MHz   MHz
    0   345     71      -    99    41     0     0  9751  1920
    0   340     78      -    99    40     0     0  9751  1905
    0   338     83      -    99    41     0     0  9751  1860
    0   301     86      -    98    40     0     0  9751  1560
    0   282     88      -    99    41     0     0  9751  1395
    0   275     89      -    99    40     0     0  9751  1350
    0   270     90      -    99    41     0     0  9751  1320
"""


def gpustat(*utils: int, gpu: int = 0) -> str:
    return "".join(f"[{gpu}] NVIDIA GeForce RTX 3090 | 60°C, {u:3d} % | 20195 / 24576 MB | user(20190M)\n" for u in utils)


def rules_of(text: str) -> list[str]:
    return [d["rule"] for d in diagnose(text)["diagnoses"]]


def test_a_clock_that_falls_while_the_gpu_is_busy_and_hot_is_a_thermal_slowdown():
    facts = paste.read(DMON_HOT).facts["run"]
    # the best clock of the first half (1920) against the median of the last third (1350, 1320)
    assert (facts["sm_clock_first_mhz"], facts["sm_clock_last_mhz"], facts["sm_clock_drop_pct"]) == (1920, 1335, 30.5)
    assert facts["gpu_temp_max"] == 90
    got = diagnose(DMON_HOT)["diagnoses"]
    assert [d["rule"] for d in got] == ["gpu-clock-falls-while-hot"]
    assert "1920 MHz" in got[0]["explain"] and "90 °C" in got[0]["explain"]


def test_a_clock_that_falls_at_the_power_limit_while_cool_is_said_to_be_normal():
    rows = [(1410, 55), (1410, 58), (1395, 61), (1305, 63), (1095, 64), (1080, 64), (1080, 64)]
    text = ("index, utilization.gpu [%], clocks.sm [MHz], temperature.gpu, power.draw [W]\n"
            + "".join(f"0, 100 %, {c} MHz, {t}, 400.00 W\n" for c, t in rows))
    got = diagnose(text)["diagnoses"]
    assert [(d["rule"], d["severity"]) for d in got] == [("gpu-clock-falls-while-cool", "info")]


def test_clock_samples_of_an_idle_gpu_do_not_count():
    # the clock falls, but only once the GPU went idle: boost ending, not a slowdown
    rows = [(1980, 99)] * 4 + [(210, 0)] * 6
    text = ("index, utilization.gpu [%], clocks.sm [MHz], temperature.gpu\n"
            + "".join(f"0, {u} %, {c} MHz, 86\n" for c, u in rows))
    assert "sm_clock_drop_pct" not in paste.read(text).facts["run"]


@pytest.mark.parametrize("column,none,value,reasons", [
    ("clocks_event_reasons.active", "0x0000000000000000", "0x0000000000000040", ["hw_thermal_slowdown"]),
    ("clocks_throttle_reasons.active", "0x0000000000000000", "0x00000000000000A8",
     ["hw_power_brake_slowdown", "hw_slowdown", "sw_thermal_slowdown"]),
    ("clocks_event_reasons.hw_slowdown", "Not Active", "Active", ["hw_slowdown"]),
])
def test_clock_event_reasons_of_a_query_loop_are_the_watchers_reasons(column, none, value, reasons):
    text = (f"$ nvidia-smi --query-gpu=index,utilization.gpu,clocks.sm,{column} --format=csv,noheader,nounits -l 1\n"
            f"0, 99, 1410, {none}\n0, 99, 1200, {value}\n")
    facts = paste.read(text).facts["run"]
    assert facts["throttle_reasons"] == reasons and facts["throttled"] is True
    assert "run-clocks-throttled" in rules_of(text)


def test_the_power_cap_and_idle_reasons_are_not_a_slowdown():
    text = ("index, utilization.gpu [%], clocks.sm [MHz], clocks_event_reasons.active\n"
            "0, 100 %, 1410 MHz, 0x0000000000000004\n0, 0 %, 210 MHz, 0x0000000000000001\n")
    assert "throttled" not in paste.read(text).facts["run"]


def test_utilisation_that_swings_between_busy_and_idle_is_an_input_bound_job():
    text = gpustat(99, 0, 4, 97, 0, 100, 1, 98)
    facts = paste.read(text).facts["run"]
    assert (facts["gpu_util_swings"], facts["gpu_util_idle_pct"], facts["samples"]) == (6, 50.0, 8)
    doc = diagnose(text)
    assert [d["rule"] for d in doc["diagnoses"]] == ["gpu-util-swings-between-busy-and-idle"]
    assert doc["facts_source"] is None  # a monitoring loop's readings are no facts of the machine's software


def test_one_dip_or_an_idle_card_beside_a_busy_one_is_no_swing():
    steady = gpustat(98, 97, 99, 100, 0, 98, 97, 99, 99)  # one dip: an evaluation, a checkpoint
    assert "gpu-util-swings-between-busy-and-idle" not in rules_of(steady)
    # two GPUs interleaved: GPU 0 busy throughout, GPU 1 idle throughout (not the job's)
    pairs = "".join(gpustat(98) + gpustat(0, gpu=1) for _ in range(8))
    facts = paste.read(pairs).facts["run"]
    assert facts.get("gpu_util_swings", 0) == 0 and facts["gpu_util_avg"] == 98.0


def test_a_dmon_paste_gives_its_own_diagnosis_once():
    rows = [99, 8, 5, 97, 3, 98, 4, 99, 6]
    text = ("# gpu   pwr  gtemp  mtemp    sm   mem   enc   dec  mclk  pclk\n"
            "# Idx     W      C      C     %     %     %     %   MHz   MHz\n"
            + "".join(f"    0   300     60     62    {u:2d}    40     0     0  2619  1980\n" for u in rows))
    got = [d for d in diagnose(text)["diagnoses"] if d["symptom"] == "io-stall"]
    assert [d["rule"] for d in got] == ["dmon-gpu-alternates-idle-busy"]  # it refines the swings rule


def test_the_watcher_reads_its_own_samples_as_a_pasted_loop_is_read():
    """`troubleshoot run` samples the job's GPUs through NVML (mean SM clock, hottest temperature,
    mean utilisation per sample): the same series gives the same trend facts as the paste."""
    from troubleshoot.run import watch

    w = watch.Watcher(os.getpid(), nvml=False)
    rows = [(99, 1920, 71), (99, 1905, 78), (99, 1860, 83), (98, 1560, 86), (99, 1395, 88), (99, 1350, 89), (99, 1320, 90)]
    for i, (util, clock, temp) in enumerate(rows):
        w.samples.append(watch.Sample(i, 100.0, 1.0, 0, 0.0, 1000.0, gpu_util=util, gpu_mem_mib=10.0,
                                      sm_mhz=clock, temp_c=temp))
    got = w.facts(final=True)
    pasted = paste.read(DMON_HOT).facts["run"]
    keys = ("sm_clock_drop_pct", "sm_clock_first_mhz", "sm_clock_last_mhz", "gpu_temp_max")
    assert {k: got[k] for k in keys} == {k: pasted[k] for k in keys}
    assert got["gpu_util_swings"] == 0
