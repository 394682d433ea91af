"""The cluster admin's loop: a node's verdict (`check`), drains and resumes through Slurm within
limits (`policy`, `slurmctl`), the remediation ladder (`ladder`, `remediate`, `verify`) and the
event store that remembers all of it (`events`, `fleetreport`). The engine's diagnoses come in
as inputs; what runs on the machine runs here, at the edge."""
