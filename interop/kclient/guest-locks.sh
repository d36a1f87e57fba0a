# guest-locks.sh - the locks suite (sourced by guest-test.sh after the NFS mount; busybox sh).
# fcntl (F_SETLK/F_SETLKW/F_GETLK) and flock locks on files of the share, taken through the
# kernel's NLM client, by kclock.c ("parent" = the kclock process, "child" = a process that
# opens the file itself: another lock owner). Each check is a KCLIENT-RESULT step lk_*.
# KC_LOCK_HOLD=1 adds the host-driven phase (hold_*, peer_*): the guest holds a write lock on
# bytes 0-99 of $KC_LOCK_FILE and reads commands from the host on ttyS2 (run.sh: KC_CMD), while
# the host's own client (SMB, or a process on the server's disk) locks the same file:
#   guest: hold_lock (0-99 held)        KCLIENT-WAIT for=peer_locked
#   host:  its lock on 0-99 must fail; it locks 200-299; sends "peer_locked"
#   guest: peer_setlk_denied (F_SETLK 200-299: EAGAIN/EACCES), peer_getlk_locked,
#          peer_setlkw_blocks (F_SETLKW 200-299 still waiting after 3 s)
#                                       KCLIENT-WAIT for=peer_unlocked
#   host:  unlocks 200-299; sends "peer_unlocked"
#   guest: peer_setlkw_granted (the F_SETLKW returns 0), hold_release (0-99 unlocked)
#                                       KCLIENT-WAIT for=peer_done
#   host:  its lock on 0-99 must now succeed; sends "peer_done"
# Any other line from the host ("abort") ends the phase.

umask 000   # files the host's own client (another user) opens too
LKF="$MNT/kclock-$KC_TAG.bin"
KQ=/tmp/kclock.q; KA=/tmp/kclock.a
lk_start() { # lk_start FILE: a kclock process on FILE, driven through fds 3 (commands), 4 (answers)
	rm -f $KQ $KA; mkfifo $KQ $KA
	KCLOCK_ALARM=150 kclock "$1" < $KQ > $KA 2>/tmp/kclock.err &
	KPID=$!
	exec 3> $KQ 4< $KA
	read -r -t 30 KLINE <&4
	out "KCLIENT-INFO kclock file=$1 $KLINE"
}
lk_stop() { echo quit >&3; exec 3>&- 4<&-; wait $KPID 2>/dev/null; }
# kc CMD: send one command, answer in $KA_LAST (spaces as ',' in $KA_W for result lines)
kc() {
	echo "$*" >&3
	KA_LAST=""
	read -r -t "${KC_LOCK_TIMEOUT:-200}" KA_LAST <&4 || KA_LAST="no-answer"
	KA_W=$(echo "$KA_LAST" | tr ' ' ',')
	echo "kclock: $* -> $KA_LAST"
}
# expect STEP PATTERN CMD...: a step, ok iff the answer matches the grep -E PATTERN
expect() {
	n=$1; pat=$2; shift 2
	kc "$@"
	if echo "$KA_LAST" | grep -qE "$pat"; then ok=1; else ok=0; fi
	step "$n" $ok cmd=$(echo "$*" | tr ' ' '_') answer=$KA_W
}
DENIED='err=(EAGAIN|EACCES)'

# 0. the kernel's lockd registered with the guest's rpcbind at the mount (fixed ports)
rpcinfo -p 127.0.0.1 > /tmp/rpcinfo.txt 2>&1
nlm=$(awk '$1==100021' /tmp/rpcinfo.txt | wc -l)
nlmport=$(awk '$1==100021 && $2==4 && $3=="tcp"{print $4}' /tmp/rpcinfo.txt | head -1)
sm=$(awk '$1==100024' /tmp/rpcinfo.txt | wc -l)
step lk_lockd_registered $([ "$nlm" -ge 2 ] && [ "$nlmport" = "$KC_LOCKD_PORT" ] && echo 1 || echo 0) \
	nlockmgr_entries=$nlm nlm4_tcp_port=$nlmport status_entries=$sm
ml=$(grep " $MNT " /proc/mounts)
ok=0; echo "$ml" | grep -q "local_lock=none" && ! echo "$ml" | grep -q nolock && ok=1
step lk_mount_locks $ok $(echo "$ml" | grep -oE 'local_lock=[a-z]+|nolock|nconnect=[0-9]+' | tr '\n' ' ')

# 1. fcntl: one owner's lock, a second owner refused. Between two owners on this client the
# client's own lock table refuses first (lockd checks it before asking the server); the
# server decides lk_child_fcntl_vs_flock (flock and fcntl locks live apart in the client) and
# the peer_* phase.
lk_start "$LKF"
expect lk_setlk_w '^ok' setlk w 0 100
expect lk_getlk_own '^ok unlocked' getlk w 0 100
expect lk_child_setlk_conflict "^child $DENIED" child setlk w 0 100
expect lk_child_getlk '^child ok locked type=w' child getlk w 0 100
expect lk_child_setlk_other_range '^child ok' child setlk w 100 100
expect lk_unlock '^ok' setlk u 0 100
expect lk_child_setlk_after_unlock '^child ok' child setlk w 0 100
# NSM: the first lock made lockd ask rpc.statd to monitor the server
nsm=$(ls /var/lib/nfs/sm 2>/dev/null | tr '\n' ' ')
step lk_nsm_monitor $([ -n "$nsm" ] && echo 1 || echo 0) sm_entries=$(echo $nsm | tr ' ' ',')
# read locks share, a write lock in their range is refused
expect lk_setlk_r '^ok' setlk r 0 100
expect lk_child_setlk_r '^child ok' child setlk r 0 100
expect lk_child_setlk_w_in_r "^child $DENIED" child setlk w 50 10
expect lk_unlock_r '^ok' setlk u 0 100
# F_SETLKW waits for the holder's unlock. Both owners are on this client: the waiter first
# waits in the client's own lock table; the holder's unlock reaches the server asynchronously,
# so the waiter's LOCK may get there first and be BLOCKED: then the server's GRANTED callback,
# or the client asking again every 30 s when no callback reaches it, grants it. (The peer_*
# phase below waits at the server only: there the grant needs the callback or the 30 s.)
expect lk_setlk_w2 '^ok' setlk w 0 100
kc bg setlkw w 0 100
kc sleep 3000
expect lk_setlkw_blocks '^pending' bgpoll
expect lk_unlock_for_setlkw '^ok' setlk u 0 100
t0=$(now)
kc bgwait 90
ok=0; echo "$KA_LAST" | grep -q '^bg ok' && ok=1
step lk_setlkw_granted $ok answer=$KA_W secs_after_unlock=$(dt "$t0" "$(now)")
# flock: whole-file locks (the NFS client sends them as whole-file NLM locks: local_lock=none)
expect lk_flock_ex '^ok' flock ex
expect lk_child_flock_conflict "^child $DENIED" child flock ex nb
expect lk_child_fcntl_vs_flock "^child $DENIED" child setlk w 0 10
expect lk_flock_un '^ok' flock un
expect lk_child_flock_after_un '^child ok' child flock ex nb
expect lk_flock_sh '^ok' flock sh
expect lk_child_flock_sh '^child ok' child flock sh nb
expect lk_flock_un2 '^ok' flock un
lk_stop
rm -f "$LKF"

# 2. host-driven: cross-protocol conflicts with the host's own client
if [ "${KC_LOCK_HOLD:-0}" = 1 ]; then
	CMD=/dev/ttyS2
	waitcmd() { # waitcmd WORD: KCLIENT-WAIT, then wait for the host's line WORD
		out "KCLIENT-WAIT for=$1"
		W=""
		read -r -t "${KC_LOCK_WAIT:-300}" W <&5 || W="timeout"
		W=$(echo "$W" | tr -d '\r')
		out "KCLIENT-INFO host_said=$W"
		[ "$W" = "$1" ]
	}
	if [ -c $CMD ] && stty -F $CMD raw -echo 2>/dev/null && exec 5< $CMD; then
		HF="$MNT/${KC_LOCK_FILE:-kclock-hold.bin}"
		lk_start "$HF"
		expect hold_lock '^ok' setlk w 0 100
		if waitcmd peer_locked; then
			expect peer_setlk_denied "^$DENIED" setlk w 200 100
			expect peer_getlk_locked '^ok locked type=w start=200' getlk w 200 100
			kc bg setlkw w 200 100
			kc sleep 3000
			expect peer_setlkw_blocks '^pending' bgpoll
			if waitcmd peer_unlocked; then
				t0=$(now)
				kc bgwait 90
				ok=0; echo "$KA_LAST" | grep -q '^bg ok' && ok=1
				step peer_setlkw_granted $ok answer=$KA_W secs_after_unlock=$(dt "$t0" "$(now)")
			else
				step peer_setlkw_granted 0 host=$W
			fi
			kc bgkill
			expect hold_release '^ok' setlk u 0 100
			waitcmd peer_done || step peer_done 0 host=$W
		else
			step peer_locked 0 host=$W
		fi
		lk_stop
		exec 5<&-
	else
		step hold_cmd_channel 0 tty=$CMD
	fi
fi
