#!/usr/bin/env bash
# expect_failure.sh REGEX COMMAND...: passes when COMMAND exits non-zero within 60 s and
# its output matches REGEX (a user error must be clear and must not hang or crash) and,
# when the environment sets EXPECT_ABSENT, does not match that regex.
regex=$1; shift
out=$(timeout 60 "$@" 2>&1); rc=$?
echo "$out"
if [ $rc -eq 0 ]; then echo "FAIL: expected a non-zero exit"; exit 1; fi
if [ $rc -eq 124 ]; then echo "FAIL: timed out (hang)"; exit 1; fi
if [ $rc -ge 128 ]; then echo "FAIL: crashed with signal $((rc - 128))"; exit 1; fi
if ! grep -Eq -- "$regex" <<<"$out"; then echo "FAIL: output does not match /$regex/"; exit 1; fi
if [ -n "${EXPECT_ABSENT:-}" ] && grep -Eq -- "$EXPECT_ABSENT" <<<"$out"; then
  echo "FAIL: output matches /$EXPECT_ABSENT/"; exit 1
fi
echo "ok: exit $rc with the expected message"
