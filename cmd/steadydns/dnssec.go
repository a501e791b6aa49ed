package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/steadydns/steadydns/controlplane/config"
	"github.com/steadydns/steadydns/controlplane/daemon"
	"github.com/steadydns/steadydns/controlplane/dnssec"
)

// dnssecCmd is `steadydns dnssec keygen|ds|rollover|status`: the keys of
// the zones signed online, read from and written to the key directories
// the config names, on the host that signs.
func dnssecCmd(args []string, out io.Writer) error {
	if len(args) == 0 {
		return errors.New("want keygen, ds, rollover or status")
	}
	fs := flag.NewFlagSet("dnssec "+args[0], flag.ContinueOnError)
	path := fs.String("config", "", "config file")
	zoneName := fs.String("zone", "", "the zone (status: every signed zone by default)")
	var roll rolloverFlags
	if args[0] == "rollover" {
		fs.StringVar(&roll.key, "key", "", "zsk, ksk or csk (default: the ZSK of a split zone, else the CSK)")
		fs.StringVar(&roll.at, "at", "", "when the rollover starts or completes, as 2006-01-02T15:04:05Z or 20060102150405 (default now)")
		fs.BoolVar(&roll.complete, "complete", false, "the parent serves the new KSK's DS and not the old: retire the old")
	}
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *path == "" {
		return errors.New("--config is required")
	}
	cfg, err := config.Load(*path)
	if err != nil {
		return err
	}
	origin := ""
	if *zoneName != "" {
		origin = dns.CanonicalName(*zoneName)
	}
	switch args[0] {
	case "keygen":
		if origin == "" {
			return errors.New("--zone is required")
		}
		keys, err := daemon.MakeKeys(cfg, origin)
		if err != nil {
			return err
		}
		for _, k := range keys {
			fmt.Fprintf(out, "%s %d %s\n", dnssec.Role(k, keys), k.Tag(), k.Path)
		}
		return nil
	case "ds":
		if origin == "" {
			return errors.New("--zone is required")
		}
		keys, err := zoneKeys(cfg, origin)
		if err != nil {
			return err
		}
		for _, ds := range dnssec.DS(keys) {
			fmt.Fprintln(out, ds.String())
		}
		return nil
	case "rollover":
		if origin == "" {
			return errors.New("--zone is required")
		}
		return rollover(cfg, origin, roll, out)
	case "status":
		return dnssecStatus(cfg, origin, out)
	}
	return fmt.Errorf("unknown command %q, want keygen, ds, rollover or status", args[0])
}

type rolloverFlags struct {
	key, at  string
	complete bool
}

// rollover starts a rollover or, with --complete, ends a KSK's. The new
// timing is in the key files: serve follows it once reloaded.
func rollover(cfg *config.Config, origin string, f rolloverFlags, out io.Writer) error {
	keys, err := zoneKeys(cfg, origin)
	if err != nil {
		return err
	}
	at := time.Now()
	if f.at != "" {
		if at, err = time.Parse(time.RFC3339, f.at); err != nil {
			if at, err = time.Parse("20060102150405", f.at); err != nil {
				return fmt.Errorf("--at %q: want 2006-01-02T15:04:05Z or 20060102150405", f.at)
			}
		}
	}
	zc := cfg.Zones[slices.IndexFunc(cfg.Zones, func(z config.Zone) bool { return z.Origin == origin })]
	sch := daemon.Schedule(zc.DNSSEC)
	if f.complete {
		if f.key != "" {
			return errors.New("--complete ends the KSK or CSK rollover under way: give no --key")
		}
		if _, err := dnssec.Complete(keys, sch, at); err != nil {
			return fmt.Errorf("completing the rollover of %s: %w", origin, err)
		}
	} else {
		roles := map[string]bool{"": true}
		for _, k := range keys {
			roles[strings.ToLower(dnssec.Role(k, keys))] = true
		}
		if !roles[f.key] {
			return fmt.Errorf("--key %s: zone %s has no %s", f.key, origin, strings.ToUpper(f.key))
		}
		ksk := f.key == "ksk" || f.key == "csk" || f.key == "" && !roles["zsk"]
		k, err := dnssec.Rollover(zc.DNSSEC.Keys, origin, keys, ksk, sch, at)
		if err != nil {
			return fmt.Errorf("rolling over a key of %s: %w", origin, err)
		}
		keys = append(keys, k)
	}
	zoneStatus(origin, zc.DNSSEC.Keys, keys, sch, at, out)
	fmt.Fprintln(out, "reload serve (SIGHUP, or POST /api/v1/reload) to follow the new timing")
	return nil
}

// zoneStatus prints each key of a zone: where it stands at now, and its
// next event.
func zoneStatus(origin, dir string, keys []*dnssec.Key, sch dnssec.Schedule, now time.Time, out io.Writer) {
	fmt.Fprintf(out, "%s  keys %s\n", origin, dir)
	fmt.Fprintf(out, "  %-4s %-5s %-16s %-15s %s\n", "ROLE", "TAG", "ALGORITHM", "STATE", "NEXT")
	for _, s := range dnssec.States(keys, sch, now) {
		next := s.Next
		if !s.At.IsZero() {
			next += " " + s.At.UTC().Format(time.DateTime)
		}
		fmt.Fprintf(out, "  %-4s %-5d %-16s %-15s %s\n", s.Role, s.Key.Tag(),
			strings.ToLower(dns.AlgorithmToString[s.Key.DNSKEY.Algorithm]), s.State, strings.TrimSpace(next))
	}
	fmt.Fprintf(out, "  signatures: valid %s ± %s from an hour back, made again after %s\n",
		dnssec.Validity, dnssec.Jitter, dnssec.Refresh)
	fmt.Fprintf(out, "  rollover waits: new key known %s after publish, old signatures gone %s after inactive, old DS gone %s after --complete\n",
		sch.Known(), sch.Retire(), sch.DSGone())
}

// zoneKeys loads the keys of the signed zone origin.
func zoneKeys(cfg *config.Config, origin string) ([]*dnssec.Key, error) {
	for _, zc := range cfg.Zones {
		if zc.Origin != origin {
			continue
		}
		if zc.DNSSEC == nil {
			return nil, fmt.Errorf("zone %s is not signed: it has no dnssec", origin)
		}
		keys, err := dnssec.Load(zc.DNSSEC.Keys, origin)
		if err == nil && len(keys) == 0 {
			err = fmt.Errorf("no keys for %s in %s: run steadydns dnssec keygen", origin, zc.DNSSEC.Keys)
		}
		return keys, err
	}
	return nil, fmt.Errorf("no zone %s in the config", origin)
}

// dnssecStatus prints where each key stands, as the signer sees it now.
func dnssecStatus(cfg *config.Config, origin string, out io.Writer) error {
	now := time.Now()
	found := false
	for _, zc := range cfg.Zones {
		if zc.DNSSEC == nil || origin != "" && zc.Origin != origin {
			continue
		}
		found = true
		keys, err := dnssec.Load(zc.DNSSEC.Keys, zc.Origin)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		if len(keys) == 0 {
			fmt.Fprintf(out, "%s  keys %s\n", zc.Origin, zc.DNSSEC.Keys)
			fmt.Fprintln(out, "  no keys: serve or steadydns dnssec keygen creates them")
			continue
		}
		zoneStatus(zc.Origin, zc.DNSSEC.Keys, keys, daemon.Schedule(zc.DNSSEC), now, out)
	}
	if !found {
		if origin != "" {
			return fmt.Errorf("no signed zone %s in the config", origin)
		}
		return errors.New("no zone of the config has dnssec")
	}
	return nil
}
