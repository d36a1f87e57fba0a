#!/usr/bin/env bash
# torture-check.sh - regression check of a torture.sh results file against the committed list of
# smbtorture subtests that must pass.
#
# usage: interop/torture-check.sh RESULTS [EXPECTED]
#   EXPECTED defaults to interop/torture-expected-pass.txt: one subtest name per line
#   ('#' comments and blank lines ignored).
# Prints every expected subtest that did not pass ("REGRESSION <name> <result>"), notes subtests
# that pass but are not in the list yet, and ends with "N passed, N failed" where
# passed = subtests that passed in RESULTS, failed = expected subtests that did not pass.
# Exit status: 1 if any expected subtest did not pass, 2 on usage errors, else 0.
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
RESULTS="${1:-}"
EXPECTED="${2:-$HERE/torture-expected-pass.txt}"
if [[ -z "$RESULTS" || ! -r "$RESULTS" || ! -r "$EXPECTED" ]]; then
  sed -n '2,/^set -uo/p' "$0" | sed '$d' >&2
  exit 2
fi
awk '
  FNR == NR { if (NF >= 2) res[$1] = $2; next }
  { sub(/#.*/, ""); gsub(/^[ \t]+|[ \t\r]+$/, "") }
  $0 == "" { next }
  { want[$0] = 1; nwant++
    r = ($0 in res) ? res[$0] : "MISSING"
    if (r != "PASS") { print "REGRESSION " $0 " " r; bad++ } }
  END {
    for (n in res) if (res[n] == "PASS") { pass++; if (!(n in want)) { extra++; newp = newp "\n  " n } }
    printf "torture-check: %d of %d expected subtests passed", nwant - bad, nwant
    printf "; %d passing subtests are not in the expected list%s\n", extra, (extra > 0 && extra <= 10 ? ":" newp : (extra ? " (see interop/README.md to refresh it)" : ""))
    printf "%d passed, %d failed\n", pass, bad
    exit (bad > 0)
  }' "$RESULTS" "$EXPECTED"
