# Shell helpers for the benchmark scripts that read train_gpt's JSONL metrics (source it).

# median FILE FIELD: the median of FIELD over a run's steps, leaving out the first two
# (oneDNN primitive creation and first-touch page faults make them slow).
median() { grep -o "\"$2\": [^,}]*" "$1" | awk '{print $2}' | tail -n +3 | sort -g |
           awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
