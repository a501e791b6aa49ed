package dnsbench

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// quiet is the share of the CPUs that other processes may take while a
// figure is measured; a run they disturbed more is run again.
const quiet = 0.10

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat:
// 100 on every Linux architecture Go supports.
const clockTicks = 100

// meter measures the CPU time of the processes outside the harness: user
// processes that are neither this one nor its descendants (the servers,
// kxdpgun, dnsperf), and the NAPI threads of other devices. Other kernel
// threads are left out, since softirq work carries the benchmark's own
// packets too. Another benchmark's veth has its NAPI thread pinned to a
// CPU like this one's: on the server's CPU it takes a share of it that no
// user process shows, and it halved NSD's answers in runs that counted
// only user processes.
type meter struct {
	ours  string // the comm prefix of the server veth's NAPI threads
	ticks uint64
	start time.Time
}

func (r *rig) startMeter() (meter, error) {
	m := meter{ours: r.napiPrefix(), start: time.Now()}
	var err error
	m.ticks, err = othersTicks(m.ours)
	return m, err
}

// share is the part of all CPUs' time the other processes used since start.
func (m meter) share() (float64, error) {
	t, err := othersTicks(m.ours)
	if err != nil {
		return 0, err
	}
	avail := time.Since(m.start).Seconds() * clockTicks * float64(runtime.NumCPU())
	if avail <= 0 || t < m.ticks {
		return 0, nil
	}
	return float64(t-m.ticks) / avail, nil
}

type procStat struct {
	ppid    int
	ticks   uint64
	kthread bool
	comm    string
}

// othersTicks sums utime and stime of the other user processes and of the
// NAPI threads whose names do not start with ours.
func othersTicks(ours string) (uint64, error) {
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return 0, fmt.Errorf("listing processes: %w", err)
	}
	procs := map[int]procStat{}
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		if st, ok := readStat(pid); ok {
			procs[pid] = st
		}
	}
	self := os.Getpid()
	var sum uint64
	for pid, st := range procs {
		napi := strings.HasPrefix(st.comm, "napi/")
		if st.kthread && (!napi || strings.HasPrefix(st.comm, ours)) || descends(procs, pid, self) {
			continue
		}
		sum += st.ticks
	}
	return sum, nil
}

// descends reports whether pid is ancestor itself or one of its descendants.
func descends(procs map[int]procStat, pid, ancestor int) bool {
	for range 64 { // deeper trees are not ours
		if pid == ancestor {
			return true
		}
		st, ok := procs[pid]
		if !ok || pid <= 1 {
			return false
		}
		pid = st.ppid
	}
	return false
}

// readStat parses /proc/PID/stat; a process that exited meanwhile is
// skipped. The command name may hold spaces, so fields count from its ')'.
func readStat(pid int) (procStat, bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return procStat{}, false
	}
	i := bytes.LastIndexByte(b, ')')
	j := bytes.IndexByte(b, '(')
	if i < 0 || j < 0 || j > i {
		return procStat{}, false
	}
	f := bytes.Fields(b[i+1:])
	// f[0] is field 3 (state): ppid is field 4, flags 9, utime 14, stime 15.
	if len(f) < 13 {
		return procStat{}, false
	}
	ppid, _ := strconv.Atoi(string(f[1]))
	flags, _ := strconv.ParseUint(string(f[6]), 10, 64)
	utime, _ := strconv.ParseUint(string(f[11]), 10, 64)
	stime, _ := strconv.ParseUint(string(f[12]), 10, 64)
	const pfKthread = 0x00200000
	return procStat{ppid: ppid, ticks: utime + stime, kthread: flags&pfKthread != 0, comm: string(b[j+1 : i])}, true
}

// settle waits up to Options.Settle for the other processes to go quiet.
// With no time to wait it does not look.
func (r *rig) settle() error {
	if r.o.Settle == 0 {
		return nil
	}
	deadline := time.Now().Add(r.o.Settle)
	for {
		m, err := r.startMeter()
		if err != nil {
			return err
		}
		time.Sleep(time.Second)
		b, err := m.share()
		if err != nil || b <= quiet || time.Now().After(deadline) {
			return err
		}
		fmt.Fprintf(r.o.Log, "bench: other processes keep %.0f%% of the CPUs busy; waiting\n", 100*b)
	}
}

// quietly runs one measurement and returns the share of the CPUs other
// processes took meanwhile. When they took more than quiet, it runs it
// again, twice at most, unless the options leave no time to settle.
func (r *rig) quietly(run func() error) (float64, error) {
	for try := 0; ; try++ {
		if err := r.settle(); err != nil {
			return 0, err
		}
		m, err := r.startMeter()
		if err != nil {
			return 0, err
		}
		if err := run(); err != nil {
			return 0, err
		}
		share, err := m.share()
		if err != nil || share <= quiet || try == 2 || r.o.Settle == 0 {
			return share, err
		}
		fmt.Fprintf(r.o.Log, "bench: other processes took %.0f%% of the CPUs during a run; running it again\n", 100*share)
	}
}
