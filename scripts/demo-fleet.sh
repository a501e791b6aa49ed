#!/usr/bin/env bash
# The fleet demo: examples/fleet run as docs/fleet.md walks through it, every
# role a process of its own in a test host of its own (two aggregators with
# embedded NATS servers, two edges, six probers in three regions, two HTTP
# backends). It asks both edges from the client host, cuts one region off
# from a backend (the answers stay, the votes show why), then every region
# (the backend leaves the answers within interval x threshold + the probe's
# timeout + two push periods), heals, and kills the aggregator the edges follow (they switch to
# the other, the answers stay). Each step checks what it shows: the script
# exits non-zero at the first step whose expectation fails, and tears
# everything down however it exits.
#
# Environment: BIN, the steadydns binary (bin/steadydns); P, the name prefix
# of the test hosts (sd).
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=$(realpath "${BIN:-bin/steadydns}")
P=${P:-sd}
EX=examples/fleet
W=$(mktemp -d /tmp/steadydns-demo-fleet.XXXXXX)
declare -A PID # name → pid of each process started

# The examples' timing (fleet.yaml): web1 and web2 are probed every 1s with
# a timeout of 0.5s and go down after 3 failures; every push period is
# 0.5s, shorter than the interval (docs/fleet.md says why).
# A dead backend refuses at once; a cut one fails by the timeout, so a cut
# leaves the answers within interval x threshold + timeout + two pushes.
INTERVAL=1 THRESHOLD=3 TIMEOUT=0.5 PUSH=0.5
BOUND=$(awk "BEGIN { print $INTERVAL * $THRESHOLD + $TIMEOUT + 2 * $PUSH }")
BOTH="198.18.67.1 198.18.67.2"

cleanup() {
	local rc=$?
	set +e
	for p in "${PID[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${PID[@]}"; do wait "$p" 2>/dev/null; done
	for e in 1 2; do on e$e "$BIN" detach --config "$W/e$e.yaml" >/dev/null 2>&1; done
	"$BIN" testenv down --prefix "$P"
	for e in 1 2; do rmdir "/sys/fs/bpf/steadydns-$P-e$e" 2>/dev/null; done
	if [ $rc = 0 ]; then
		rm -rf "$W"
		echo "== torn down"
	else
		echo "== FAILED; torn down (logs in $W)"
	fi
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

on() { # on HOST COMMAND...: run in a test host's network namespace
	local h=$1
	shift
	nsenter --net="/var/run/netns/$P-$h" -- "$@"
}

start() { # start NAME HOST COMMAND...: in the background, its stderr to W/NAME.log
	local name=$1 h=$2
	shift 2
	# A host writes each config revision under TMPDIR, by its id: keep
	# them apart from any other fleet on this machine.
	TMPDIR=$W nsenter --net="/var/run/netns/$P-$h" -- "$@" 2>"$W/$name.log" &
	PID[$name]=$!
}

fail() {
	echo "   FAIL: $*" >&2
	exit 1
}

now() { date +%s.%N; }
since() { echo "$(now) $1" | awk '{ printf "%.1f", $1 - $2 }'; }

answers() { # answers EDGE: the A records of www.example.test from that edge, sorted, on one line
	on c dig +short +norec +time=1 +tries=1 @198.18.65.$1 www.example.test A | sort | xargs || true
}

api() { # api HOST: /api/v1/checks of that host
	on "$1" curl -sf --max-time 2 http://127.0.0.1:9153/api/v1/checks || true
}

following() { api "e$1" | jq -r '.fleet.following // ""' 2>/dev/null; }

show() { # show: both edges' answers and which aggregator each follows
	for e in 1 2; do
		printf "   e%s answers %-26s (follows %s)\n" $e "$(answers $e)" "$(following $e)"
	done
}

# wait_answers WANT SECONDS: until both edges answer exactly WANT
wait_answers() {
	local want=$1 limit=$2 start
	start=$(now)
	while :; do
		[ "$(answers 1)" = "$want" ] && [ "$(answers 2)" = "$want" ] && return 0
		awk "BEGIN { exit !($(since "$start") > $limit) }" && return 1
		sleep 0.1
	done
}

# steady WANT SECONDS [UNTIL]: both edges answer exactly WANT, asked every
# half second for that long; with UNTIL, a command, the wait ends once it
# succeeds, and fails if it never does
steady() {
	local want=$1 n=$(($2 * 2)) until=${3:-} i got
	for ((i = 0; i < n; i++)); do
		for e in 1 2; do
			got=$(answers $e)
			[ "$got" = "$want" ] || fail "e$e answered \"$got\", want \"$want\""
		done
		[ -n "$until" ] && $until && return 0
		sleep 0.5
	done
	[ -z "$until" ] || fail "not within $2s: $until"
}

votes() { # votes CHECK: each prober's vote on CHECK, as aggregator a1 counts it
	api a1 | jq -r --arg c "$1" '.checks[] | select(.id == $c) | .votes[] |
		"   \(.checker) (\(.region)) says \(if .healthy then "healthy" else "unhealthy" end)\(if .counted then "" else ", not counted" end)"'
}

echo "== test hosts: client, two edges, two aggregators, three regions of two probers, two backends"
"$BIN" testenv down --prefix "$P"
"$BIN" testenv up --fleet --prefix "$P" --backends 2 | sed 's/^/   /'

echo "== a key per host (steadydns keygen); host files from $EX with every host's line added"
{
	echo "    hosts:"
	for h in a1 a2; do (cd "$W" && "$BIN" keygen --id $h --role aggregator 2>/dev/null); done
	for h in e1 e2; do (cd "$W" && "$BIN" keygen --id $h --role edge 2>/dev/null); done
	for r in 1 2 3; do
		for p in a b; do (cd "$W" && "$BIN" keygen --id p$r$p --role prober --region r$r 2>/dev/null); done
	done
	(cd "$W" && "$BIN" keygen --id ops --role admin 2>/dev/null)
} | sed '2,$s/^/      /' >"$W/hosts.yaml"
sed -n 2p "$W/hosts.yaml"
# The examples assume prefix sd; each run keeps its JetStream files apart.
for h in a1 a2 e1 e2 prober fleet; do
	sed -e "s#\[sde\([0-9]\)\]#[${P}e\1]#" -e "s#/sys/fs/bpf/steadydns-e#/sys/fs/bpf/steadydns-$P-e#" \
		-e "s#store_dir: /tmp/steadydns-fleet/nats#store_dir: $W/nats#" "$EX/$h.yaml" | cat - "$W/hosts.yaml" >"$W/$h.yaml"
done
cp "$EX/example.test.zone" "$W/"

echo "== backends b1 and b2: GET /healthz answers ok"
for b in 1 2; do
	start b$b b$b "$BIN" testenv backend --listen 198.18.67.$b:80
done

echo "== aggregators a1 and a2, each with an embedded NATS server; then config push from the client"
for a in 1 2; do
	start a$a a$a "$BIN" serve --config "$W/a$a.yaml" --nkey-seed "$W/a$a.nk"
done
# The two servers form their cluster and elect a JetStream leader first.
for try in $(seq 30); do
	if rev=$(on c "$BIN" config push --config "$W/fleet.yaml" --nkey-seed "$W/ops.nk" 2>"$W/push.log"); then
		break
	fi
	[ "$try" = 30 ] && fail "config push: $(cat "$W/push.log")"
	sleep 1
done
echo "   $rev"

echo "== edges e1 and e2, probers p1a ... p3b"
for e in 1 2; do
	start e$e e$e "$BIN" serve --config "$W/e$e.yaml" --nkey-seed "$W/e$e.nk"
done
for r in 1 2 3; do
	for p in a b; do
		start p$r$p p$r$p "$BIN" serve --config "$W/prober.yaml" --nkey-seed "$W/p$r$p.nk"
	done
done
start=$(now)
until [ -n "$(following 1 2>/dev/null)" ] && [ -n "$(following 2 2>/dev/null)" ]; do
	awk "BEGIN { exit !($(since "$start") > 30) }" && fail "the edges follow no aggregator after 30s"
	sleep 0.2
done
wait_answers "$BOTH" 10 || fail "the edges do not answer both backends"
# Every prober heard, so that the votes below are all six.
until [ "$(api a1 | jq '[.checks[]? | select(.id == "web1") | .votes[]? | select(.counted)] | length' 2>/dev/null)" = 6 ]; do
	awk "BEGIN { exit !($(since "$start") > 30) }" && fail "a1 does not hear six probers"
	sleep 0.2
done
echo "== www.example.test A from the client host, to each edge's XDP"
show

echo "== testenv partition r1 b1: region r1's probers lose backend b1"
"$BIN" testenv partition --prefix "$P" r1 b1
steady "$BOTH" 6
show
echo "   four of six probers still see b1, far above the 18% quorum: votes on web1 at a1"
votes web1
[ "$(api a1 | jq '[.checks[] | select(.id == "web1") | .votes[] | select(.healthy | not) | .region] | unique | join(",")')" = '"r1"' ] ||
	fail "want r1's probers, and only they, voting web1 unhealthy"

echo "== testenv partition r2 b1, r3 b1: every region loses b1"
"$BIN" testenv partition --prefix "$P" r2 b1
"$BIN" testenv partition --prefix "$P" r3 b1
cut=$(now)
wait_answers "198.18.67.2" "$BOUND" || fail "b1 still in the answers ${BOUND}s after every region lost it"
echo "   b1 left both edges' answers $(since "$cut")s after the last cut (bound: interval ${INTERVAL}s x threshold $THRESHOLD + timeout ${TIMEOUT}s + two push periods = ${BOUND}s)"
show

echo "== testenv heal"
"$BIN" testenv heal --prefix "$P"
wait_answers "$BOTH" 10 || fail "b1 not back in the answers 10s after the heal"
show

f1=$(following 1)
echo "== kill aggregator $f1, the one e1 follows"
kill "${PID[$f1]}"
killed=$(now)
switched() {
	for e in 1 2; do
		case $(following $e) in "$f1" | "") return 1 ;; esac
	done
}
# An edge switches after three push periods without a table.
steady "$BOTH" $(awk "BEGIN { print int(3 * $PUSH + 3.99) }") switched
echo "   both edges follow the other aggregator $(since "$killed")s after the kill; the answers never changed"
show
steady "$BOTH" 2
