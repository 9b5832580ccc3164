#!/bin/bash
# subset.sh NAME PKG RUN COEF 'EXTRA' FILE_REGEX...
# gremlins v0.6.0 over PKG mutating only the files matching FILE_REGEX (the others excluded with
# -E), each mutant judged by `go test -run RUN` (GOFLAGS, which gremlins passes on to every go
# test it runs; RUN empty: the whole package). Output in $OUT/NAME.txt, every go command in
# $OUT/NAME.calls.log. Run it from a copy of the tree (git archive HEAD | tar -x -C DIR), at
# nice 19 (MUT_NICE), one worker.
set -u
name=$1 pkg=$2 run=$3 coef=$4 extra=$5; shift 5
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/mutation}; mkdir -p "$out"
ex=()
for f in "$pkg"/*.go; do
  b=$(basename "$f")
  case $b in *_test.go) continue;; esac
  keep=0; for k in "$@"; do [[ $b =~ ^$k$ ]] && keep=1; done
  [ $keep = 0 ] && ex+=(-E "${b//./\\.}\$")
done
export MUT_GO=$(command -v go) PATH="$here/shim:$PATH" MUT_LOG="$out/$name.calls.log"
# -count=1: gremlins sets each mutant's time limit from its coverage run, which a cached test
# result would make a fraction of a second (every mutant then "times out"). MUT_FAILFAST=1 adds
# -failfast: a killed mutant ends at its first failing test instead of running the rest.
export GOFLAGS="-buildvcs=false -vet=off -count=1${MUT_FAILFAST:+ -failfast}${run:+ -run=$run}"
{
  echo "# gremlins v0.6.0 unleash ./$pkg, files: $*; GOFLAGS=$GOFLAGS; coefficient $coef $extra"
  echo "# started $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
  /usr/bin/time -f "# wall %e s" nice -n "${MUT_NICE:-19}" "$(go env GOPATH)/bin/gremlins" unleash "./$pkg" --workers 1 \
    --timeout-coefficient "$coef" $extra "${ex[@]}" 2>&1
  echo "# ended $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
} > "$out/$name.txt" 2>&1
