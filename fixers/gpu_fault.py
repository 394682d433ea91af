"""GPU faults: an escalation ladder (restart the job, reset the GPU, reboot, collect evidence
for RMA). The first rung follows NVIDIA's Xid catalog for the code; each time the fixer is
asked again for the same GPU after a rung was applied, the fault did not clear, and the next
rung is proposed."""

from __future__ import annotations

from troubleshoot_fixers.facts import fact
from troubleshoot.fixes.api import Fixer, Param
from troubleshoot.fixes.executor import ladder_attempts
from troubleshoot.fixes.plan import Advice, Plan, RunCommand, Verify

RUNGS = ("restart-job", "reset-gpu", "reboot", "rma-evidence")
# Xid catalog immediate action -> first rung (../shared/reference/field-notes.md §1).
FIRST_RUNG = {
    **{x: "restart-job" for x in (8, 13, 31, 32, 43, 45, 63, 68, 92, 94)},
    **{x: "reset-gpu" for x in (48, 62, 64, 95, 109, 119, 120, 136, 140, 143, 155, 156, 158)},
    79: "reboot",
    74: "rma-evidence",
}




class GpuFault(Fixer):
    id = "gpu-fault"
    title = "Recover from a GPU fault, escalating step by step"
    params = (
        Param("xid", type=int, help="Xid code from the kernel log"),
        Param("pci", pattern=r"(?:[0-9A-Fa-f]{4,8}:)?[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-7])?", help="PCI address of the GPU"),
    )
    needs_snapshot = True

    def plan(self, params, snapshot):
        xid, pci = params["xid"], params["pci"]
        ladder = f"gpu-fault:{(pci or 'any').lower()}"
        tried = [a.get("rung") for a in ladder_attempts(ladder) if a.get("rung") in RUNGS]
        start = FIRST_RUNG.get(xid, "restart-job") if xid is not None else "restart-job"
        rung = start
        if tried:
            last = max(RUNGS.index(r) for r in tried)
            rung = RUNGS[min(last + 1, len(RUNGS) - 1)] if RUNGS.index(start) <= last else start
        gpu = f"GPU {pci}" if pci else "the GPU"
        why_up = (f" ({', '.join(tried)} already tried and the fault came back)" if tried else
                  f" (NVIDIA's Xid catalog: first action for Xid {xid})" if xid is not None else "")
        target = ("-i", pci) if pci else ()
        actions: list = []
        if rung == "restart-job":
            actions.append(Advice(f"Restart the job{why_up}. An application-level Xid (13, 31, 43: a kernel's own "
                                  f"bad access) comes from the code or a framework bug, not the hardware: rerun once "
                                  f"with `CUDA_LAUNCH_BLOCKING=1`. If the same Xid returns on {gpu}, ask again: the next "
                                  f"step is a GPU reset."))
        elif rung == "reset-gpu":
            procs = [p for g in (fact(snapshot, "nvml", "gpus") or []) for p in (g.get("processes") or [])]
            busy = ", ".join(f"{p.get('pid')} ({p.get('name') or '?'})" for p in procs[:8])
            actions += [
                Advice(f"Stop every process on {gpu} first{': ' + busy if busy else ''}; drain the node in Slurm "
                       f"(`scontrol update nodename=$(hostname -s) state=drain reason=xid{xid or ''}`) or cordon it in Kubernetes."),
                RunCommand(("nvidia-smi", "--gpu-reset", *target), why=f"reset {gpu}{why_up}", needs_root=True),
            ]
        elif rung == "reboot":
            actions += [
                Advice(f"{gpu} needs the machine rebooted{why_up}: the driver cannot recover it (for Xid 79 the "
                       f"GPU dropped off the PCIe bus). Drain the node first. If it happens again after the reboot, ask "
                       f"again: the next step collects evidence for the vendor."),
                RunCommand(("shutdown", "-r", "+1", f"troubleshoot: GPU fault on {pci or 'a GPU'}"),
                           why="reboot in one minute (cancel with `shutdown -c`)", needs_root=True,
                           undo=("shutdown", "-c")),
            ]
        else:
            out = f"/var/tmp/nvidia-bug-report-{(pci or 'gpu').replace(':', '-')}.log.gz"
            actions += [
                RunCommand(("nvidia-bug-report.sh", "--output-file", out), why="the driver's full report for the vendor",
                           needs_root=True),
                Advice(f"The fault persists{why_up}. Keep {gpu} out of service, run the long diagnostic "
                       f"(`dcgmi diag -r 3`, exclusive use of the GPU) and open an RMA/support case with {out}, the "
                       f"`nvidia-smi -q` output and the Xid lines of `dmesg -T`."),
            ]
        verify = None
        if rung in ("reset-gpu",):
            verify = Verify(f"{gpu} answers NVML after the reset", argv=("nvidia-smi", "-q", *target))
        return Plan(self.id, f"GPU fault{' Xid ' + str(xid) if xid is not None else ''}: {rung.replace('-', ' ')}",
                    params, tuple(actions), verify=verify, ladder=ladder, rung=rung,
                    notes=(f"Escalation ladder: {' → '.join(RUNGS)}; this is '{rung}'.",))


FIXERS = [GpuFault()]
