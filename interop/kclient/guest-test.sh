#!/bin/sh
# kclient guest test script (busybox sh). Parameters come from /kc/params.sh
# (appended to the initramfs per run by run.sh):
#   KC_MODE=smb|nfs KC_PORT KC_MPORT KC_SHARE KC_USER KC_PASS KC_EXPORT KC_EXTRA
#   KC_SIZE_MB KC_NFILES KC_PAR KC_TAG KC_MC_RELAY KC_EXPECT_CHANNELS KC_EXPECT_CONNS
#   KC_SUITE=full (default) | dircache (listings kept open see each change: dircache.c)
#          | locks (fcntl/flock over NFS through NLM: kclock.c; KC_LOCK_HOLD=1 adds the
#            host-driven phase, commands on ttyS2)
#   KC_NFS_LOCKS=1 (rpcbind + rpc.statd, no nolock) KC_LOCKD_PORT KC_STATD_PORT
#   KC_NLM_CALLBACK=127.0.0.N (hostname, SNAT of forwarded callbacks) KC_LOCK_HOLD KC_LOCK_FILE
#   KC_RESTRICT=off (the guest filters its own output) KC_FWD_PORTS KC_CB_SNAT
. /kc/params.sh
R=${R:-/dev/ttyS1}
[ -c "$R" ] || R=/dev/console
SRV=10.0.2.100
MNT=/mnt
KC_SIZE_MB=${KC_SIZE_MB:-64}
KC_NFILES=${KC_NFILES:-200}
KC_PAR=${KC_PAR:-4}
KC_TAG=${KC_TAG:-kclient-$$}
PASSN=0
FAILN=0

out() { echo "$*" > "$R"; echo "$*"; }
now() { cut -d' ' -f1 /proc/uptime; }
dt() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.2f", b-a}'; }
mbps() { awk -v a="$1" -v b="$2" -v m="$3" 'BEGIN{d=b-a; if (d<=0) d=0.01; printf "%.1f", m/d}'; }
step() { # step NAME OK [k=v ...]
	n=$1; ok=$2; shift 2
	if [ "$ok" = 1 ]; then PASSN=$((PASSN+1)); else FAILN=$((FAILN+1)); fi
	out "KCLIENT-RESULT step=$n ok=$ok $*"
}
dump() { # dump PREFIX FILE  -> prefixed lines on the result channel
	p=$1; f=$2
	[ -r "$f" ] || return 0
	sed "s/^/$p| /" "$f" > "$R"
}
hexport() { printf '%04X' "$1"; }
# count ESTABLISHED tcp connections whose remote end is IPHEX:PORT
conns() {
	ph=$(hexport "$2")
	awk -v r="$1:$ph" '$3==r && $4=="01"{n++} END{print n+0}' /proc/net/tcp
}

do_mount() {
	case "$KC_MODE" in
	smb)
		pw=$(printf '%s' "$KC_PASS" | sed 's/,/,,/g')
		opts="vers=3.1.1,port=$KC_PORT,username=$KC_USER,password=$pw,ip=$SRV${KC_EXTRA:+,$KC_EXTRA}"
		timeout 120 kmount "//$SRV/$KC_SHARE" "$MNT" cifs "$opts"
		;;
	nfs)
		nl=nolock,; [ "${KC_NFS_LOCKS:-0}" = 1 ] && nl=
		opts="vers=3,proto=tcp,port=$KC_PORT,mountport=$KC_MPORT,mountproto=tcp,mountvers=3,${nl}addr=$SRV,mountaddr=$SRV${KC_EXTRA:+,$KC_EXTRA}"
		[ -n "${KC_NFS_OPTS:-}" ] && opts="$KC_NFS_OPTS,addr=$SRV,mountaddr=$SRV"
		timeout 120 kmount "$SRV:$KC_EXPORT" "$MNT" nfs "$opts"
		;;
	*) echo "bad mode $KC_MODE"; return 1 ;;
	esac
}

out "KCLIENT-INFO mode=$KC_MODE port=$KC_PORT mport=$KC_MPORT extra=$KC_EXTRA size_mb=$KC_SIZE_MB nfiles=$KC_NFILES par=$KC_PAR"

# ---- NFS locking (KC_NFS_LOCKS=1): the guest kernel's lockd registers with rpcbind at the
# mount, and asks rpc.statd (through rpcbind, over loopback) to monitor the server at the
# first lock; without both the mount needs nolock.
KC_LOCKD_PORT=${KC_LOCKD_PORT:-30001}
KC_STATD_PORT=${KC_STATD_PORT:-30003}
rpc_has() { rpcinfo -p 127.0.0.1 2>/dev/null | awk -v p="$1" '$1==p{n++} END{exit n?0:1}'; }
nlm_userspace() {
	# the name lockd sends as caller_name (and statd as its own); with KC_NLM_CALLBACK the
	# callback address, so servers that call back by caller_name reach the forward too
	hostname "${KC_NLM_CALLBACK:-kclient}"
	# fixed lockd ports (sysctls of the lockd module; read when lockd starts at the mount)
	echo "$KC_LOCKD_PORT" > /proc/sys/fs/nfs/nlm_tcpport
	echo "$KC_LOCKD_PORT" > /proc/sys/fs/nfs/nlm_udpport
	rpcbind -f > /tmp/rpcbind.log 2>&1 &
	i=0; while ! rpc_has 100000 && [ $i -lt 50 ]; do sleep 0.2; i=$((i+1)); done
	rpc.statd -F -d -p "$KC_STATD_PORT" -o "$((KC_STATD_PORT+1))" > /tmp/statd.log 2>&1 &
	i=0; while ! rpc_has 100024 && [ $i -lt 50 ]; do sleep 0.2; i=$((i+1)); done
	rb=0; st=0; rpc_has 100000 && rb=1; rpc_has 100024 && st=1
	step nlm_userspace $([ $rb = 1 ] && [ $st = 1 ] && echo 1 || echo 0) rpcbind=$rb statd=$st \
		lockd_port=$KC_LOCKD_PORT statd_port=$KC_STATD_PORT hostname=$(hostname)
	if [ -n "${KC_NLM_CALLBACK:-}" ] && [ "${KC_CB_SNAT:-1}" = 1 ]; then
		# Forwarded callbacks (QEMU hostfwd) arrive from 10.0.2.2, but the kernel's NLM client
		# takes a GRANTED only from the address it mounted (nlmclnt_grant: rpc_cmp_addr), so
		# make them come from the server's address, 10.0.2.100.
		ok=1
		for m in $(cat /etc/kc-insmod-nat); do
			o=$(insmod "$m" 2>&1) || case "$o" in *exists*) ;; *) ok=0; echo "insmod $m: $o";; esac
		done
		nft -f - <<-NFT || ok=0
		table ip kc_cb {
			chain in { type nat hook input priority 100; policy accept;
				ip saddr 10.0.2.2 counter snat to 10.0.2.100; }
		}
		NFT
		step callback_snat $ok from=10.0.2.2 to=$SRV
	fi
	if [ -n "${KC_NLM_CALLBACK:-}" ] && [ "${KC_RESTRICT:-on}" = off ]; then
		# slirp without restrict would carry anything the guest sends to the host's loopback
		# (10.0.2.2) and beyond: the guest keeps to what restrict=on allows, plus the replies
		# to forwarded callbacks (UDP included, which restrict=on drops)
		ok=1
		for m in $(cat /etc/kc-insmod-nat); do
			o=$(insmod "$m" 2>&1) || case "$o" in *exists*) ;; *) ok=0; echo "insmod $m: $o";; esac
		done
		ports=$(echo $KC_FWD_PORTS | tr ' ' ',')
		nft -f - <<-NFT || ok=0
		table ip kc_out {
			chain out { type filter hook output priority 0; policy accept;
				oifname "lo" accept;
				ip daddr $SRV tcp dport { $ports } accept;
				ip daddr 10.0.2.2 ct state established,related accept;
				counter drop; }
		}
		NFT
		step egress_filter $ok tcp_to=$SRV:$ports replies_to=10.0.2.2
	fi
}
if [ "$KC_MODE" = nfs ] && [ "${KC_NFS_LOCKS:-0}" = 1 ]; then
	nlm_userspace
fi

# optional in-guest loopback relay so that secondary SMB channels to a server
# interface advertised as 127.0.0.1 (port 445 or KC_PORT) reach the real server
if [ "$KC_MODE" = smb ] && [ "${KC_MC_RELAY:-0}" = 1 ]; then
	nc -ll -p 445 -e nc $SRV "$KC_PORT" &
	[ "$KC_PORT" != 445 ] && nc -ll -p "$KC_PORT" -e nc $SRV "$KC_PORT" &
	sleep 1
	out "KCLIENT-INFO mc_relay=on guest 127.0.0.1:445,$KC_PORT -> $SRV:$KC_PORT"
fi

# optional: prove the guest can reach nothing but the forwarded server port(s)
if [ "${KC_NETCHECK:-0}" = 1 ]; then
	blocked=0; total=0
	for t in "10.0.2.2 $KC_PORT" "10.0.2.2 22" "10.0.2.100 $((KC_PORT+7))" "10.0.2.3 53" "1.1.1.1 443" "192.168.0.1 80"; do
		total=$((total+1))
		if timeout 6 nc -w 4 $t </dev/null >/dev/null 2>&1; then out "KCLIENT-INFO netcheck tcp_reachable=$t"
		else blocked=$((blocked+1)); fi
	done
	total=$((total+1))
	if timeout 6 nslookup debian.org 10.0.2.3 >/dev/null 2>&1; then out "KCLIENT-INFO netcheck dns_works"; else blocked=$((blocked+1)); fi
	total=$((total+1))
	if timeout 6 ping -c 1 -W 3 1.1.1.1 >/dev/null 2>&1; then out "KCLIENT-INFO netcheck icmp_reachable=1.1.1.1"; else blocked=$((blocked+1)); fi
	# positive control: the forwarded server port must be reachable
	nc -w 4 $SRV "$KC_PORT" </dev/null >/dev/null 2>&1 &
	ncpid=$!; sleep 2
	pc=$(awk -v r="6402000A:$(hexport "$KC_PORT")" '$3==r{n++} END{print n+0}' /proc/net/tcp)
	kill $ncpid 2>/dev/null; wait $ncpid 2>/dev/null
	step net_isolation $([ $blocked = $total ] && [ "$pc" -ge 1 ] && echo 1 || echo 0) blocked=$blocked/$total forwarded_port_reachable=$pc
fi

# 1. mount
t0=$(now)
if do_mount; then
	step mount 1 secs=$(dt "$t0" "$(now)")
	grep " $MNT " /proc/mounts | sed 's/password=[^,]*/password=***/' | while read -r l; do out "KCLIENT-INFO mountline=$l"; done
else
	step mount 0
	dmesg | grep -iE 'cifs|smb|nfs|rpc|lockd' | tail -40 | sed 's/^/KCLIENT-DMESG| /' > "$R"
	out "KCLIENT-SUMMARY $PASSN passed, $FAILN failed"
	exit 1
fi

# locks suite: fcntl and flock locks over NFS through the kernel's NLM client (kclock.c)
if [ "${KC_SUITE:-full}" = locks ]; then
	. /kc/locks.sh
	cd /
	if umount "$MNT"; then step umount 1; else step umount 0; fi
	rpcinfo -p 127.0.0.1 > /tmp/rpcinfo.txt 2>&1; dump RPCINFO /tmp/rpcinfo.txt
	dump RPCBIND-LOG /tmp/rpcbind.log; dump STATD-LOG /tmp/statd.log
	[ -n "${KC_NLM_CALLBACK:-}" ] && { nft list ruleset > /tmp/nft.txt 2>&1; dump NFT /tmp/nft.txt; }
	dmesg | grep -iE 'nfs|rpc|lockd|statd|nsm' | tail -40 | sed 's/^/KCLIENT-DMESG| /' > "$R"
	out "KCLIENT-SUMMARY $PASSN passed, $FAILN failed"
	exit 0
fi

# dircache suite: a listing kept open sees each unlink, rename out and create at once.
# It runs in the share's root, the directory the 6.1 client caches under a lease.
if [ "${KC_SUITE:-full}" = dircache ]; then
	for m in unlink rename-out create-in; do
		t0=$(now)
		dircache "$m" "$MNT" "$KC_NFILES" > /tmp/dc.txt 2>&1
		rc=$?
		dump DIRCACHE-OUT /tmp/dc.txt
		res=$(grep '^DIRCACHE ' /tmp/dc.txt | cut -d' ' -f2-)
		step "dircache_$m" $([ $rc = 0 ] && echo 1 || echo 0) $res secs=$(dt "$t0" "$(now)")
	done
	cd /
	if umount "$MNT"; then step umount 1; else step umount 0; fi
	dmesg | grep -iE 'cifs|smb|nfs' | tail -30 | sed 's/^/KCLIENT-DMESG| /' > "$R"
	out "KCLIENT-SUMMARY $PASSN passed, $FAILN failed"
	exit 0
fi

D="$MNT/$KC_TAG"
mkdir -p "$D"
step mkdir $([ -d "$D" ] && echo 1 || echo 0) dir=$KC_TAG

# 2. write a KC_SIZE_MB file of random data
dd if=/dev/urandom of=/tmp/src.bin bs=1M count="$KC_SIZE_MB" 2>/dev/null
SRCMD5=$(md5sum /tmp/src.bin | cut -d' ' -f1)
t0=$(now)
if dd if=/tmp/src.bin of="$D/big.bin" bs=1M conv=fsync 2>/dev/null && sync; then
	t1=$(now)
	sz=$(stat -c %s "$D/big.bin" 2>/dev/null)
	ok=0; [ "$sz" = $((KC_SIZE_MB*1048576)) ] && ok=1
	step write "$ok" bytes=$sz secs=$(dt "$t0" "$t1") MBps=$(mbps "$t0" "$t1" "$KC_SIZE_MB")
else
	step write 0
fi

# 3. remount (drops client caches / handles) and read back
cd /
sync; echo 3 > /proc/sys/vm/drop_caches
t0=$(now)
if umount "$MNT" && do_mount; then step remount 1 secs=$(dt "$t0" "$(now)"); else step remount 0; fi
t0=$(now)
RMD5=$(md5sum "$D/big.bin" 2>/dev/null | cut -d' ' -f1)
t1=$(now)
ok=0; [ -n "$RMD5" ] && [ "$RMD5" = "$SRCMD5" ] && ok=1
step readback_md5 "$ok" src=$SRCMD5 read=$RMD5 secs=$(dt "$t0" "$t1") MBps=$(mbps "$t0" "$t1" "$KC_SIZE_MB")

# 4. small files: create / list / rename / verify / delete
S="$D/small"
mkdir -p "$S"
t0=$(now)
i=1; ok=1
while [ $i -le "$KC_NFILES" ]; do
	echo "kclient small file $i" > "$S/f$i" || { ok=0; break; }
	i=$((i+1))
done
step small_create "$ok" n=$KC_NFILES secs=$(dt "$t0" "$(now)")
n=$(ls "$S" | grep -c '^f')
step small_list $([ "$n" = "$KC_NFILES" ] && echo 1 || echo 0) listed=$n
t0=$(now)
i=1; ok=1
while [ $i -le "$KC_NFILES" ]; do
	mv "$S/f$i" "$S/g$i" || { ok=0; break; }
	i=$((i+1))
done
nf=$(ls "$S" | grep -c '^f'); ng=$(ls "$S" | grep -c '^g')
[ "$nf" = 0 ] && [ "$ng" = "$KC_NFILES" ] || ok=0
step small_rename "$ok" old=$nf new=$ng secs=$(dt "$t0" "$(now)")
ok=1
for i in 1 $((KC_NFILES/2)) "$KC_NFILES"; do
	[ "$(cat "$S/g$i" 2>/dev/null)" = "kclient small file $i" ] || ok=0
done
step small_verify "$ok"
t0=$(now)
rm -f "$S"/g* ; rmdir "$S"
ok=0; [ ! -e "$S" ] && ok=1
step small_delete "$ok" secs=$(dt "$t0" "$(now)")

# 5. parallel reads (exercise channels / nconnect transports)
sync; echo 3 > /proc/sys/vm/drop_caches
SEG=$((KC_SIZE_MB / KC_PAR))
t0=$(now)
pids=""
i=0
while [ $i -lt "$KC_PAR" ]; do
	dd if="$D/big.bin" of=/tmp/part.$i bs=1M skip=$((i*SEG)) count=$SEG 2>/dev/null &
	pids="$pids $!"
	i=$((i+1))
done
sleep 1
if [ "$KC_MODE" = smb ]; then
	C_PEAK=$(conns 6402000A "$KC_PORT")
	[ "${KC_MC_RELAY:-0}" = 1 ] && C_PEAK="$C_PEAK+relay$(($(conns 0100007F 445) + $( [ "$KC_PORT" != 445 ] && conns 0100007F "$KC_PORT" || echo 0)))"
else
	C_PEAK=$(conns 6402000A "$KC_PORT")
fi
ok=1
for p in $pids; do wait "$p" || ok=0; done
t1=$(now)
i=0; : > /tmp/joined
while [ $i -lt "$KC_PAR" ]; do cat /tmp/part.$i >> /tmp/joined; i=$((i+1)); done
PMD5=$(head -c $((SEG*KC_PAR*1048576)) /tmp/src.bin | md5sum | cut -d' ' -f1)
JMD5=$(md5sum /tmp/joined | cut -d' ' -f1)
[ "$PMD5" = "$JMD5" ] || ok=0
rm -f /tmp/part.* /tmp/joined
step parallel_read "$ok" streams=$KC_PAR secs=$(dt "$t0" "$t1") MBps=$(mbps "$t0" "$t1" $((SEG*KC_PAR))) tcp_conns_during=$C_PEAK

# 6. protocol-specific introspection
if [ "$KC_MODE" = smb ]; then
	if [ -r /proc/fs/cifs/DebugData ]; then
		cat /proc/fs/cifs/DebugData > /tmp/dd.txt
		dump DEBUGDATA /tmp/dd.txt
		extra=$(grep -o 'Extra Channels: [0-9]*' /tmp/dd.txt | awk '{s+=$3} END{print s+0}')
		nses=$(grep -cE '^[[:space:]]+[0-9]+\) Address:' /tmp/dd.txt)
		ifaces=$(grep -o 'Server interfaces: [0-9]*' /tmp/dd.txt | head -1 | awk '{print $3+0}')
		ch=$((nses + extra))
		step debugdata 1 sessions=$nses channels=$ch server_ifaces=${ifaces:-0} tcp_conns=$(conns 6402000A "$KC_PORT")
		enc=$(grep -c 'Serial Number: .*Encrypted' /tmp/dd.txt)
		sgn=$(grep -cE 'SessionId: 0x[0-9a-f]+ .*signed' /tmp/dd.txt)
		out "KCLIENT-INFO channels=$ch encrypted_tcons=$enc signed_sessions=$sgn dialect=$(grep -o 'Dialect 0x[0-9a-f]*' /tmp/dd.txt | head -1 | cut -d' ' -f2)"
		if [ -n "$KC_EXPECT_CHANNELS" ]; then
			step channels $([ "$ch" -ge "$KC_EXPECT_CHANNELS" ] && echo 1 || echo 0) channels=$ch expected_min=$KC_EXPECT_CHANNELS
		fi
	else
		step debugdata 0
	fi
	if [ -r /proc/fs/cifs/Stats ]; then dump STATS /proc/fs/cifs/Stats; step stats 1; else step stats 0; fi
else
	awk -v m="$MNT" '$0 ~ "^device " {p = (index($0, " on " m " ") > 0)} p' /proc/self/mountstats > /tmp/ms.txt
	dump MOUNTSTATS /tmp/ms.txt
	nx=$(grep -c '^[[:space:]]*xprt:' /tmp/ms.txt)
	nc_=$(conns 6402000A "$KC_PORT")
	step mountstats $([ -s /tmp/ms.txt ] && echo 1 || echo 0) xprts=$nx tcp_conns=$nc_
	out "KCLIENT-INFO nfs_xprts=$nx tcp_conns=$nc_"
	if [ -n "$KC_EXPECT_CONNS" ]; then
		step nconnect $([ "$nx" -ge "$KC_EXPECT_CONNS" ] && echo 1 || echo 0) xprts=$nx expected_min=$KC_EXPECT_CONNS
	fi
fi
cat /proc/net/tcp > /tmp/tcp.txt; dump PROCNETTCP /tmp/tcp.txt

# 7. cleanup + umount
rm -f "$D/big.bin"; rmdir "$D"
ok=0; [ ! -e "$D" ] && ok=1
step cleanup "$ok"
cd /
if umount "$MNT"; then step umount 1; else step umount 0; fi
dmesg | grep -iE 'cifs|smb|nfs|rpc|lockd|channel' | tail -60 | sed 's/^/KCLIENT-DMESG| /' > "$R"
out "KCLIENT-SUMMARY $PASSN passed, $FAILN failed"
