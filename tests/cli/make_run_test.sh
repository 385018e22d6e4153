#!/usr/bin/env bash
# `make run` sets up only what serving needs (issue 32): its dry run reaches scripts/deps.sh
# serve and the flashkv target, and nothing of the test rig (deps.sh test or bare deps.sh:
# GoogleTest, redis-server, Node and npm; ctest). `make -n test` must reach deps.sh test, so
# the check can tell the two apart. BUILD is a directory that does not exist: a dry run
# builds and installs nothing. Usage: make_run_test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1
build=$2
run=$(make -n -C "$src" run BUILD="$build")
grep -q 'scripts/deps.sh serve$' <<<"$run" || { echo "make -n run: no deps.sh serve:" >&2; echo "$run" >&2; exit 1; }
grep -q -- "--target flashkv$" <<<"$run" || { echo "make -n run builds more than flashkv:" >&2; echo "$run" >&2; exit 1; }
if grep -E 'deps\.sh( test)?$|npm|redis|gtest|ctest|FLASHKV_TESTS=ON' <<<"$run"; then
  echo "make -n run reaches the test rig (above)" >&2
  exit 1
fi
test=$(make -n -C "$src" test BUILD="$build")
grep -q 'scripts/deps.sh test$' <<<"$test" || { echo "make -n test: no deps.sh test:" >&2; echo "$test" >&2; exit 1; }
echo "make run: serving set-up only"
