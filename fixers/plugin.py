"""Entry point of the shipped fixers: the same hook a team's fixer package implements."""

from troubleshoot.hookspecs import hookimpl


@hookimpl
def troubleshoot_fixers():
    # Imported here, not at module load: `diagnose` loads every plugin but needs no fixer.
    from troubleshoot_fixers import code_advice, extensions, framework, gpu_fault, profiling, system

    return [*code_advice.FIXERS, *framework.FIXERS, *system.FIXERS, *gpu_fault.FIXERS, *extensions.FIXERS, *profiling.FIXERS]
