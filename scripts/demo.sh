#!/usr/bin/env bash
# The demo: an edge in a test host serving examples/quickstart, queried from
# the client host. Each answer is shown with the path that answered it, read
# from the XDP and fallback counters. Then one endpoint is set down through
# the API and disappears from the answers. Everything is torn down at the end.
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=bin/steadydns
CFG=examples/quickstart/steadydns.yaml
P=sd
EDGE="nsenter --net=/var/run/netns/$P-edge --"
CLIENT="nsenter --net=/var/run/netns/$P-client --"
API=http://127.0.0.1:9153
LOG=$(mktemp /tmp/steadydns-demo.XXXXXX.log)
SERVE=

cleanup() {
	set +e
	[ -n "$SERVE" ] && kill "$SERVE" 2>/dev/null && wait "$SERVE" 2>/dev/null
	$EDGE $BIN detach --config $CFG 2>/dev/null
	$BIN testenv down --prefix $P
	echo "== torn down (server log: $LOG)"
}
trap cleanup EXIT

$BIN testenv down --prefix $P
echo "== test hosts: client, edge and two backends in network namespaces"
$BIN testenv up --prefix $P --backends 2

echo "== steadydns serve --config $CFG (in the edge host)"
$EDGE $BIN serve --config $CFG >"$LOG" 2>&1 &
SERVE=$!
for _ in $(seq 50); do
	$EDGE curl -sf $API/api/v1/records >/dev/null 2>&1 && break
	sleep 0.1
done
grep -E "xdp attached|serving" "$LOG" | sed 's/^/   /'

counts() {
	$EDGE curl -sf $API/metrics | awk '
		/^steadydns_queries_total/ && /path="xdp"/ && /outcome="(answered|nodata|servfail)"/ { x += $2 }
		/^steadydns_queries_total/ && /path="fallback"/ { f += $2 }
		END { printf "%d %d\n", x, f }'
}

ask() { # ask SERVER NAME TYPE [dig options]
	local server=$1 name=$2 type=$3
	shift 3
	read -r x0 f0 < <(counts)
	local out
	# The rcode, then each answer (or authority) record as TYPE RDATA.
	out=$($CLIENT dig +norec +time=2 +tries=1 "$@" @"$server" "$name" "$type" +noall +answer +authority +comments |
		awk '/->>HEADER<<-/ { sub(/.*status: /, ""); sub(/,.*/, ""); printf "%-8s", $0 }
		     /^[^;]/ && NF { r = $4; for (i = 5; i <= NF; i++) r = r " " $i; printf " %s;", r }')
	read -r x1 f1 < <(counts)
	local path=fallback
	[ $((x1 - x0)) -gt 0 ] && path=XDP
	printf "   %-26s %-5s %-5s via %-11s %-8s %s\n" "$name" "$type" "${1:-}" "$server" "$path" "$out"
}

echo "== queries from the client host"
ask 198.18.0.2 www.example.test A
ask 198.18.0.2 www.example.test AAAA
ask fd53::2 WwW.ExAmPlE.TeSt A
ask 198.18.0.2 static.example.test A
ask 198.18.0.2 example.test SOA
ask 198.18.0.2 example.test MX
ask 198.18.0.2 api.example.test A
ask 198.18.0.2 nope.example.test A
ask 198.18.0.2 www.example.test A +tcp

echo "== PUT /api/v1/checks/web1/admin down"
$EDGE curl -sf -X PUT --data down $API/api/v1/checks/web1/admin
sleep 0.5
ask 198.18.0.2 www.example.test A
ask fd53::2 www.example.test AAAA
echo "== steadydns status"
$EDGE $BIN status --config $CFG | sed 's/^/   /'

echo "== PUT /api/v1/checks/web1/admin auto"
$EDGE curl -sf -X PUT --data auto $API/api/v1/checks/web1/admin
sleep 0.5
ask 198.18.0.2 www.example.test A
