#!/usr/bin/env bash
# The demo: an edge in a test host serving examples/quickstart, queried from
# the client host, with real HTTP backends behind its health checks. Each
# answer is shown with the path that answered it, read from the XDP and
# fallback counters. A backend is stopped, drops out of the answers, and the
# health-check log says why; it is restarted and comes back. Then an endpoint
# is forced down through the API. Everything is torn down at the end.
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=bin/steadydns
CFG=examples/quickstart/steadydns.yaml
P=sd
EDGE="nsenter --net=/var/run/netns/$P-edge --"
CLIENT="nsenter --net=/var/run/netns/$P-client --"
API=http://127.0.0.1:9153
# Writes to the API need its token: the config sets no api_token_file, so
# the server makes it in its state_dir, the default, at the first start.
TOKEN=/var/lib/steadydns/api.token
LOG=$(mktemp /tmp/steadydns-demo.XXXXXX.log)
SERVE=
B1=
B2=

cleanup() {
	set +e
	for p in $SERVE $B1 $B2; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
	$EDGE $BIN detach --config $CFG 2>/dev/null
	$BIN testenv down --prefix $P
	echo "== torn down (server log: $LOG)"
}
trap cleanup EXIT

$BIN testenv down --prefix $P
echo "== test hosts: client, edge and two backends in network namespaces"
$BIN testenv up --prefix $P --backends 2

echo "== HTTP backends on 198.18.1.1 and 198.18.1.2 (GET /healthz answers ok)"
nsenter --net=/var/run/netns/$P-b1 -- $BIN testenv backend --listen 198.18.1.1:80 &
B1=$!
nsenter --net=/var/run/netns/$P-b2 -- $BIN testenv backend --listen 198.18.1.2:80 &
B2=$!

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

events() {
	$EDGE curl -sf $API/api/v1/events | awk -F'"' '
		/"time"/ { t = $4 } /"check"/ { c = $4 } /"from"/ { f = $4 } /"to"/ { o = $4 }
		/"reason"/ { r = $4 } /"detail"/ { d = $4 }
		/^    }/ { if (d != "") r = r ": " d; printf "   event: %s %s %s -> %s (%s)\n", substr(t, 12, 12), c, f, o, r; d = "" }' | tail -n "$1"
}

sleep 2 # a few check intervals, so every check has reported
echo "== stop backend web1 (198.18.1.1)"
kill $B1; wait $B1 2>/dev/null || true; B1=
sleep 4 # interval 1s x unhealthy_threshold 3, plus a push
ask 198.18.0.2 www.example.test A
events 1

echo "== restart backend web1"
nsenter --net=/var/run/netns/$P-b1 -- $BIN testenv backend --listen 198.18.1.1:80 &
B1=$!
sleep 3 # interval 1s x healthy_threshold 2, plus a push
ask 198.18.0.2 www.example.test A
events 1

echo "== PUT /api/v1/checks/web1/admin down"
$EDGE curl -sf -X PUT -H "Authorization: Bearer $(cat $TOKEN)" --data down $API/api/v1/checks/web1/admin
sleep 0.5
ask 198.18.0.2 www.example.test A
ask fd53::2 www.example.test AAAA
echo "== steadydns status"
$EDGE $BIN status --config $CFG | sed 's/^/   /'

echo "== PUT /api/v1/checks/web1/admin auto"
$EDGE curl -sf -X PUT -H "Authorization: Bearer $(cat $TOKEN)" --data auto $API/api/v1/checks/web1/admin
sleep 0.5
ask 198.18.0.2 www.example.test A
