// Package testenv builds throwaway hosts for steadydns tests out of network
// namespaces, veth pairs and a bridge, so tests send real packets through the
// kernel without touching the machine's own network.
//
// The single-edge topology (New, Start):
//
//	client ns            edge ns                       backend i ns
//	<p>c0 ──veth── <p>e0        <p>br ──port <p>p<i>──veth── <p>b<i>
//	198.18.0.1/24  198.18.0.2/24 198.18.1.254/24               198.18.1.<i>/24
//	fd53::1/64     fd53::2/64    fd53:1::fe/64                 fd53:1::<i>/64
//
// The fleet (NewFleet, StartFleet): a client, edges, aggregators, probers in
// regions and backends, each with one veth to a bridge in a switch
// namespace, all on 198.18.64.0/20 and fd53:64::/64, with the role in the
// third octet (see fleetplan.go). Partition cuts a pair of hosts off from
// each other, silently, as a real partition would.
//
// Addresses come only from 198.18.0.0/15 (reserved for benchmarking, RFC 2544)
// and fd53::/16 (unique local), so nothing can collide with or leak to a real
// network. All links live inside the namespaces, never in the root namespace,
// so a crashed test leaves at most named namespaces behind, which Down removes.
//
// Every host answers at once: DAD is off, IPv6 addresses survive a link going
// down, MAC addresses are fixed and neighbour entries are permanent, so the
// first packet of a test never waits on ARP or NDP.
package testenv
