#!/usr/bin/env bash
# A real single-host Slurm with NNODES emulated nodes (node1..nodeN, all on 127.0.0.1), for the
# tests marked `slurm`. Recipe: docs/slurm.md. Needs root and Debian's packages; every daemon
# writes a pid file and .ci/slurm-down.sh stops it by that pid only.
set -euo pipefail
NNODES=${NNODES:-4}
export DEBIAN_FRONTEND=noninteractive

if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v srun >/dev/null || ! command -v munged >/dev/null; then
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends slurmctld slurmd slurm-client munge >/dev/null
fi

[ -s /etc/munge/munge.key ] || mungekey --create --keyfile=/etc/munge/munge.key
chown munge:munge /etc/munge/munge.key
chmod 0400 /etc/munge/munge.key
install -d -o munge -g munge -m 0755 /run/munge   # no systemd: nothing creates it
if ! { [ -f /run/munge/munged.pid ] && kill -0 "$(cat /run/munge/munged.pid)" 2>/dev/null; }; then
  runuser -u munge -- /usr/sbin/munged
fi
munge -n | unmunge >/dev/null

H=$(hostname -s)
NCPU=$(nproc)
install -d -o slurm -g slurm /var/spool/slurmctld /var/log/slurm
install -d /var/spool/slurmd
rm -rf /var/spool/slurmctld/* /var/spool/slurmd/*   # fresh state: no stale DRAIN nodes or jobs
cat > /etc/slurm/slurm.conf <<CONF
ClusterName=local
SlurmctldHost=${H}(127.0.0.1)
SlurmUser=slurm
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
SlurmdParameters=config_overrides
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd/%n
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd-%n.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd-%n.log
SlurmctldPort=6817
NodeName=node[1-${NNODES}] NodeHostname=${H} NodeAddr=127.0.0.1 Port=[$((6820+1))-$((6820+NNODES))] CPUs=${NCPU} RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF

/usr/sbin/slurmctld
for i in $(seq 1 "$NNODES"); do /usr/sbin/slurmd -N "node$i"; done

# Wait on the state, not a fixed time: every node idle (up to 30 s).
for _ in $(seq 1 60); do
  [ "$(sinfo -h -t idle -o %D 2>/dev/null)" = "$NNODES" ] && break
  sleep 0.5
done
if [ "$(sinfo -h -t idle -o %D 2>/dev/null)" != "$NNODES" ]; then
  echo "slurm-up: nodes did not become idle:" >&2
  sinfo >&2 || true
  tail -n 20 /var/log/slurm/slurmctld.log >&2 || true
  exit 1
fi
echo "slurm-up: $NNODES nodes idle (munged=$(cat /run/munge/munged.pid) slurmctld=$(cat /run/slurmctld.pid))"
