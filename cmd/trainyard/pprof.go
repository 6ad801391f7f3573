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
// Only a loopback address is taken: profiles show the process's memory.
func servePprof(log *slog.Logger) {
	addr := os.Getenv("TRAINYARD_PPROF")
	if addr == "" {
		return
	}
	host, _, err := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		log.Warn("TRAINYARD_PPROF ignored: want a loopback host:port", "value", addr)
		return
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	go func() {
		if err := http.ListenAndServe(addr, mux); err != nil {
			log.Warn("pprof", "err", err)
		}
	}()
}
