// Command steadydns is the authoritative DNS server that answers only with
// healthy endpoints. One binary plays every role on an edge host; the
// benchmark is the separate steadydns-bench, so this one stays small.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/steadydns/steadydns/controlplane/daemon"
)

const usage = `usage: steadydns <command> [flags]

commands:
  serve   --config FILE [--role prober,aggregator,edge] [--id NAME] [--region NAME] [--nkey-seed FILE]
          [--reset-state] [--log-format text|json] [--log-level debug|info|warn|error]
                            run the roles given (all by default): XDP, fallback, health checks, the table, API;
                            a state file that cannot be used is moved aside and refused unless --reset-state
  config push --config FILE --nkey-seed FILE [--id NAME] [--replicas N]
                            validate the fleet sections and store them, with the zone files, in the NATS config bucket
  keygen  --id NAME --role ROLES [--cell C] [--region R] [--out FILE]
                            write a host's NKey seed (mode 0600) and print its line for cluster.nats.hosts
  dnssec  keygen|ds --config FILE --zone NAME | status --config FILE [--zone NAME]
          rollover --config FILE --zone NAME [--key zsk|ksk|csk] [--complete] [--at TIME]
                            make a signed zone's keys, print its DS records (SHA-256), roll a key over, or say where each key stands
  state   --config FILE --nkey-seed FILE [--id NAME] admin|external CHECK up|down|auto
          | shift REGION --duration D --reason TEXT | unshift REGION
                            send an admin or external state change, or a traffic shift, to every aggregator with an admin key
  check   --config FILE [--skip-host]   validate a config and its zones, and its interfaces on this host
                            unless --skip-host; exit 1 with file:line: key: on error
  status  [--api ADDR | --config FILE]   print records and checks with state and reason
  detach  --config FILE     remove XDP from the configured interfaces and delete the pinned maps
  testenv up|down [--prefix P] [--backends N]   create or remove the network-namespace test hosts
  testenv up --fleet [--regions N] [--probers-per-region N] [--edges N] [--aggregators N]   the fleet: edges, aggregators, probers, backends on one switch
  testenv partition|heal [--prefix P] [A B]   cut or restore traffic between fleet hosts (client, e1, a1, r1, p1a, b1)
  testenv backend --listen ADDR   serve GET /healthz for a test backend
  version                   print the version
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	var err error
	args := os.Args[2:]
	switch os.Args[1] {
	case "serve":
		err = serve(context.Background(), args)
	case "check":
		err = check(args)
	case "config":
		err = configCmd(args)
	case "keygen":
		err = keygen(args)
	case "dnssec":
		err = dnssecCmd(args, os.Stdout)
	case "state":
		err = stateCmd(args)
	case "status":
		err = status(args)
	case "detach":
		err = detach(args)
	case "testenv":
		err = testenvCmd(args)
	case "version":
		fmt.Println(daemon.Version())
	case "help", "-h", "--help":
		fmt.Print(usage)
	default:
		fmt.Fprintf(os.Stderr, "steadydns: unknown command %q\n\n%s", os.Args[1], usage)
		os.Exit(2)
	}
	// -h asks for the usage, which the flag package has printed: that
	// is a success.
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "steadydns %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}
