# The setup the train_gpt benchmarks share (source it from the repository root, passing
# the build directory): train (the binary), steps (STEPS, default 12), tmp (a directory
# removed on exit), mpi (mpirun as root and with more ranks than cores), median (metrics.sh).
build=${1:-build}
train=$build/examples/train_gpt
steps=${STEPS:-12}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpi=(mpirun --oversubscribe --bind-to none)
source bench/metrics.sh

# run NAME RANKS THREADS ARGS...: trains with "${common[@]}" and ARGS on RANKS ranks of
# THREADS threads, then prints the medians of tokens/s and step time and, where the run
# has them, the tensor and expert axes' communication and the pipeline bubble beside their
# predictions.
run() {
  local name=$1 n=$2 threads=$3 extra=""; shift 3
  OMP_NUM_THREADS=$threads "${mpi[@]}" -n "$n" "$train" "${common[@]}" --threads "$threads" \
    --metrics "$tmp/$name.jsonl" "$@" > "$tmp/$name.log"
  local m=$tmp/$name.jsonl
  scaled() { median "$m" "$1" | awk -v k="$2" '{printf "%.1f", $1 * k}'; }
  if grep -q tensor_comm_s "$m"; then
    extra="   tensor comm $(scaled tensor_comm_s 1e3) ms (predicted $(scaled tensor_comm_predicted_s 1e3) ms)"
  fi
  if grep -q expert_comm_s "$m"; then
    extra="$extra   expert comm $(scaled expert_comm_s 1e3) ms (predicted $(scaled expert_comm_predicted_s 1e3) ms)"
    extra="$extra   dropped $(scaled moe_dropped_fraction 100)%"
  fi
  if grep -q pipeline_bubble "$m"; then
    extra="$extra   bubble $(scaled pipeline_bubble 100)% (predicted $(scaled pipeline_bubble_predicted 100)%)"
  fi
  printf "%-30s %9.0f tokens/s   step %7.1f ms%s\n" "$name" "$(median "$m" tokens_per_s)" "$(scaled step_s 1e3)" "$extra"
}

# ratios BASELINE NAME...: each run's tokens/s over the baseline's.
ratios() {
  local base=$1 name; shift
  for name in "$@"; do
    awk -v name="$name" -v base="$base" -v a="$(median "$tmp/$base.jsonl" tokens_per_s)" \
        -v b="$(median "$tmp/$name.jsonl" tokens_per_s)" 'BEGIN { printf "%s / %s: %.2fx tokens/s\n", name, base, b / a }'
  done
}
