// Command fakeagent stands in for `trainyard agent` in provisioner tests: a
// long-running process that records its life in a marker file:
//
//	start PID
//	arg ARG            (each argument)
//	env K=V            (its whole environment, sorted)
//	child PID          (with -child: a sleeping child in its process group)
//	stop PID           (on SIGTERM, unless -ignore-term)
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"sort"
	"syscall"
	"time"
)

func main() {
	marker := flag.String("marker", "", "file to append life events to")
	ignoreTerm := flag.Bool("ignore-term", false, "ignore SIGTERM (only SIGKILL ends it)")
	exitNow := flag.Bool("exit-now", false, "fail at once, as an agent with bad flags would")
	child := flag.Bool("child", false, "start a sleeping child process")
	flag.Parse()
	if *exitNow {
		fmt.Fprintln(os.Stderr, "fakeagent: refusing to start (-exit-now)")
		os.Exit(3)
	}
	if *marker == "" {
		fmt.Fprintln(os.Stderr, "fakeagent: -marker is required")
		os.Exit(2)
	}
	f, err := os.OpenFile(*marker, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakeagent:", err)
		os.Exit(1)
	}
	// Subscribe before announcing, so a test that stops us right after
	// reading "start" is heard.
	sigs := make(chan os.Signal, 1)
	if *ignoreTerm {
		signal.Ignore(syscall.SIGTERM)
	} else {
		signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	}
	lines := []string{fmt.Sprintf("start %d", os.Getpid())}
	for _, a := range flag.Args() {
		lines = append(lines, "arg "+a)
	}
	env := os.Environ()
	sort.Strings(env)
	for _, kv := range env {
		lines = append(lines, "env "+kv)
	}
	if *child {
		c := exec.Command("sleep", "1000")
		if err := c.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "fakeagent:", err)
			os.Exit(1)
		}
		lines = append(lines, fmt.Sprintf("child %d", c.Process.Pid))
	}
	fmt.Println("fakeagent running")
	write(f, lines...)
	if *ignoreTerm {
		for {
			time.Sleep(time.Hour)
		}
	}
	<-sigs
	write(f, fmt.Sprintf("stop %d", os.Getpid()))
}

// write appends lines in one call so concurrent agents' records do not mix.
func write(f *os.File, lines ...string) {
	var b []byte
	for _, l := range lines {
		b = append(b, l...)
		b = append(b, '\n')
	}
	if _, err := f.Write(b); err != nil {
		fmt.Fprintln(os.Stderr, "fakeagent:", err)
		os.Exit(1)
	}
}
