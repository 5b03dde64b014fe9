# script_checks.sh: the checks a test script shares, sourced (`source "$here/script_checks.sh"`).
#   fail MESSAGE...            prints FAIL: MESSAGE and ends the script with status 1
#   expect_error REGEX CMD...  CMD must exit non-zero with output matching REGEX
fail() { echo "FAIL: $*"; exit 1; }
expect_error() {
  local regex=$1; shift
  if out=$("$@" 2>&1); then fail "expected an error from: $*"; fi
  grep -Eq -- "$regex" <<<"$out" || fail "expected /$regex/ from $*, got: $out"
}
