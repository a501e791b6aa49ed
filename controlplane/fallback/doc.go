// Package fallback is the userspace DNS server behind the XDP program. It
// answers every query the kernel passes: other types, names the kernel
// does not hold, referrals, DNSSEC, malformed and oversized messages.
// For A and AAAA sets it builds the same bytes as XDP: the answer owner is
// the question's own spelling, compressed to a pointer at offset 12, the
// header keeps only ID, opcode, RD and CD, and the OPT is version 0, UDP
// size 1232, DO copied, with no options.
//
// miekg/dns parses and packs; its server is not used, since it answers
// some queries itself, copying the request's header. Every reply is built
// here instead, for both transports alike (serveMsg):
//
//   - A message shorter than a header, or a response, is dropped without
//     a reply, so the handler sees bad opcodes and counts.
//   - A message that does not parse is replaced by its bare header with
//     every count zero. The handler answers that, like any query without
//     a question, with FORMERR and the header alone (NOTIMP for an opcode
//     other than QUERY, whose body format it does not know).
//     A message broken only by the content of an option steadydns does not
//     implement is parsed again without the options it does not
//     implement (dropOptions), as XDP ignores them.
//
// UDP is served here rather than by miekg/dns, which reads and writes one
// datagram per system call and starts a goroutine per query: each listen
// address has a UDP socket per P, bound with SO_REUSEPORT so the kernel
// spreads queries across them and a second server can bind beside a
// running one (an upgrade without a gap); each socket's loop reads up to
// 64 datagrams with one recvmmsg, answers them in turn with the same
// handler, and sends the replies with one sendmmsg, both raw system calls
// that keep the loop on its thread. TCP listens with
// SO_REUSEPORT too, and is served here as well, to bound what clients
// hold (TCPLimits): connections in all and per client prefix, the one
// answered the least recently closed to make room, an idle timeout, a
// lifetime, and queries per connection if set; each read's whole queries
// are answered in turn, and their replies go out together.
package fallback
