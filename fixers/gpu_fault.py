"""GPU faults: do what NVIDIA's Xid catalog says for the fault (rules/xid-catalog.yaml), and go
one step further only when the journal shows the previous step was done and the fault came back.

The action comes from, in order: NVML's GPU recovery action for that GPU (the driver's own
verdict, when the snapshot has it), the `action` parameter (a diagnosis passes its own), the
catalog's immediate action for the Xid. Steps per action:
  restart-app      no GPU action; how to debug the program
  check-driver     read the loaded module's version and what nvidia-smi says; how to make them match
  reset-gpu        (drain) -> list what uses the GPU -> stop the services holding it -> reset -> restart them -> verify
  reboot           drain the node (Slurm / Kubernetes when the facts show one) -> reboot, cancellable
  contact-support  nvidia-bug-report.sh and what to attach
Escalation ladder: restart-app -> reset-gpu -> reboot -> contact-support.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from troubleshoot_fixers.facts import fact, printable
from troubleshoot.engine.gpufaults import GPU_HOLDERS, PCI_ADDRESS
from troubleshoot.fixes.api import Fixer, FixerError, Param
from troubleshoot.fixes.executor import ladder_attempts
from troubleshoot.fixes.plan import Advice, Plan, RunCommand, Verify

# The escalation ladder: the catalog's actions a repeated fault climbs, one rung per attempt.
LADDER = ("restart-app", "reset-gpu", "reboot", "contact-support")
# Every action of the Xid catalog (rules/xid-catalog.yaml `actions`; a test keeps them equal):
# the parameter's choices are read when the plugin loads, before any catalog is.
ACTIONS = ("ignore", "restart-app", "check-driver", "check-mechanicals", "restart-fabric-manager", "drain-p2p",
           "reset-gpu", "recover-imex-domain", "reboot", "contact-support")
# Services that keep a GPU open and block a reset (stopped around it, started again after),
# and a GPU's PCI address: the engine's, shared with `troubleshoot remediate`.
HOLDERS, PCI = GPU_HOLDERS, PCI_ADDRESS
# One host name (RFC 1123 labels): no leading '-' (an option to kubectl), no Slurm hostlist
# brackets or commas (one name must never drain 512 nodes).
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9])?"  # '_': Slurm allows it in NodeName
HOST_NAME = re.compile(rf"{_LABEL}(?:\.{_LABEL})*")
DRIVER_VERSION = re.compile(r"\d{3,4}\.\d{1,3}(?:\.\d{1,3})?")
# Journal step statuses that show a step was carried out on the machine (not skipped under --root).
CARRIED_OUT = {"done", "failed", "unchanged", "shown"}


def _norm(pci: str | None) -> str:
    return (pci or "").lower().split(".")[0].removeprefix("0000").removeprefix(":").lstrip("0")


def _same_gpu(a: str | None, b: str | None) -> bool:
    return bool(a and b) and _norm(a)[-5:] == _norm(b)[-5:]


def _gpu_facts(snapshot, pci: str | None) -> dict:
    for g in fact(snapshot, "nvml", "gpus", default=[]) or []:
        if pci and isinstance(g, dict) and _same_gpu(g.get("pci_bus_id"), pci):
            return g
    return {}


def _first_action(xid: int | None, action: str | None, gpu: dict) -> tuple[str, str]:
    """(action, where it came from)."""
    from troubleshoot.engine import gpufaults

    nvml = gpufaults.nvml_recovery(gpu.get("recovery_action"))
    if nvml:
        return nvml[1], f"NVML reports recovery action {nvml[0]!r} for this GPU"
    if action:
        return action, "the diagnosis's action"
    if xid is not None:
        v = gpufaults.verdict(xid)
        if v is not None:
            return v.action, f"NVIDIA's Xid catalog, immediate action for Xid {xid} ({v.name})"
    return "restart-app", "no Xid given: the least drastic step first"


def _recurred(snapshot, pci: str | None, since: str) -> bool | None:
    """Whether an Xid on this GPU was logged after `since` (ISO time); None when the snapshot's
    kernel events carry no wall time to tell."""
    events = fact(snapshot, "kernel", "xid_events", default=None)
    if not events:
        return None
    try:
        after = datetime.fromisoformat(since)
    except ValueError:
        return None
    timed = False
    for e in events if isinstance(events, list) else ():
        when = e.get("time") if isinstance(e, dict) else None
        if not isinstance(when, str) or not when:
            continue
        timed = True
        try:
            t = datetime.fromisoformat(when)
        except ValueError:
            continue
        if (t.tzinfo is None) != (after.tzinfo is None):
            t = t.replace(tzinfo=after.tzinfo)
        if (not pci or _same_gpu(e.get("pci"), pci)) and t > after:
            return True
    return False if timed else None


def _attempts(ladder: str) -> list[dict]:
    """Earlier steps of this ladder taken on this machine. A fix applied under --root ran no
    command here (its steps were skipped), so it is no attempt: counting it would escalate the
    real machine on a rehearsal."""
    out = []
    for a in ladder_attempts(ladder):
        steps = [st for st in a.get("steps") or [] if isinstance(st, dict)]
        if a.get("rung") in LADDER and not a.get("root") and all(st.get("status") in CARRIED_OUT for st in steps):
            out.append(a)
    return out


@dataclass(frozen=True)
class Escalation:
    """What the journal and the kernel's Xid events say about the next step."""

    last: str  # the highest rung tried on this machine
    action: str  # the step to plan now
    note: str  # why, for the plan's notes
    watch: bool = False  # nothing new since the last step: plan no action, keep watching
    advice: str = ""


def _escalation(ladder: str, action: str, snapshot, pci: str | None) -> Escalation | None:
    """The next step after the last attempt: one rung up only on evidence that the fault came
    back after it (an Xid logged later) or that the step itself failed; no evidence, no escalation."""
    tried = _attempts(ladder)
    if not tried:
        return None
    last = max(tried, key=lambda a: LADDER.index(a["rung"]))
    rung, when = last["rung"], last.get("started", "")
    failed = any(isinstance(st, dict) and st.get("kind") == "command" and st.get("status") == "failed"
                 for st in last.get("steps") or [])
    recurred = _recurred(snapshot, pci, when)
    if recurred is False and not failed:
        return Escalation(rung, action, f"'{rung}' was done at {when} and no Xid on this GPU came after it: nothing "
                          f"to escalate.", watch=True, advice=(
                              f"The journal shows '{rung}' was applied at {when} and the kernel log has no Xid on "
                              f"{pci or 'this GPU'} since. Keep watching (`sudo dmesg -T | grep -i xid`); ask again "
                              f"if the fault returns."))
    if LADDER.index(rung) < LADDER.index(action):
        return None
    nxt = LADDER[min(LADDER.index(rung) + 1, len(LADDER) - 1)]
    if recurred is None and not failed:
        return Escalation(rung, action, f"'{rung}' was done at {when}; the facts have no timed Xid events, so "
                          f"whether the fault came back after it is unknown: not escalated. Probe this machine again "
                          f"(its kernel log has the times), or ask for the next step with action={nxt}.")
    why = "the step itself failed" if failed else "an Xid on this GPU was logged after it"
    return Escalation(rung, nxt, f"Escalated: '{rung}' was done at {when} and the fault recurred ({why}); next step: "
                      f"{nxt}.")


class GpuFault(Fixer):
    id = "gpu-fault"
    title = "Recover from a GPU fault: the Xid catalog's action, escalating only when it recurs"
    params = (
        Param("xid", type=int, help="Xid code from the kernel log"),
        Param("pci", pattern=PCI, help="PCI address of the GPU"),
        Param("action", choices=ACTIONS, help="recovery action from the diagnosis (default: from the Xid catalog)"),
    )
    needs_snapshot = True

    def plan(self, params, snapshot):
        xid, pci = params["xid"], params["pci"]
        gpu_facts = _gpu_facts(snapshot, pci)
        action, source = _first_action(xid, params.get("action"), gpu_facts)
        ladder = f"gpu-fault:{(pci or 'any').lower()}"
        notes = [f"First step from {source}: {action}."]
        if action in LADDER:
            step = _escalation(ladder, action, snapshot, pci)
            if step is not None:
                notes.append(step.note)
                if step.watch:
                    return Plan(self.id, f"GPU fault{_xid(xid)}: no new fault since {step.last}", params,
                                (Advice(step.advice),), ladder=ladder, rung="watch", notes=tuple(notes))
                action = step.action
        actions, verify = self._steps(action, xid, pci, snapshot, gpu_facts)
        return Plan(self.id, f"GPU fault{_xid(xid)}: {action.replace('-', ' ')}", params, tuple(actions),
                    verify=verify, ladder=ladder if action in LADDER else None,
                    rung=action if action in LADDER else None,
                    notes=tuple(notes) + (f"Escalation ladder: {' → '.join(LADDER)}.",))

    def _steps(self, action, xid, pci, snapshot, gpu_facts):
        gpu = f"GPU {pci}" if pci else "the GPU"
        target = ("-i", pci) if pci else ()
        if action == "ignore":
            return [Advice(f"No GPU action: NVIDIA's catalog files Xid {xid} as informational here (it follows "
                           f"another event, or is corrected by the hardware). Watch for repeats.")], None
        if action == "restart-app":
            return [Advice(f"No GPU action: the fault on {gpu} came from the program (Xid {xid} is an application "
                           f"fault in NVIDIA's catalog). Restart the job; to find the faulting kernel run it once with "
                           f"`CUDA_LAUNCH_BLOCKING=1`, or under `compute-sanitizer --tool memcheck python train.py`. "
                           f"If the same Xid comes back on this GPU with known-good programs, ask again: the next "
                           f"step is a GPU reset.")], None
        if action == "check-driver":
            return [
                RunCommand(("cat", "/proc/driver/nvidia/version"), why="the kernel module's version, if one is loaded"),
                RunCommand(("nvidia-smi",), why="whether the user-space libraries reach that module"),
                Advice("The kernel module and the user-space libraries (libcuda, libnvidia-ml) must be one release: "
                       "after a driver upgrade, reboot (or unload and load the nvidia modules); if the module does "
                       "not load, read `sudo dmesg | grep -i nvrm` for the reason (Secure Boot, nouveau, a module "
                       "built for another kernel) and reinstall the driver for the running kernel. If the driver "
                       f"loads but {gpu} still fails to initialise (RmInitAdapter), reseat it or open an RMA case."),
            ], None
        if action == "check-mechanicals":
            return [Advice(f"Power the node off and check {gpu}'s auxiliary power cables, its seating/riser and "
                           f"airflow; the GPU runs at reduced clocks until it gets full power.")], None
        if action == "restart-fabric-manager":
            return [RunCommand(("systemctl", "restart", "nvidia-fabricmanager"), needs_root=True,
                               why="Fabric Manager re-initialises the NVSwitch fabric")], \
                Verify("nvidia-fabricmanager is active", argv=("systemctl", "is-active", "--quiet", "nvidia-fabricmanager"))
        if action == "recover-imex-domain":
            return [Advice("Restart the IMEX daemon on every node of this IMEX domain "
                           "(`sudo systemctl restart nvidia-imex`), then rerun the job.")], None
        if action == "contact-support":
            out = f"/var/tmp/nvidia-bug-report-{(pci or 'gpu').replace(':', '-')}.log.gz"
            return [
                RunCommand(("nvidia-bug-report.sh", "--output-file", out), why="the driver's full report for support",
                           needs_root=True),
                Advice(f"Keep {gpu} out of service and open a support/RMA case. Attach {out}, the Xid lines of "
                       f"`sudo dmesg -T`, `nvidia-smi -q -i {pci or '<pci>'}`, and, if the GPU can be taken offline, "
                       f"the result of `dcgmi diag -r 3`."),
            ], None
        drain = _drain_steps(snapshot, f"troubleshoot: Xid {xid if xid is not None else '?'} on {pci or 'a GPU'}")
        if action == "reboot":
            steps = drain or [Advice(f"No Slurm or Kubernetes node in the facts: stop the work on this machine "
                                     f"first. Running on the GPUs now: {_running(snapshot) or 'nothing NVML could see'}.")]
            steps.append(RunCommand(("shutdown", "-r", "+1", f"troubleshoot: GPU fault on {pci or 'a GPU'}"),
                                    why=f"{gpu} cannot be recovered without a reboot; one minute to cancel",
                                    needs_root=True, undo=("shutdown", "-c")))
            return steps, None
        # reset-gpu and drain-p2p
        steps = list(drain)
        if action == "drain-p2p":
            steps.append(Advice(f"Stop peer-to-peer (NVLink) traffic to {gpu}: end the jobs that span it before the reset."))
        procs = [p for p in (gpu_facts.get("processes") or []) if isinstance(p, dict)]
        listed = printable(", ".join(f"{p.get('pid')} ({p.get('name') or '?'})" for p in procs[:8]))
        steps.append(RunCommand(("nvidia-smi", "--query-compute-apps=pid,process_name,used_memory", "--format=csv",
                                 *target), why=f"list what still uses {gpu}: a reset fails while anything holds it"
                                 + (f" (the snapshot saw: {listed})" if listed else "")))
        held = [u for u in HOLDERS if fact(snapshot, "node", "gpu_services", u) == "active"]
        steps += [RunCommand(("systemctl", "stop", u), why=f"{u} keeps the GPU open", needs_root=True,
                             undo=("systemctl", "start", u)) for u in held]
        steps.append(RunCommand(("nvidia-smi", "--gpu-reset", *target), why=f"reset {gpu}", needs_root=True))
        steps += [RunCommand(("systemctl", "start", u), why=f"start {u} again", needs_root=True) for u in held]
        steps.append(Advice("If the reset fails (\"in use\" or \"not supported\"), ask again: the next step is a reboot."))
        return steps, Verify(f"{gpu} answers NVML after the reset", argv=("nvidia-smi", "-q", *target))


def _xid(xid) -> str:
    return f" Xid {xid}" if xid is not None else ""


def _running(snapshot) -> str:
    gpus = [g for g in fact(snapshot, "nvml", "gpus", default=[]) or [] if isinstance(g, dict)]
    procs = [p for g in gpus for p in (g.get("processes") or []) if isinstance(p, dict)]
    return printable(", ".join(f"{p.get('pid')} ({p.get('name') or '?'})" for p in procs[:8]))


def _node_name(snapshot, key: str, tool: str) -> str | None:
    """The node name a scheduler knows this machine by, when it is one plain host name."""
    name = fact(snapshot, "node", key)
    if name is None or name == "":
        return None
    if not isinstance(name, str) or len(name) > 253 or not HOST_NAME.fullmatch(name):
        raise FixerError(f"fixer 'gpu-fault': the facts' node name node.{key} = {name!r} is not a single host name "
                         f"(letters, digits, '-', '_' and '.'); refusing to pass it to {tool}")
    return name


def _drain_steps(snapshot, reason: str) -> list:
    """Take the node out of the scheduler first, when the facts show it is a Slurm or Kubernetes node."""
    steps = []
    slurm = _node_name(snapshot, "slurm_node", "scontrol")
    if slurm:  # scontrol takes key=value pairs, no `--`: the name's check is what keeps it one node
        steps.append(RunCommand(("scontrol", "update", f"nodename={slurm}", "state=drain", f"reason={reason}"),
                                why=f"Slurm stops scheduling on {slurm} and lets running jobs finish", needs_root=True,
                                undo=("scontrol", "update", f"nodename={slurm}", "state=resume")))
    k8s = _node_name(snapshot, "kubernetes_node", "kubectl")
    if k8s:
        steps += [
            RunCommand(("kubectl", "cordon", "--", k8s), why=f"Kubernetes schedules nothing new on {k8s}",
                       undo=("kubectl", "uncordon", "--", k8s)),
            RunCommand(("kubectl", "drain", "--ignore-daemonsets", "--delete-emptydir-data", "--", k8s),
                       why=f"move the pods off {k8s}", undo=("kubectl", "uncordon", "--", k8s)),
        ]
    return steps


def _driver_version(snapshot) -> str | None:
    """The driver's version from the facts; it becomes a package version on apt's or dnf's
    command line, so anything but 550.107.02-like digits is refused."""
    for path in (("fabric_manager", "driver_version"), ("nvml", "driver_version"), ("kernel", "nvidia_module_version")):
        value = fact(snapshot, *path)
        if value is None or value == "":
            continue
        if not isinstance(value, str) or not DRIVER_VERSION.fullmatch(value):
            raise FixerError(f"fixer 'fabric-manager': the facts' driver version {'.'.join(path)} = {value!r} is not "
                             f"a driver version (like 550.107.02); fix the snapshot or probe the machine again")
        return value
    return None


class FabricManager(Fixer):
    id = "fabric-manager"
    title = "Start Fabric Manager, installing the version that matches the driver when it differs"
    needs_snapshot = True

    def plan(self, params, snapshot):
        driver = _driver_version(snapshot)
        installed = fact(snapshot, "fabric_manager", "version")
        installed = printable(installed)[:40] if installed else None
        if driver and installed and _newer(installed, driver):
            return self._reboot_plan(params, driver, installed)
        actions: list = []
        notes = []
        if driver and installed != driver:
            actions.append(RunCommand(_install_argv(snapshot, driver), needs_root=True,
                                      why=f"Fabric Manager must be exactly the driver's version ({driver}); "
                                          f"installed: {installed or 'none'}"))
        elif not driver:
            notes.append("The driver version is unknown (no NVML or kernel facts): install "
                         "nvidia-fabricmanager-<branch> at exactly `nvidia-smi`'s driver version.")
        actions += [
            RunCommand(("systemctl", "enable", "nvidia-fabricmanager"), why="start it at boot", needs_root=True),
            RunCommand(("systemctl", "restart", "nvidia-fabricmanager"), why="(re)start Fabric Manager", needs_root=True),
        ]
        return Plan(self.id, self.title, params, tuple(actions),
                    verify=Verify("nvidia-fabricmanager is active",
                                  argv=("systemctl", "is-active", "--quiet", "nvidia-fabricmanager")),
                    notes=tuple(notes) + ("Its log: /var/log/fabricmanager.log; CUDA works once it is active.",))

    def _reboot_plan(self, params, driver: str, installed: str) -> Plan:
        # A Fabric Manager newer than the loaded driver is what an upgrade of the driver packages
        # without a reboot leaves: downgrading it would undo half of that upgrade.
        text = (f"Fabric Manager {installed} is newer than the loaded driver {driver}: the driver packages were "
                "most likely upgraded without a reboot, and the old kernel module still runs. Reboot (or, with "
                "no GPU process left, reload the nvidia modules) so that the loaded driver is the installed one; "
                "Fabric Manager then starts at its version. Check `cat /proc/driver/nvidia/version` against "
                "`dpkg -l 'nvidia-*'` (or `rpm -qa 'nvidia-*'`) first.")
        return Plan(self.id, self.title, params, (Advice(text, why="not downgraded: it matches the installed driver"),),
                    notes=("Its log: /var/log/fabricmanager.log; CUDA works once it is active.",))


def _newer(a: str, b: str) -> bool:
    from troubleshoot.values import parse_version

    va, vb = parse_version(a), parse_version(b)
    return va is not None and vb is not None and va > vb


def _install_argv(snapshot, driver: str) -> tuple[str, ...]:
    """The package manager's command for Fabric Manager at exactly `driver`'s version. On Debian
    and Ubuntu the package is named by its branch until 590, where the branch left the package
    names (driver_install.UNVERSIONED_APT_FROM)."""
    from troubleshoot_fixers.driver_install import UNVERSIONED_APT_FROM
    from troubleshoot_fixers.system import _family

    branch = driver.split(".")[0]
    if _family(snapshot) == "debian":
        name = "nvidia-fabricmanager" if branch.isdigit() and int(branch) >= UNVERSIONED_APT_FROM \
            else f"nvidia-fabricmanager-{branch}"
        return ("apt-get", "install", "-y", "--allow-downgrades", f"{name}={driver}-1")
    return ("dnf", "install", "-y", f"nvidia-fabric-manager-{driver}")


FIXERS = [GpuFault(), FabricManager()]
