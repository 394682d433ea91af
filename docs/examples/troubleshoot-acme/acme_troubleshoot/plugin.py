"""A complete third-party fixer: typed parameters, a plan of file edits, a verification."""

from troubleshoot.fixes.api import Fixer, Param
from troubleshoot.fixes.plan import Advice, EnsureLine, Plan
from troubleshoot.hookspecs import hookimpl


class NcclInterface(Fixer):
    id = "acme-nccl-interface"
    title = "Pin NCCL to the cluster's fabric interface in /etc/nccl.conf"
    params = (
        Param("iface", required=True, pattern=r"[A-Za-z0-9._-]{1,15}", help="network interface, e.g. ib0"),
        Param("ib", type=bool, default=True, help="keep InfiniBand enabled"),
    )

    def plan(self, params, snapshot):
        actions = [
            EnsureLine("/etc/nccl.conf", f"NCCL_SOCKET_IFNAME={params['iface']}",
                       why="NCCL reads /etc/nccl.conf at start; the environment still overrides it",
                       replaces=r"^NCCL_SOCKET_IFNAME=", needs_root=True),
            EnsureLine("/etc/nccl.conf", f"NCCL_IB_DISABLE={0 if params['ib'] else 1}", why="InfiniBand on or off",
                       replaces=r"^NCCL_IB_DISABLE=", needs_root=True),
            Advice("Check with `NCCL_DEBUG=INFO`: the `Bootstrap : Using` line names the interface."),
        ]
        return Plan(self.id, self.title, params, tuple(actions))


@hookimpl
def troubleshoot_fixers():
    return [NcclInterface()]
