package stats

import (
	"bufio"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strings"

	"golang.org/x/sys/unix"
)

// Machine describes where a run ran.
type Machine struct {
	Kernel, CPU, Memory, Load, Go, Revision string
	CPUs                                    int
	Tools                                   map[string]string // program: version line
}

func ThisMachine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), Go: runtime.Version(), Tools: map[string]string{}}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		m.Kernel = unix.ByteSliceToString(u.Sysname[:]) + " " + unix.ByteSliceToString(u.Release[:]) + " " + unix.ByteSliceToString(u.Machine[:])
	}
	m.CPU = firstField("/proc/cpuinfo", "model name")
	m.Memory = firstField("/proc/meminfo", "MemTotal")
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		m.Load = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch {
			case s.Key == "vcs.revision":
				m.Revision = s.Value + m.Revision
			case s.Key == "vcs.modified" && s.Value == "true":
				m.Revision += " (with uncommitted changes)"
			}
		}
	}
	if m.Revision == "" {
		m.Revision = gitRevision()
	}
	for prog, args := range map[string][]string{
		"kxdpgun": {"-V"}, "dnsperf": {"-h"}, "knotd": {"-V"}, "nsd": {"-v"}, "gdnsd": {"-h"},
	} {
		m.Tools[prog] = versionLine(prog, args...)
	}
	return m
}

// versionLine is the first line of a program's output that names a
// version, or "" when it is not installed.
func versionLine(prog string, args ...string) string {
	out, _ := exec.Command(prog, args...).CombinedOutput()
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(strings.ToLower(l), "version") {
			return strings.TrimSpace(l)
		}
	}
	return ""
}

// firstField is the value of the first "key: value" line starting with key.
func firstField(path, key string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// gitRevision is the work tree's commit when the binary carries none, as
// `go build` of a tree it cannot stamp leaves it.
func gitRevision() string {
	rev, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	v := strings.TrimSpace(string(rev))
	if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
		v += " (with uncommitted changes)"
	}
	return v
}
