# restart_layout.sh: what launch/run.sh --max-restarts relaunches a dead job on. Sourced by
# run.sh; restart_plan reads and sets its variables (hostfile, slots, ranks, args,
# mpirun_options) and prints why.
#
#   shrink_mesh "data=4,tensor=2" 4    ->  "data=2,tensor=2"
#
# The layout keeps every model axis (pipe, expert, context, tensor: the checkpoint resumes
# in any layout, but these set how much of the model one rank must hold) and shrinks the
# data axes to fit the ranks left -- fsdp keeps as much of its size as divides what is
# left, data takes the rest -- the largest valid layout for them under that rule. If the
# model axes alone need more ranks than are left, there is none, and run.sh stops.

# shrink_mesh SPEC RANKS: SPEC's axes with data x fsdp = RANKS / (the model axes); fails
# with a message on stderr when they do not divide RANKS.
shrink_mesh() {
  awk -v spec="$1" -v ranks="$2" 'BEGIN {
    n = split(spec, axes, ","); model = 1; fsdp = 1
    for (i = 1; i <= n; i++) {
      split(axes[i], kv, "="); name[i] = kv[1]; size[i] = kv[2]
      if (kv[1] == "fsdp") fsdp = kv[2]
      else if (kv[1] != "data") model *= kv[2]
    }
    if (ranks % model != 0) {
      printf "run.sh: the model axes of --mesh %s need a multiple of %d ranks, and %d are left\n", spec, model, ranks > "/dev/stderr"
      exit 1
    }
    dp = ranks / model
    f = fsdp; while (dp % f != 0) f--   # the largest part of fsdp that divides what is left
    has_data = 0
    for (i = 1; i <= n; i++) if (name[i] == "data") has_data = 1
    out = ""
    if (!has_data && dp / f > 1) out = "data=" dp / f
    for (i = 1; i <= n; i++) {
      s = name[i] == "data" ? dp / f : name[i] == "fsdp" ? f : size[i]
      out = out (out == "" ? "" : ",") name[i] "=" s
    }
    print out
  }'
}

# Whether $1 answers a one-rank mpirun within 30 s. A second try, 2 s later, spares a host
# that failed only because the killed job's daemons were still exiting or the machine was
# briefly overloaded (seen once in CI); a host that is down fails both.
# On failure, what mpirun printed is in $host_error (one line, at most 400 characters).
host_answers() {
  local try
  for try in 1 2; do
    [ $try = 2 ] && sleep 2
    host_error=$(timeout 30 mpirun -n 1 --host "$1" $([ "$(id -u)" -eq 0 ] && echo --allow-run-as-root) \
        "${mpirun_options[@]}" hostname 2>&1 < /dev/null > /dev/null) && return 0  # mpirun would read the hostfile loop's stdin
  done
  host_error=$(grep -v '^[-[:space:]]*$' <<< "$host_error" | tr -s ' \n' ' ' | cut -c1-400)
  return 1
}

# The hosts of $hostfile that answer, as hostfile lines.
answering_hosts() {
  local host rest
  while read -r host rest; do
    [[ -z "$host" || "$host" == \#* ]] && continue
    if host_answers "$host"; then
      echo "$host $rest"
    else
      echo "run.sh: host $host does not answer (${host_error:-no output}); leaving it out" >&2
    fi
  done < "$hostfile"
}

restart_plan() {
  if [ -n "$hostfile" ]; then
    local left
    left=$(mktemp "${TMPDIR:-/tmp}/shardlab-hosts.XXXXXX")
    answering_hosts > "$left"
    [ -s "$left" ] || { echo "run.sh: no host of $hostfile answers; not restarting" >&2; return 1; }
    local new_slots
    new_slots=$(awk '{ n = 1; for (i = 2; i <= NF; i++) if ($i ~ /^slots=/) n = substr($i, 7); s += n } END { print s + 0 }' "$left")
    ranks=$(( ranks * new_slots / slots > 0 ? ranks * new_slots / slots : 1 ))
    slots=$new_slots hostfile=$left
  fi
  # --mesh shrunk to the ranks left; --resume latest (in place of any --resume).
  local out=() i=0 mesh="" old
  while [ $i -lt ${#args[@]} ]; do
    case ${args[$i]} in
      --mesh) mesh=${args[$((i + 1))]}; i=$((i + 2)); continue ;;
      --mesh=*) mesh=${args[$i]#--mesh=}; i=$((i + 1)); continue ;;
      --resume) i=$((i + 2)); continue ;;
      --resume=*) i=$((i + 1)); continue ;;
    esac
    out+=("${args[$i]}"); i=$((i + 1))
  done
  if [ -n "$mesh" ]; then
    old=$mesh
    mesh=$(shrink_mesh "$mesh" "$ranks") || return 1
    out+=(--mesh "$mesh")
    echo "run.sh: relaunching $ranks rank(s) on $slots slot(s) with --mesh $mesh (was $old: the model axes kept," \
         "the data axes shrunk to the ranks left) from the latest checkpoint" >&2
  else
    echo "run.sh: relaunching $ranks rank(s) on $slots slot(s) from the latest checkpoint" >&2
  fi
  args=("${out[@]}" --resume latest)
}
