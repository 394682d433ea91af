"""Fleet work: many machines' snapshots and many ranks' logs in, the same diagnoses out, compared.

A layer on top of the one pipeline (no second engine): `collect` gathers snapshots (through
Slurm, or any folder of them), `compare` finds drift and outliers between nodes, `diagnose`
builds the sources and calls `pipeline.diagnose_sources`.
"""
