package main

import (
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
)

// servePprof serves Go's profiles on TRAINYARD_PPROF (a loopback address,
// as 127.0.0.1:6060) when it is set: how `make scale` runs are profiled.
// Only a loopback address is taken, and never by an agent: a heap profile
// holds the process's secrets (an agent's join token), and an agent's
// host runs other people's jobs, which could read it from loopback. It
// returns the listener, nil when it serves nothing.
func servePprof(log *slog.Logger, service string) net.Listener {
	addr := os.Getenv("TRAINYARD_PPROF")
	if addr == "" {
		return nil
	}
	if service == "trainyard-agent" {
		log.Warn("TRAINYARD_PPROF ignored: agents serve no profiles (jobs on the node could read the agent's join token from them)")
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		log.Warn("TRAINYARD_PPROF ignored: want a loopback host:port", "value", addr)
		return nil
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		log.Warn("TRAINYARD_PPROF", "err", err)
		return nil
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	go func() { _ = http.Serve(l, mux) }()
	return l
}
