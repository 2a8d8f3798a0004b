#!/usr/bin/env bash
# ensure-slurm.sh — make sure a single-node Slurm cluster runs on this machine.
#
# Why: cudabox's slurm-marked tests submit real jobs (which `docker run`), and
# CI starts on a fresh machine without systemd. This script, idempotently:
#   1. installs Debian's slurm-wlm + munge if missing;
#   2. creates a munge key if absent and starts munged (as user munge);
#   3. writes /etc/slurm/slurm.conf: cluster "cudabox", one node = this host's
#      short hostname with the CPUs/memory `slurmd -C` reports, partition
#      "debug" (Default=YES), proctrack/linuxproc + task/none (no cgroup setup
#      needed), select/cons_tres with CR_Core (memory not consumable, so jobs
#      don't each claim the whole node), SlurmUser root;
#      a changed config restarts the Slurm daemons;
#   4. starts slurmctld and slurmd in the background if not running;
#   5. waits until `sinfo` shows the node idle (resuming it if down/drained).
# With --verify it also proves `srun` and `sbatch --wait` work, the batch job
# running `docker run --rm IMAGE echo hello-from-slurm` (IMAGE defaults to
# debian:bookworm-slim, see ensure-base-image.sh; CUDABOX_SLURM_VERIFY_IMAGE).
# GRES: this machine has no GPUs, so by default no gres/gpu is configured
# (jobs asking --gres=gpu:N / --gpus=N are then rejected at submit time).
# CUDABOX_SLURM_FAKE_GPUS=N (N>0) declares N fake GPUs backed by /dev/tty0..
# (gres.conf File=) so the scheduling side of --gres/--gpus can be tested;
# jobs then get CUDA_VISIBLE_DEVICES=0..N-1 but of course no real device.
#
# Usage: scripts/ensure-slurm.sh [--verify]
set -euo pipefail

VERIFY=0
case "${1:-}" in
    "") ;;
    --verify) VERIFY=1 ;;
    *) echo "usage: $0 [--verify]" >&2; exit 2 ;;
esac

CONF=/etc/slurm/slurm.conf
LOG_DIR=/var/log/slurm
STATE_DIR=/var/spool/slurmctld
SPOOL_DIR=/var/spool/slurmd
LOCK_FILE=/run/lock/cudabox-ensure-slurm.lock
TIMEOUT="${CUDABOX_SLURM_TIMEOUT:-60}"
VERIFY_IMAGE="${CUDABOX_SLURM_VERIFY_IMAGE:-debian:bookworm-slim}"
FAKE_GPUS="${CUDABOX_SLURM_FAKE_GPUS:-0}"
NODE="$(hostname -s)"

log() { echo "[ensure-slurm] $*" >&2; }
die() { echo "[ensure-slurm] ERROR: $*" >&2; exit 1; }

apt_install() {
    local apt=(apt-get -y -q --no-install-recommends -o DPkg::Lock::Timeout=300 install)
    local apt_log=/var/log/cudabox-apt.log
    export DEBIAN_FRONTEND=noninteractive
    if ! "${apt[@]}" "$@" >>"$apt_log" 2>&1; then
        log "apt-get update"
        apt-get -q -o DPkg::Lock::Timeout=300 update >>"$apt_log" 2>&1 \
            || { tail -n 5 "$apt_log" >&2; die "apt-get update failed (see $apt_log)"; }
        "${apt[@]}" "$@" >>"$apt_log" 2>&1 \
            || { tail -n 5 "$apt_log" >&2; die "apt-get install $* failed (see $apt_log)"; }
    fi
}

# Start a daemon detached from us; 9>&- so it doesn't inherit our lock.
spawn() { setsid -f "$@" </dev/null >>"$LOG_DIR/daemons.out" 2>&1 9>&-; }

node_state() { sinfo -h -N -n "$NODE" -o '%T' 2>/dev/null | head -n 1; }

[[ "$(id -u)" -eq 0 ]] || die "must run as root"

exec 9>"$LOCK_FILE"
flock -w 600 9 || die "timed out waiting for the lock $LOCK_FILE"
start=$(date +%s)

# --- install -------------------------------------------------------------------
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v munged >/dev/null; then
    log "installing slurm-wlm and munge ..."
    apt_install slurm-wlm munge
fi

# --- munge -----------------------------------------------------------------------
if [[ ! -s /etc/munge/munge.key ]]; then
    log "creating munge key"
    install -d -o munge -g munge -m 0700 /etc/munge
    if command -v mungekey >/dev/null; then
        mungekey --create --force --keyfile=/etc/munge/munge.key
    else
        dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none
    fi
    chown munge:munge /etc/munge/munge.key
    chmod 0400 /etc/munge/munge.key
fi
munge_ok() { munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1; }
start_munged() {
    log "starting munged"
    install -d -o munge -g munge -m 0755 /run/munge
    install -d -o munge -g munge -m 0700 /var/log/munge /var/lib/munge
    rm -f /run/munge/munge.socket.2 /run/munge/munged.pid
    runuser -u munge -- munged </dev/null >>/var/log/munge/munged.out 2>&1 9>&- \
        || { tail -n 5 /var/log/munge/munged.out >&2; die "munged failed to start (see /var/log/munge/)"; }
}
# Poll rather than trust pgrep once: a munged that is just exiting would
# otherwise look like a running one.
for _ in $(seq 1 40); do
    munge_ok && break
    pgrep -x munged >/dev/null || start_munged
    sleep 0.25
done
munge_ok || die "munge does not work (munge -n | unmunge failed; see /var/log/munge/munged.log)"

# --- slurm.conf ---------------------------------------------------------------------
# The node line is what slurmd itself detects, so it never drains for
# "Low RealMemory" / CPU-count mismatch.
hw="$(slurmd -C | head -n 1)"
[[ "$hw" == NodeName=* ]] || die "slurmd -C gave no NodeName line: $hw"
hw="${hw#NodeName=* }"   # drop "NodeName=host", keep CPUs=... RealMemory=...

[[ "$FAKE_GPUS" =~ ^[0-9]+$ ]] || die "CUDABOX_SLURM_FAKE_GPUS must be a number, got '$FAKE_GPUS'"
gres_types="" node_gres="" new_gres_conf=""
if ((FAKE_GPUS > 0)); then
    for ((i = 0; i < FAKE_GPUS; i++)); do
        [[ -e /dev/tty$i ]] || die "CUDABOX_SLURM_FAKE_GPUS=$FAKE_GPUS needs /dev/tty$i to stand in for a GPU"
    done
    gres_types=$'\nGresTypes=gpu'
    node_gres=" Gres=gpu:${FAKE_GPUS}"
    new_gres_conf="# Written by cudabox scripts/ensure-slurm.sh — FAKE GPUs for scheduler tests.
NodeName=${NODE} Name=gpu File=/dev/tty[0-$((FAKE_GPUS - 1))]"
fi

new_conf="$(cat <<EOF
# Written by cudabox scripts/ensure-slurm.sh — single-node test cluster.
# Regenerated on each run; edit the script, not this file.
ClusterName=cudabox${gres_types}
SlurmctldHost=${NODE}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
StateSaveLocation=${STATE_DIR}
SlurmdSpoolDir=${SPOOL_DIR}
SlurmctldLogFile=${LOG_DIR}/slurmctld.log
SlurmdLogFile=${LOG_DIR}/slurmd.log
SlurmctldTimeout=30
SlurmdTimeout=60
InactiveLimit=0
MailProg=/bin/true
MinJobAge=300
KillWait=10
NodeName=${NODE} NodeAddr=127.0.0.1 ${hw}${node_gres} State=UNKNOWN
PartitionName=debug Nodes=${NODE} Default=YES MaxTime=INFINITE State=UP
EOF
)"

restart=0
if [[ ! -f "$CONF" ]] || [[ "$(cat "$CONF")" != "$new_conf" ]]; then
    if [[ -f "$CONF" ]] && ! grep -q 'Written by cudabox' "$CONF"; then
        cp -p "$CONF" "$CONF.bak.$(date +%s)"
        log "backed up a foreign $CONF"
    fi
    log "writing $CONF"
    install -d /etc/slurm
    printf '%s\n' "$new_conf" >"$CONF"
    restart=1
fi
GRES_CONF=/etc/slurm/gres.conf
if [[ -n "$new_gres_conf" ]]; then
    if [[ ! -f "$GRES_CONF" ]] || [[ "$(cat "$GRES_CONF")" != "$new_gres_conf" ]]; then
        log "writing $GRES_CONF ($FAKE_GPUS fake GPUs)"
        printf '%s\n' "$new_gres_conf" >"$GRES_CONF"
        restart=1
    fi
elif [[ -f "$GRES_CONF" ]]; then
    log "removing $GRES_CONF"
    rm -f "$GRES_CONF"
    restart=1
fi
install -d -m 0755 "$STATE_DIR" "$SPOOL_DIR" "$LOG_DIR"

# --- slurmctld / slurmd --------------------------------------------------------------
stop_daemon() {
    local name="$1" pid
    for pid in $(pgrep -x "$name"); do kill "$pid" 2>/dev/null || true; done
    for _ in $(seq 1 40); do pgrep -x "$name" >/dev/null || return 0; sleep 0.25; done
    die "$name did not stop"
}
if ((restart)) && { pgrep -x slurmctld || pgrep -x slurmd; } >/dev/null; then
    log "config changed: restarting slurm daemons"
    stop_daemon slurmd
    stop_daemon slurmctld
fi
if ! pgrep -x slurmctld >/dev/null; then
    log "starting slurmctld"
    spawn slurmctld
fi
if ! pgrep -x slurmd >/dev/null; then
    log "starting slurmd"
    spawn slurmd
fi

# --- wait for the node -----------------------------------------------------------------
deadline=$((start + TIMEOUT))
resumed=0
while :; do
    state="$(node_state || true)"
    case "$state" in
        idle | mixed | allocated | completing) break ;;
        down | drained | draining | drain | fail | failing)
            # Responding but down/drained (e.g. left so by an earlier run): resume.
            if ((!resumed)); then
                log "node $NODE is $state; resuming"
                scontrol update nodename="$NODE" state=resume >/dev/null 2>&1 || true
                resumed=1
            fi
            ;;
    esac
    if (($(date +%s) >= deadline)); then
        tail -n 5 "$LOG_DIR/slurmctld.log" "$LOG_DIR/slurmd.log" >&2 2>/dev/null || true
        die "node $NODE not idle within ${TIMEOUT}s (state: ${state:-no answer from slurmctld})"
    fi
    pgrep -x slurmctld >/dev/null || die "slurmctld exited (see $LOG_DIR/slurmctld.log)"
    pgrep -x slurmd >/dev/null || die "slurmd exited (see $LOG_DIR/slurmd.log)"
    sleep 0.5
done
log "node $NODE is $state (partition debug) after $(($(date +%s) - start))s"

# --- optional end-to-end check ------------------------------------------------------------
if ((VERIFY)); then
    out="$(timeout 60 srun -N1 -n1 -t 1 hostname 2>&1)" || die "srun failed: $out"
    [[ "$out" == "$NODE" ]] || die "srun hostname printed '$out', expected '$NODE'"
    log "srun ok"

    work="$(mktemp -d /tmp/cudabox-slurm-verify.XXXXXX)"
    trap 'rm -rf "$work"' EXIT
    cat >"$work/job.sh" <<EOF
#!/bin/bash
set -euo pipefail
docker run --rm $VERIFY_IMAGE echo hello-from-slurm
EOF
    if ! timeout 120 sbatch --wait -Q -t 2 -J cudabox-verify -o "$work/out.txt" "$work/job.sh" >/dev/null 2>"$work/sbatch.err"; then
        cat "$work/sbatch.err" "$work/out.txt" 2>/dev/null | tail -n 10 >&2
        die "sbatch --wait job running 'docker run $VERIFY_IMAGE' failed"
    fi
    grep -qx hello-from-slurm "$work/out.txt" \
        || die "batch job output lacks hello-from-slurm: $(head -c 300 "$work/out.txt")"
    log "sbatch --wait + docker run ok"
fi
