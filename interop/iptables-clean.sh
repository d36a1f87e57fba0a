#!/usr/bin/env bash
# iptables-clean.sh - removes the SMBTORTURE_* chains smbtorture's multichannel tests add.
#
# smbtorture blocks a channel with "-p tcp --sport PORT -j DROP" rules in chains of its own and
# removes them when a test ends; a test killed by its timeout leaves them behind. A stale rule
# drops every later connection that happens to get that ephemeral port, so a loopback connect
# hangs for minutes (SYN retries) in whatever test runs next. Run before and after smbtorture.
# usage: interop/iptables-clean.sh     (no-op without root or iptables)
set -uo pipefail
IPT=/usr/sbin/iptables
[[ $(id -u) == 0 && -x $IPT ]] || exit 0
chains="$($IPT -S 2>/dev/null | sed -n 's/^-N \(SMBTORTURE_[A-Za-z0-9_]*\)$/\1/p')"
[[ -z "$chains" ]] && exit 0
# Jumps into the chains first (from OUTPUT, INPUT and from each other), then the chains.
$IPT -S 2>/dev/null | grep -E '^-A .* -j SMBTORTURE_' | while read -r _ rest; do
  # shellcheck disable=SC2086
  $IPT -D $rest 2>/dev/null
done
n=0
for c in $chains; do
  $IPT -F "$c" 2>/dev/null; $IPT -X "$c" 2>/dev/null && n=$((n + 1))
done
echo "iptables-clean: removed $n stale SMBTORTURE chain(s)"
