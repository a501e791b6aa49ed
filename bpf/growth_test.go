package bpf_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/miekg/dns"

	"github.com/steadydns/steadydns/internal/packet"
)

// testRunRoom is the most a BPF_PROG_RUN frame may hold: a 4 KiB page less
// XDP_PACKET_HEADROOM (256) and the aligned skb_shared_info (320).
const testRunRoom = 4096 - 256 - 320

// TestGrowthSplit holds the reply of eight AAAA answers, a growth past the
// 216 bytes the head may give, to the same bytes whether the tail takes it
// all or, when the tail has less room, only the bytes past 216 with the
// head taking the rest. Ethernet padding moves the frame's end towards
// the page's, through both, and past where neither fits: there the query
// passes to the stack as it came.
func TestGrowthSplit(t *testing.T) {
	o := load(t)
	var addrs []string
	var cands []cand
	for i := range 8 {
		addrs = append(addrs, fmt.Sprintf("fd53:8::%d", i+1))
		cands = append(cands, cand{addr: addrs[i]})
	}
	put(t, o, "eight.example.test.", dns.TypeAAAA, rrset(300, 8, cands...))
	q := query("eight.example.test.", dns.TypeAAAA, withOpt(1232, false))
	want := expected(t, q, 300, addrs...)
	grown := len(want) - len(q)
	if grown <= 216 {
		t.Fatalf("a growth of %d bytes: the head alone gives it", grown)
	}
	f := frame(false, q, packet.Full)
	base := len(packet.Build(f))
	paths := map[string]int{}
	// Past testRunRoom the frame would take a fragment: not this test's.
	for pad := testRunRoom - grown - base - 8; pad <= testRunRoom-base; pad++ {
		in := append(packet.Build(f), make([]byte, pad)...)
		ret, out := run(t, o, in)
		what := fmt.Sprintf("%d bytes of padding: ", pad)
		switch end := len(in) + grown; {
		case end <= testRunRoom:
			paths["tail"]++
		case end-216 <= testRunRoom:
			paths["split"]++
		default:
			paths["none"]++
			if ret != 2 /* XDP_PASS */ || !bytes.Equal(out[:len(in)], in) {
				t.Errorf("%saction %d, want the query passed as it came", what, ret)
			}
			continue
		}
		if checkAnswer(t, what, f, in, want, ret, out) != nil && !bytes.Equal(out[len(in)+grown-pad:len(in)+grown], in[len(in)-pad:]) {
			t.Errorf("%sthe padding not kept", what)
		}
	}
	if paths["tail"] == 0 || paths["split"] == 0 || paths["none"] == 0 {
		t.Errorf("frames by path %v: want each", paths)
	}
}
