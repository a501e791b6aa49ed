package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/steadydns/steadydns/controlplane/config"
	"github.com/steadydns/steadydns/controlplane/daemon"
	"github.com/steadydns/steadydns/controlplane/dnssec"
)

// dnssecCmd is `steadydns dnssec keygen|ds|status`: the keys of the zones
// signed online, read from and written to the key directories the config
// names, on the host that signs.
func dnssecCmd(args []string, out io.Writer) error {
	if len(args) == 0 {
		return errors.New("want keygen, ds or status")
	}
	fs := flag.NewFlagSet("dnssec "+args[0], flag.ContinueOnError)
	path := fs.String("config", "", "config file")
	zoneName := fs.String("zone", "", "the zone (status: every signed zone by default)")
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
	case "status":
		return dnssecStatus(cfg, origin, out)
	}
	return fmt.Errorf("unknown command %q, want keygen, ds or status", args[0])
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
		fmt.Fprintf(out, "%s  keys %s\n", zc.Origin, zc.DNSSEC.Keys)
		if len(keys) == 0 {
			fmt.Fprintln(out, "  no keys: serve or steadydns dnssec keygen creates them")
			continue
		}
		fmt.Fprintf(out, "  %-5s %-5s %-16s %-9s %-20s %-20s\n", "ROLE", "TAG", "ALGORITHM", "STATE", "PUBLISHED", "ACTIVE")
		for _, k := range keys {
			state := "active"
			switch {
			case !k.Published(now) && !k.Active(now):
				state = "created"
			case !k.Active(now):
				state = "published"
			}
			fmt.Fprintf(out, "  %-5s %-5d %-16s %-9s %-20s %-20s\n", dnssec.Role(k, keys), k.Tag(),
				strings.ToLower(dns.AlgorithmToString[k.DNSKEY.Algorithm]), state,
				k.Publish.UTC().Format(time.DateTime), k.Activate.UTC().Format(time.DateTime))
		}
		fmt.Fprintf(out, "  signatures: valid %s ± %s from an hour back, made again after %s\n",
			dnssec.Validity, dnssec.Jitter, dnssec.Refresh)
	}
	if !found {
		if origin != "" {
			return fmt.Errorf("no signed zone %s in the config", origin)
		}
		return errors.New("no zone of the config has dnssec")
	}
	return nil
}
