package main

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/steadydns/steadydns/controlplane/healthtable"
	"github.com/steadydns/steadydns/controlplane/transport"
	"github.com/steadydns/steadydns/prober"
)

// hostileEnv, when set, makes the test binary a hostile fleet host: a
// process of its own that holds a real key of the fleet and uses it beyond
// its host's role, as a thief of that key would. The fleet test starts it
// in a host of the fleet (hostileMode).
const hostileEnv = "STEADYDNS_TEST_HOSTILE"

func TestMain(m *testing.M) {
	if mode := os.Getenv(hostileEnv); mode != "" {
		if err := hostile(mode, os.Args[1:]); err != nil {
			fmt.Fprintf(os.Stderr, "hostile %s: %v\n", mode, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// invented is how many prober ids a hostile prober makes up: enough that,
// all voting down, they would outvote six real checkers under an 18%
// quorum if their frames were counted.
const invented = 30

// hostile runs one hostile host until --for has passed, sending every
// --push period:
//
//	invent      frames under invented prober ids and --other's, with its own prober key
//	forge       frames on its own subject whose payload names invented ids
//	cell        frames under its own id in a cell that is not its own
//	state       an admin "down" for --check, with an edge's key
//	table       tables that say every check is down, with an edge's key,
//	            and a subscription to every cell's frames
//	route       no key: a NATS server that routes to --routes without credentials
func hostile(mode string, args []string) error {
	fs := flag.NewFlagSet("hostile", flag.ContinueOnError)
	urls := fs.String("urls", "", "NATS servers, comma-separated")
	routes := fs.String("routes", "", "route addresses to knock on, comma-separated")
	id := fs.String("id", "", "the id the key belongs to")
	cell := fs.String("cell", "default", "the cell to publish in")
	seed := fs.String("seed", "", "the key's seed file")
	hash := fs.Uint64("hash", 0, "the fleet's config hash")
	entries := fs.Int("entries", 0, "entries per result frame")
	table := fs.Int("table", 0, "health table entries")
	check := fs.String("check", "web1", "the check a state change names")
	other := fs.String("other", "p1b", "a real prober whose id invent also publishes under")
	push := fs.Duration("push", 400*time.Millisecond, "how often to send")
	dur := fs.Duration("for", 3*time.Second, "how long to keep at it")
	if err := fs.Parse(args); err != nil {
		return err
	}
	deadline := time.Now().Add(*dur)
	if mode == "route" {
		var rs []*url.URL
		for _, r := range strings.Split(*routes, ",") {
			u, err := url.Parse("nats-route://" + r)
			if err != nil {
				return err
			}
			rs = append(rs, u)
		}
		s, err := server.NewServer(&server.Options{ServerName: "rogue", Host: "127.0.0.1", Port: server.RANDOM_PORT, NoSigs: true,
			Cluster: server.ClusterOpts{Name: "steadydns", Host: "0.0.0.0", Port: server.RANDOM_PORT}, Routes: rs})
		if err != nil {
			return err
		}
		s.Start()
		time.Sleep(time.Until(deadline))
		s.Shutdown()
		return nil
	}
	connect := func(as, cell string) (*transport.Conn, error) {
		c, err := transport.Connect(transport.Options{URLs: strings.Split(*urls, ","), ID: as, Cell: cell, NKeySeedFile: *seed})
		if err != nil {
			return nil, err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return c, c.WaitConnected(ctx)
	}
	frame := func(name string) []byte {
		f := prober.Frame{Version: uint64(time.Now().UnixNano() / int64(*push)), ConfigHash: *hash, Prober: name, Region: "r1",
			Entries: make([]prober.Entry, *entries)}
		for i := range f.Entries {
			f.Entries[i] = prober.Entry{Index: uint32(i), Seq: uint64(time.Now().UnixMilli()), Reason: prober.Reason(1)}
		}
		b, _ := prober.Encode(nil, &f)
		return b
	}
	slot := func() uint64 { return uint64(time.Now().UnixNano() / int64(*push)) }
	var send []func() error
	switch mode {
	case "invent":
		// Made-up ids, and a real prober's: another host's vote.
		names := []string{*other}
		for i := range invented {
			names = append(names, fmt.Sprintf("x%d", i))
		}
		for _, name := range names {
			c, err := connect(name, *cell)
			if err != nil {
				return err
			}
			defer c.Close()
			send = append(send, func() error { return c.Publish(transport.KindFrame, slot(), *hash, frame(name)) })
		}
	case "forge":
		c, err := connect(*id, *cell)
		if err != nil {
			return err
		}
		defer c.Close()
		for i := range invented {
			name := fmt.Sprintf("x%d", i)
			send = append(send, func() error { return c.Publish(transport.KindFrame, slot(), *hash, frame(name)) })
		}
	case "cell":
		c, err := connect(*id, "mars")
		if err != nil {
			return err
		}
		defer c.Close()
		send = append(send, func() error { return c.Publish(transport.KindFrame, slot(), *hash, frame(*id)) })
	case "state":
		c, err := connect(*id, *cell)
		if err != nil {
			return err
		}
		defer c.Close()
		// The state message: admin (1), down (2), the check's id.
		b := make([]byte, 96)
		b[0], b[1] = 1, 2
		binary.LittleEndian.PutUint16(b[2:], uint16(len(*check)))
		copy(b[8:], *check)
		send = append(send, func() error { return c.Publish(transport.KindState, slot(), *hash, b) })
	case "table":
		c, err := connect(*id, *cell)
		if err != nil {
			return err
		}
		defer c.Close()
		if _, err := c.Subscribe(transport.KindFrame, *cell, transport.Filter{}, func(transport.Message) {}); err != nil {
			return err
		}
		down := make([]byte, healthtable.Bytes(*table))
		send = append(send, func() error { return c.Publish(transport.KindTable, slot(), *hash, down) })
	default:
		return fmt.Errorf("unknown mode %q", mode)
	}
	for time.Now().Before(deadline) {
		for _, fn := range send {
			if err := fn(); err != nil {
				return err
			}
		}
		time.Sleep(*push)
	}
	return nil
}
