package daemon

import (
	"fmt"
	"os"

	"github.com/steadydns/steadydns/controlplane/config"
	"github.com/steadydns/steadydns/loader"
)

// Detach removes XDP from the configured interfaces and deletes the pinned
// maps and links: what a stopped server leaves behind on purpose so that a
// restart does not interrupt answers. Maps of other layouts go too.
func Detach(path string) error {
	cfg, err := config.Load(path)
	if err != nil {
		return err
	}
	objs, err := loader.Load(loadOptions(cfg, 0))
	if err != nil {
		return err
	}
	defer objs.Close()
	for _, ifname := range cfg.Server.Interfaces {
		if err := objs.Detach(ifname); err != nil {
			return err
		}
	}
	if err := objs.Unpin(); err != nil {
		return err
	}
	if err := os.RemoveAll(objs.Dir); err != nil {
		return fmt.Errorf("removing %s: %w", objs.Dir, err)
	}
	return objs.RemoveStaleLayouts()
}
