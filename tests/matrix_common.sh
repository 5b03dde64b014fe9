# Shell helpers for the layout-matrix tests (source it): the models every layout trains,
# the meshes, and what each mesh allows. Sourcing it also makes $dir, a directory removed
# on exit, and runs the ranks single-threaded.
#
# model_flags MODEL   train_gpt flags of gpt, llama or moe (all with 4 query heads, so that
#                     tensor=2 divides them)
# losses FILE         the losses of a train_gpt --metrics file, one per line
# steps FILE          its steps, on one line: "1 2 3 "
# meshes              every mesh of data, fsdp, pipe, expert, context and tensor axes of size 1
#                     or 2 with 2 to MAX_RANKS (default 8) ranks, e.g. "data=2,expert=2", one per
#                     line (context and expert not together: the MoE model here has a capacity,
#                     which a context axis refuses)
# ranks_of MESH       the ranks a mesh needs
# models_of MESH      the models it trains (expert: only the MoE model; context: the dense ones)
# zeros_of MESH       the ZeRO stages it allows (pipe: not 3; fsdp: hybrid 2 or 3)
model_flags() {
  case $1 in
    gpt) echo "--model gpt-tiny --heads 4 --kv-heads 4" ;;
    llama) echo "--model llama-tiny --heads 4" ;;
    moe) echo "--model llama-moe-tiny --heads 4 --capacity-factor 1.0" ;;
  esac
}
losses() { grep -o '"loss": [^,]*' "$1" | awk '{print $2}'; }
steps() { grep -o '"step": [0-9]*' "$1" | awk '{print $2}' | tr '\n' ' '; }
meshes() {
  local d f p e c t kv spec
  for d in 1 2; do for f in 1 2; do for p in 1 2; do for e in 1 2; do for c in 1 2; do for t in 1 2; do
    local n=$((d * f * p * e * c * t))
    [ $n -ge 2 ] && [ $n -le "${MAX_RANKS:-8}" ] || continue
    [ $e = 2 ] && [ $c = 2 ] && continue
    spec=""
    for kv in data=$d fsdp=$f pipe=$p expert=$e context=$c tensor=$t; do
      [ "${kv#*=}" = 2 ] && spec="$spec${spec:+,}$kv"
    done
    echo "$spec"
  done; done; done; done; done; done
}
ranks_of() {
  local n=1 axis
  for axis in ${1//,/ }; do n=$((n * ${axis#*=})); done
  echo $n
}
models_of() {
  if [[ $1 == *expert* ]]; then echo moe
  elif [[ $1 == *context* ]]; then echo gpt llama
  else echo gpt llama moe; fi
}
zeros_of() {
  local zero
  for zero in 0 1 2 3; do
    [[ $1 == *pipe* && $zero == 3 ]] && continue  # refused: ZeRO-3 would gather per microbatch
    [[ $1 == *fsdp* && $zero -lt 2 ]] && continue # an fsdp axis shards: hybrid ZeRO-2, or 3
    echo "$zero"
  done
}

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export OMP_NUM_THREADS=1
