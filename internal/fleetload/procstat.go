package fleetload

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's times: 100 on
// every Linux architecture Go supports (sysconf(_SC_CLK_TCK) needs cgo).
const clockTicks = 100

// treeUsage is the CPU time and resident memory of a process and its live
// descendants (dev may start plugin workers and local agents as children
// of its own).
type treeUsage struct {
	CPUSeconds float64
	RSSBytes   int64
	Procs      int
}

// usageOf reads /proc for pid and every process below it. A process's own
// times include its waited-for children's (cutime, cstime), so children
// that came and went are counted too.
func usageOf(pid int) (treeUsage, error) {
	all, err := procTable()
	if err != nil {
		return treeUsage{}, err
	}
	if _, ok := all[pid]; !ok {
		return treeUsage{}, fmt.Errorf("process %d is gone", pid)
	}
	var u treeUsage
	for _, p := range descendants(all, pid) {
		s := all[p]
		u.CPUSeconds += float64(s.ticks) / clockTicks
		u.RSSBytes += rss(p)
		u.Procs++
	}
	return u, nil
}

type procStat struct {
	ppid  int
	ticks int64 // utime + stime + cutime + cstime
}

// procTable reads every process's parent and CPU ticks.
func procTable() (map[int]procStat, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("read /proc: %w", err)
	}
	out := map[int]procStat{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // exited meanwhile
		}
		if s, ok := parseStat(b); ok {
			out[pid] = s
		}
	}
	return out, nil
}

// parseStat reads ppid and the four CPU times from a /proc/<pid>/stat
// line. The command name (field 2) is in parentheses and may hold spaces
// and parentheses itself, so fields are counted from the last ')'.
func parseStat(b []byte) (procStat, bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, false
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state): ppid is field 4, utime..cstime fields 14-17.
	if len(f) < 15 {
		return procStat{}, false
	}
	var s procStat
	s.ppid, _ = strconv.Atoi(f[1])
	for _, k := range f[11:15] {
		n, _ := strconv.ParseInt(k, 10, 64)
		s.ticks += n
	}
	return s, true
}

// descendants is root and every process below it.
func descendants(all map[int]procStat, root int) []int {
	children := map[int][]int{}
	for pid, s := range all {
		children[s.ppid] = append(children[s.ppid], pid)
	}
	out := []int{root}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i]]...)
	}
	return out
}

// rss is VmRSS from /proc/<pid>/status, in bytes (0 if gone).
func rss(pid int) int64 {
	f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// dbSize sums the SQLite files of Temporal in dir or a folder of it
// (temporal.db and its -wal and -shm): dev keeps them at the top, and the
// S3 objects beside them are too many to walk.
func dbSize(dir string) int64 {
	var n int64
	for _, pattern := range []string{"temporal.db*", "*/temporal.db*"} {
		files, _ := filepath.Glob(filepath.Join(dir, pattern))
		for _, f := range files {
			if info, err := os.Stat(f); err == nil && info.Mode().IsRegular() {
				n += info.Size()
			}
		}
	}
	return n
}
