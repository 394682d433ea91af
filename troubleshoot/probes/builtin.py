"""The built-in probes, registered through the same hook a team plugin would use."""

from __future__ import annotations

from troubleshoot.hookspecs import hookimpl


@hookimpl
def troubleshoot_probes():
    # Imported here, not at registration: `diagnose --no-probe` loads plugins but no probe.
    from troubleshoot.probes import accelerators, cuda, docker, frameworks, host, io, kernel, nvml, services
    from troubleshoot.probes.base import Probe

    return [
        Probe("host", host.host, timeout=2, title="Host"),
        Probe("env", host.env, timeout=1, title="Environment"),
        Probe("nvml", nvml.probe, timeout=8, title="GPUs (NVML)"),
        Probe("kernel", kernel.probe, timeout=6, title="Kernel"),
        Probe("cuda", cuda.probe, timeout=6, title="CUDA libraries"),
        Probe("frameworks", frameworks.probe, timeout=frameworks.TIMEOUT + 1, title="Frameworks"),
        Probe("docker", docker.probe, timeout=8, title="Docker"),
        Probe("io", io.probe, timeout=4, title="System and IO"),
        Probe("fabric_manager", services.fabric_manager, timeout=6, title="Fabric Manager"),
        Probe("node", services.node, timeout=8, title="Node services and scheduler"),
        Probe("accelerators", accelerators.probe, timeout=2, title="Other accelerators"),
    ]
