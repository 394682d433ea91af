#!/usr/bin/env bash
# Stop what .ci/slurm-up.sh started, by pid file only (never by process name).
set -u
if [ -f /run/slurmctld.pid ] && kill -0 "$(cat /run/slurmctld.pid)" 2>/dev/null; then
  scancel --partition=debug 2>/dev/null || true   # no slurmstepd may outlive its slurmd
  for _ in $(seq 1 40); do [ -z "$(squeue -h 2>/dev/null)" ] && break; sleep 0.5; done
fi
stop_pidfile() {
  local f=$1 p
  [ -f "$f" ] || return 0
  p=$(cat "$f")
  if [ -n "$p" ] && kill -0 "$p" 2>/dev/null; then
    kill "$p"
    for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.2; done
  fi
  rm -f "$f"
}
for f in /run/slurmd-*.pid; do stop_pidfile "$f"; done
stop_pidfile /run/slurmctld.pid
stop_pidfile /run/munge/munged.pid
