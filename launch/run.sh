#!/usr/bin/env bash
# mpirun with the flags shardlab jobs need, so a multi-rank run is one line:
#   launch/run.sh -n 4 -- train_gpt --mesh data=2,tensor=2
#   launch/run.sh -n 8 --hostfile launch/hostfile.example -- train_gpt --mesh data=8
#   launch/run.sh -n 2 --mca btl self,tcp -- train_gpt --mesh data=2   # any mpirun option
#   launch/run.sh -n 2 --dry-run -- bench_collectives     # print the mpirun line only
#   launch/run.sh -n 4 --hostfile hosts --max-restarts 2 -- train_gpt --mesh data=4 --ckpt-every 50
# A program named without a path is taken from $SHARDLAB_BUILD/examples (default build/).
# Adds --allow-run-as-root as root, --oversubscribe when ranks exceed the slots (the local
# physical cores, or the sum of the hostfile's slots), --bind-to none, and exports OMP_NUM_THREADS
# (default: slots / ranks, at least 1). With a hostfile the program must exist at the same
# path on every host. Options it does not know, before the --, go to mpirun as they are.
#
# A user error ends every rank with its message and exit 1; mpirun then adds a banner
# ("Primary job terminated normally, but 1 process returned a non-zero exit code ...")
# that says nothing more, so run.sh drops exactly that banner from mpirun's stderr
# (--mpi-banners keeps it). Reports of ranks killed by a signal or aborted are kept.
#
# --max-restarts N (docs/reliability.md, "Restart on fewer hosts"): when the job dies --
# a rank killed, a host lost -- rather than ending by itself (exit 0, a user error's 1,
# a preemption's 143 or 138), run.sh asks every host of the hostfile to answer (mpirun
# -n 1 --host H hostname, 30 s), keeps those that do, and relaunches up to N times on
# them: the ranks in proportion to the slots left, the data axes (data, then fsdp) of
# --mesh shrunk to fit while the model axes are kept (launch/restart_layout.sh, which
# says why), and --resume latest, so training continues from the last checkpoint.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
usage() {
  echo "usage: launch/run.sh -n RANKS [--hostfile FILE] [--threads T] [--mpi-banners] [--dry-run]" \
       "[MPIRUN OPTIONS...] -- PROGRAM [ARGS...]" >&2
  exit "${1:-2}"
}

ranks=1 hostfile="" threads=${OMP_NUM_THREADS:-} dry_run=0 banners=0 mpirun_options=() max_restarts=0
while [ $# -gt 0 ]; do
  case "$1" in
    -n|-np|--np) ranks=${2:?-n needs a rank count}; shift 2 ;;
    --hostfile) hostfile=${2:?--hostfile needs a file}; shift 2 ;;
    --threads) threads=${2:?--threads needs a count}; shift 2 ;;
    --dry-run) dry_run=1; shift ;;
    --mpi-banners) banners=1; shift ;;
    --max-restarts) max_restarts=${2:?--max-restarts needs a count}; shift 2 ;;
    -h|--help) usage 0 ;;
    --) shift; break ;;
    *) mpirun_options+=("$1"); shift ;;
  esac
done
[ $# -gt 0 ] || { echo "run.sh: no program; put it after -- (launch/run.sh -n 2 -- train_gpt)" >&2; usage; }
[[ "$ranks" =~ ^[1-9][0-9]*$ ]] || { echo "run.sh: -n must be a positive integer, got '$ranks'" >&2; exit 2; }
[[ "$max_restarts" =~ ^[0-9]+$ ]] || { echo "run.sh: --max-restarts must be 0 or more, got '$max_restarts'" >&2; exit 2; }

if [ -n "$hostfile" ]; then
  [ -r "$hostfile" ] || { echo "run.sh: cannot read hostfile '$hostfile'" >&2; exit 2; }
  # One host per line, optional "slots=N" (OpenMPI's default is 1 slot per line).
  slots=$(awk '!/^[[:space:]]*(#|$)/ { n = 1; for (i = 2; i <= NF; i++) if ($i ~ /^slots=/) n = substr($i, 7); s += n }
               END { print s + 0 }' "$hostfile")
else
  # OpenMPI counts physical cores as local slots (not hyperthreads).
  slots=$(lscpu -p=core,socket 2>/dev/null | grep -v '^#' | sort -u | wc -l)
  [ "$slots" -gt 0 ] || slots=$(nproc)
fi
[ -n "$threads" ] || threads=$(( slots / ranks > 0 ? slots / ranks : 1 ))

program=$1; shift
build_dir=${SHARDLAB_BUILD:-build}
[[ "$program" != */* && -x "$repo/$build_dir/examples/$program" ]] && program="$repo/$build_dir/examples/$program"
args=("$@")

# The mpirun line for $ranks ranks on $hostfile running $program "${args[@]}".
make_cmd() {
  cmd=(mpirun -n "$ranks" --bind-to none -x "OMP_NUM_THREADS=$threads")
  [ "$(id -u)" -eq 0 ] && cmd+=(--allow-run-as-root)
  [ "$ranks" -gt "$slots" ] && cmd+=(--oversubscribe)
  [ -n "$hostfile" ] && cmd+=(--hostfile "$hostfile")
  cmd+=("${mpirun_options[@]}" "$program" "${args[@]}")
  echo "run.sh: ${cmd[*]}" >&2
}
make_cmd
[ "$dry_run" -eq 1 ] && exit 0
[ "$banners" -eq 1 ] && [ "$max_restarts" -eq 0 ] && exec "${cmd[@]}"

# Drops the two help blocks mpirun prints when ranks exit non-zero by themselves (each a
# line of dashes, the message, a line of dashes); everything else passes through.
drop_exit_banner() {
  if [ "$banners" -eq 1 ]; then cat; return; fi
  awk '
    function flush() { for (i = 1; i <= n; i++) print held[i]; n = 0; fflush() }
    /^-+$/ && dropping { dropping = 0; next }
    dropping { next }
    /^-+$/ { flush(); held[++n] = $0; next }
    n == 1 && (/^Primary job +terminated normally, but/ ||
               /^mpirun detected that one or more processes exited with non-zero status/) {
      n = 0; dropping = 1; next
    }
    { held[++n] = $0; flush() }
    END { flush() }'
}
# stderr goes through the filter; stdout (fd 3) straight to ours.
run_job() {
  { "${cmd[@]}" 2>&1 1>&3 3>&- | drop_exit_banner >&2; } 3>&1
  return "${PIPESTATUS[0]}"
}
set +e
run_job
rc=$?
restarts=0
while [ "$restarts" -lt "$max_restarts" ]; do
  case $rc in 0|1|2|138|143) break ;; esac  # finished, refused, or preempted: not a failure to retry
  restarts=$((restarts + 1))
  echo "run.sh: the job died (exit $rc); restart $restarts of $max_restarts" >&2
  source "$repo/launch/restart_layout.sh"
  restart_plan || exit "$rc"  # sets hostfile, slots, ranks, threads, args; says why
  make_cmd
  run_job
  rc=$?
done
exit "$rc"
