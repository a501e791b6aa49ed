// Package dnsbench measures steadydns against a bare XDP reflector (the
// ceiling) and against Knot DNS, NSD and gdnsd, with the same zone and the
// same load, on a client and a server host built in network namespaces.
//
// The load generator (kxdpgun) runs on one CPU; the server, and the NAPI
// thread of the server's veth, on another. Native XDP on a veth otherwise
// runs on the sending CPU, and the generator and the server would share it.
//
// Besides answers per second it reports latency at a moderate rate
// (dnsperf), the in-kernel cost per packet of every XDP program under load
// (the kernel's BPF run-time statistics) and, for the constant-work
// property, the cost per query with 0%, 50% and 100% of candidates down,
// both through BPF_PROG_RUN and under load.
package dnsbench
