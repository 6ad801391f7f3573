//go:build !linux

package main

// notDumpable has no equivalent here: --job-user keeps jobs out.
func notDumpable() error { return nil }
