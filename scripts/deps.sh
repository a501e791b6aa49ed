#!/usr/bin/env bash
# Installs from Debian what the tests and the demo use and a fresh machine
# lacks, and says what it installs. Go modules come through the module proxy.
set -euo pipefail

if [ "$(id -u)" != 0 ]; then
	echo "deps: not root: steadydns loads XDP programs and builds network namespaces; run as root" >&2
	exit 1
fi

need=()
command -v dig >/dev/null || need+=(bind9-dnsutils)
command -v kdig >/dev/null || need+=(knot-dnsutils)
command -v nsenter >/dev/null || need+=(util-linux)
command -v ip >/dev/null || need+=(iproute2)
command -v curl >/dev/null || need+=(curl)
command -v jq >/dev/null || need+=(jq)
command -v bpftool >/dev/null || need+=(bpftool)
command -v dnsperf >/dev/null || need+=(dnsperf)
command -v ethtool >/dev/null || need+=(ethtool)
# The DNSSEC tests validate through a real Unbound.
command -v unbound >/dev/null || need+=(unbound)
# The metric check's tests query a real Prometheus.
command -v prometheus >/dev/null || need+=(prometheus)
# The status page's test loads it in a real browser.
command -v chromium >/dev/null || need+=(chromium)
# The dnstap test reads the stream with readers of its own.
command -v fstrm_capture >/dev/null || need+=(fstrm-bin)
command -v dnstap-ldns >/dev/null || need+=(dnstap-ldns)

if [ ${#need[@]} -gt 0 ]; then
	echo "deps: installing ${need[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q >/dev/null
	apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null
fi

# bpffs is not mounted at boot on every host.
if ! mountpoint -q /sys/fs/bpf; then
	echo "deps: mounting bpffs at /sys/fs/bpf"
	mount -t bpf bpf /sys/fs/bpf
fi
