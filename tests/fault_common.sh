# Shell helpers for the fault tests (source it after setting $train, the train_gpt binary).
# Sourcing it also makes $dir, a directory removed on exit (after the jobs named in
# $started are killed), and runs the ranks single-threaded.
#
# fail MESSAGE         counts a failure ($failures) and prints it
# losses FILE          the steps and losses of a train_gpt --metrics file, "step loss" per line
# tagged_pids TAG      the train_gpt processes whose environment holds TAG
#                      (SHARDLAB_FAULT_TAG=..., passed with mpirun -x SHARDLAB_FAULT_TAG)
# rank_pid TAG R       of those, the one of rank R
# checkpoints DIR      the checkpoint files in DIR, newest last
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
losses() { grep -o '"step": [0-9]*\|"loss": [^,]*' "$1" | paste - - | awk '{print $2, $4}'; }
tagged_pids() {
  local pid env
  for pid in $(pgrep -f "$train"); do
    env=$( (tr '\0' '\n' < "/proc/$pid/environ") 2> /dev/null) || continue
    grep -qx "$1" <<< "$env" && echo "$pid"
  done
}
rank_pid() {  # looks again for up to 5 s: a loaded machine once found no rank on the first look
  local pid
  for _ in $(seq 50); do
    for pid in $(tagged_pids "$1"); do
      (tr '\0' '\n' < "/proc/$pid/environ") 2> /dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2" && { echo "$pid"; return; }
    done
    sleep 0.1
  done
}
checkpoints() { find "$1" -maxdepth 1 -name 'ckpt_*.h5' 2> /dev/null | sort; }

dir=$(mktemp -d)
started=()  # pids of background jobs, killed on exit if still running
trap 'for p in "${started[@]}"; do kill -9 "$p" 2> /dev/null; done; rm -rf "$dir"' EXIT
export OMP_NUM_THREADS=1
