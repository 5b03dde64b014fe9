#!/usr/bin/env bash
# multihost_two_level.sh REPO TEST_TWO_LEVEL: two-level all_reduce on real hosts. Two
# network namespaces of 2 ranks each (tests/netns_hosts.sh): shared memory inside a host,
# TCP on the veth link between them. The mesh must find 2 hosts x 2 ranks from MPI's
# shared-memory split, and its two-level all_reduce must equal MPI's flat one bit for bit
# on integer-valued data at odd sizes (the test case "on the hosts MPI finds ..." of
# tests/test_two_level.cpp). Exit 77 (skipped) where namespaces cannot be made.
set -euo pipefail
repo=$1; test_binary=$2
source "$(dirname "$0")/netns_hosts.sh"
netns_hosts_up 2

on_hosts 4 self,vader,tcp "$test_binary" -tc='on?the?hosts?MPI?finds*' --no-colors=true > "$dir/run.log" 2>&1 ||
  { cat "$dir/run.log"; echo "FAIL: the two-level test failed on 2 hosts x 2 ranks"; exit 1; }
grep -q "hosts of axis data: 2 hosts x 2 ranks" "$dir/run.log" ||
  { cat "$dir/run.log"; echo "FAIL: the mesh did not find 2 hosts x 2 ranks"; exit 1; }
grep -q "test cases: *1 | *1 passed" "$dir/run.log" ||
  { cat "$dir/run.log"; echo "FAIL: the test case did not run"; exit 1; }
echo "ok: on 2 hosts x 2 ranks (network namespaces, shared memory in a host, TCP between)," \
     "two-level all_reduce equals MPI's flat result"
