#!/bin/bash
# hand.sh SRC PKG FILE LINE COL MUTATOR [RUN]: one mutant by hand, as gremlins makes it, in a
# scratch copy of the tree SRC: apply, run PKG's tests (all of them, or -run RUN), revert.
# Prints KILLED (with the failing tests), LIVED, or ERROR (it did not build). MUT_TIMEOUT (a go
# test -timeout, e.g. 150s) judges a mutant gremlins reported "timed out": KILLED with the tests
# that failed before the limit, or with "test timed out" when one only hung. MUT_NICE is the
# nice level of the test run (19 by default). MUT_TESTPKG runs another package's tests against the
# mutant (for code only that package's tests reach, e.g. scheduler/probe.go through ./api).
src=$1 pkg=$2 f=$3 l=$4 c=$5 t=$6 run=${7:-.}
here=$(cd "$(dirname "$0")" && pwd)
w=${MUT_SCRATCH:-/tmp/mutation-hand}
mkdir -p "$w" && rsync -a --delete --exclude .git "$src/" "$w/"
cd "$w" && python3 "$here/mutate.py" "$pkg/$f" "$l" "$c" "$t" >/dev/null || { echo "ERROR cannot apply $t $f:$l:$c"; exit 3; }
s=$(date +%s)
out=$(nice -n "${MUT_NICE:-19}" go test -count=1 -vet=off -failfast ${MUT_TIMEOUT:+-timeout $MUT_TIMEOUT} -run "$run" "./${MUT_TESTPKG:-$pkg}" 2>&1); rc=$?
rsync -a "$src/$pkg/$f" "$w/$pkg/$f"
tag="$t $pkg/$f:$l:$c [$(basename "$src"), ${MUT_TESTPKG:+./$MUT_TESTPKG }-run '$run', $(( $(date +%s) - s ))s]"
if echo "$out" | grep -q "build failed\|setup failed"; then echo "ERROR $tag"; echo "$out" | head -5
elif [ $rc = 0 ]; then echo "LIVED $tag"
else echo "KILLED $tag"; echo "$out" | grep -E "^\s*--- FAIL|^panic: test timed out|^\s+Test[A-Za-z0-9_/]+ \(" | head -4 | sed 's/^/    /'; fi
