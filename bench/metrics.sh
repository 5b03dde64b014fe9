# Shell helpers for the benchmark scripts (source it): reading train_gpt's JSONL metrics, setting up a run.

# median FILE FIELD: the median of FIELD over a run's steps, leaving out the first two
# (oneDNN primitive creation and first-touch page faults make them slow).
median() { grep -o "\"$2\": [^,}]*" "$1" | awk '{print $2}' | tail -n +3 | median_of; }
# median_of: the median of the numbers on standard input, one a line.
median_of() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

# bench_setup DIR: makes the output directory DIR and a temporary directory $tmp (removed
# at exit), and exports the environment of one-thread MPI runs as root.
bench_setup() {
  mkdir -p "$1"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
}
