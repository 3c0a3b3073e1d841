#!/bin/sh
# Benchmark (make bench): the gradient sync overlapped with the last
# micro-batch's backward (default) vs after it (--no-overlap), on a plan
# where the sync is a visible share of the step: two TP-1 pipelines of the
# hidden-256 model, one sample each (27 MB of gradients per rank, little
# compute; SPEC="1/1:1x8;2/2:1x8" makes pipeline 1 twice as slow).  Runs
# the modes in turn REPS times; each run's step time is the median of
# rank 0's time_s over steps 3..STEPS (1-2 warm up); a mode's time is the
# best of its REPS runs, and the ratio is overlap / no-overlap (goal < 1).
# Other work on the machine changes the numbers: the load average
# (uptime) before and after is printed with them.  No timed assertion.
#
# Transport: shared memory (btl self,vader) when the ranks fit the cores,
# else TCP on loopback as the tests use (rt_env.sh: vader misbehaves when
# oversubscribed); BTL=... overrides.  MODES="on off layer" adds "layer":
# overlap polled at layer ends only (HEXI_RT_SYNC_POLL=0), not between the
# GEMMs of a layer.  ENV="VAR=VALUE ..." goes to every run (for instance
# HEXI_RT_SYNC_BUCKET=262144).  ZERO=1: the plan under train.zero 1
# (overlapped: non-blocking reduce-scatters into the owned sums; the
# all-gather of the updated weights follows the step either way).
# --json: one JSON line.
#
# LINK=RATE (root; iproute2 with veth, htb and u32): the ranks' TCP runs
# over an emulated inter-node link of RATE (tc's units: 10gbit, 2gbit,
# 500mbit), both directions sharing it, as between two nodes of a
# cluster whose NICs move the bytes while the cores compute.  A veth
# (hexilnk0) carries 198.18.99.1, from RFC 2544's benchmarking range; the
# ranks' traffic to it goes over lo, where an htb class selected by a u32
# filter on that destination limits it to RATE (lo's other traffic takes
# an unlimited default class).  The link is torn down on exit; the script
# refuses a lo that already has a queueing discipline of its own, and
# checks that the step's bytes did cross the limited class.
top_srcdir=${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}
top_builddir=${top_builddir:-$(pwd)/../..}
. "$top_srcdir/tests/runtime/rt_env.sh"
need_mpi
command -v jq >/dev/null 2>&1 || skip "jq not installed"
REPS=${REPS:-5}
STEPS=${STEPS:-12}
SPEC=${SPEC:-"1/1:1x8;1/1:1x8"}
MODES=${MODES:-"on off"}
ZERO=${ZERO:-0}
"$MKPLAN" "$PLANS/bench-model.json" "$SPEC" "$WORK/p.json" >/dev/null ||
	hard "mkplan"
case $ZERO in
0) ;;
1 | 2)
	jq "del(.hash) | .train.zero = $ZERO" "$WORK/p.json" >"$WORK/pz.json" &&
		mv "$WORK/pz.json" "$WORK/p.json" || hard "jq: train.zero $ZERO"
	;;
*) hard "ZERO='$ZERO': 0, 1 or 2" ;;
esac
np=$(plan_ranks "$WORK/p.json")
cores=$(nproc 2>/dev/null || echo 1)
LINK=${LINK:-}
LNK=hexilnk0 LNK_IP=198.18.99.1
# link_down: remove the emulated link, if this script's is there
link_down() {
	ip link show "$LNK" >/dev/null 2>&1 || return 0
	tc qdisc show dev lo | grep -q '^qdisc htb 1: root' &&
		tc qdisc del dev lo root
	ip link del "$LNK"
}
link_up() {
	[ "$(id -u)" = 0 ] || skip "LINK=$LINK needs root (ip, tc)"
	if ! command -v tc >/dev/null 2>&1 || ! command -v ip >/dev/null 2>&1; then
		skip "LINK=$LINK: iproute2 (ip, tc) not installed"
	fi
	link_down
	tc qdisc show dev lo | grep -q '^qdisc noqueue' ||
		hard "LINK: lo has a queueing discipline of its own ($(tc qdisc show dev lo | head -n 1)); not replacing it"
	{ ip link add "$LNK" type veth peer name hexilnk1 &&
		ip addr add "$LNK_IP/32" dev "$LNK" && ip link set "$LNK" up &&
		tc qdisc add dev lo root handle 1: htb default 10 &&
		tc class add dev lo parent 1: classid 1:10 htb rate 100gbit \
			burst 4m cburst 4m quantum 200000 &&
		tc class add dev lo parent 1: classid 1:20 htb rate "$LINK" \
			ceil "$LINK" burst 1m cburst 1m quantum 200000 &&
		tc filter add dev lo parent 1: protocol ip u32 \
			match ip dst "$LNK_IP/32" flowid 1:20; } >"$WORK/link.log" 2>&1 || {
		link_down
		hard "LINK=$LINK: could not build the link ($(head -n 1 "$WORK/link.log"))"
	}
	BTL=self,tcp
	OMPI_MCA_btl_tcp_if_include=$LNK
	export OMPI_MCA_btl_tcp_if_include
}
# bytes sent through the limited class so far
link_bytes() {
	tc -s class show dev lo classid 1:20 | sed -n 's/^ *Sent \([0-9]*\) bytes.*/\1/p'
}
if [ -n "$LINK" ]; then
	trap 'link_down; rm -rf "$WORK"' EXIT
	# a signal stops the run in flight (timeout passes it on to mpirun)
	# before the link goes
	trap 'pkill -TERM -f "$WORK/p.json" 2>/dev/null; sleep 1; exit 130' INT
	trap 'pkill -TERM -f "$WORK/p.json" 2>/dev/null; sleep 1; exit 143' TERM
	link_up
fi
if [ -z "${BTL:-}" ]; then
	BTL=self,tcp
	[ "$np" -le "$cores" ] && BTL=self,vader
fi
OMPI_MCA_btl=$BTL
export OMPI_MCA_btl
load() { sed 's/ .*//' /proc/loadavg 2>/dev/null || echo -1; }
load0=$(load)
med() { sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
for _ in $(seq "$REPS"); do
	for mode in $MODES; do
		opt='' poll=''
		[ "$mode" = off ] && opt=--no-overlap
		[ "$mode" = layer ] && poll=HEXI_RT_SYNC_POLL=0
		# shellcheck disable=SC2086
		HX_TIMEOUT=300 hx_mpirun "$np" env $ENV $poll "$HT" \
			--plan "$WORK/p.json" --steps "$STEPS" --json $opt \
			2>/dev/null | tail -n +3 |
			jq -r '"\(.time_s) \(.dp_sync_s)"' >"$WORK/run" ||
			hard "hexitrain ($mode)"
		[ -s "$WORK/run" ] || hard "hexitrain ($mode): no step lines"
		echo "$(cut -d' ' -f1 "$WORK/run" | med)" \
			"$(cut -d' ' -f2 "$WORK/run" | med)" >>"$WORK/$mode"
	done
done
load1=$(load)
if [ -n "$LINK" ]; then
	lb=$(link_bytes)
	[ "${lb:-0}" -gt 0 ] || hard "LINK=$LINK: no byte crossed the limited link"
fi
# best run of a mode: its step time and sync wait
best() { sort -g "$WORK/$1" | head -n 1; }
t_on=$(best on | cut -d' ' -f1)
s_on=$(best on | cut -d' ' -f2)
t_off=$(best off | cut -d' ' -f1)
s_off=$(best off | cut -d' ' -f2)
ratio=$(awk -v a="$t_on" -v b="$t_off" 'BEGIN {printf "%.3f", a / b}')
lay=
if [ -s "$WORK/layer" ]; then
	t_lay=$(best layer | cut -d' ' -f1)
	lay=$(awk -v a="$t_lay" -v b="$t_off" 'BEGIN {printf "%.3f", a / b}')
fi
if [ "${1:-}" = --json ]; then
	printf '{"bench":"overlap","plan":"%s","zero":%d,"ranks":%d,' \
		"$SPEC" "$ZERO" "$np"
	printf '"cores":%d,' "$cores"
	printf '"btl":"%s","reps":%d,"load_before":%s,"load_after":%s,' \
		"$BTL" "$REPS" "$load0" "$load1"
	if [ -n "$LINK" ]; then
		printf '"link":"%s","link_bytes":%s,' "$LINK" "$lb"
	else
		printf '"link":null,'
	fi
	printf '"overlap_s":%s,"no_overlap_s":%s,' "$t_on" "$t_off"
	printf '"sync_wait_overlap_s":%s,"sync_no_overlap_s":%s,' \
		"$s_on" "$s_off"
	[ -n "$lay" ] && printf '"layer_poll_s":%s,"layer_poll_ratio":%s,' \
		"$t_lay" "$lay"
	printf '"ratio":%s}\n' "$ratio"
else
	[ -n "$LINK" ] && BTL="$BTL over a $LINK link"
	echo "overlap $SPEC zero $ZERO ($np ranks on $cores cores, btl $BTL, best of" \
		"$REPS, load $load0 -> $load1): step $t_on s (sync wait" \
		"$s_on s) vs --no-overlap $t_off s (sync $s_off s):" \
		"ratio $ratio (goal < 1)"
	[ -n "$lay" ] && echo "  polled at layer ends only: $t_lay s," \
		"ratio $lay"
fi
exit 0
