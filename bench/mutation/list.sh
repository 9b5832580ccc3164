#!/bin/bash
# list.sh SRC PKG RUN < MUTANTS: hand.sh over a list of mutants, one a line, as gremlins prints them
# ("... CONDITIONALS_NEGATION at review.go:356:9"; any line without " at FILE:LINE:COL" is skipped),
# each judged by PKG's tests matching RUN (MUT_TESTPKG, MUT_TIMEOUT and MUT_NICE as for hand.sh).
# Prints hand.sh's verdict for each; ERROR (it did not build) is gremlins' "not viable".
set -u
src=$1 pkg=$2 run=$3
here=$(cd "$(dirname "$0")" && pwd)
grep -oE '[A-Z_]+ at [a-z_0-9]+\.go:[0-9]+:[0-9]+' | while read -r t _ loc; do
  IFS=: read -r f l c <<<"$loc"
  "$here/hand.sh" "$src" "$pkg" "$f" "$l" "$c" "$t" "$run" </dev/null
done
