"""Entry point of the shipped fixers: the same hook a team's fixer package implements."""

from troubleshoot.hookspecs import hookimpl

from troubleshoot_fixers import code_advice, framework, gpu_fault, system


@hookimpl
def troubleshoot_fixers():
    return [*code_advice.FIXERS, *framework.FIXERS, *system.FIXERS, *gpu_fault.FIXERS]
