package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// byteProgress draws "label [=====>    ]  45%  14.5 MiB/32.0 MiB" on w,
// rewritten in place on a terminal and at most ~10 times a second; on
// anything else it stays silent (logs and pipes get the final line only).
type byteProgress struct {
	mu    sync.Mutex
	w     io.Writer
	label string
	tty   bool
	last  time.Time
	drawn bool
}

func newByteProgress(w io.Writer, label string) *byteProgress {
	return &byteProgress{w: w, label: label, tty: isTerminal(w)}
}

// update is an apiclient upload progress callback.
func (p *byteProgress) update(sent, total int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.tty || (sent < total && time.Since(p.last) < 100*time.Millisecond) {
		return
	}
	p.last = time.Now()
	fmt.Fprintf(p.w, "\r\033[K%s", progressBar(p.label, sent, total, 24, bytesOf))
	p.drawn = true
	if sent >= total {
		fmt.Fprintf(p.w, "\r\033[K%s — sent, the server is validating…", progressBar(p.label, sent, total, 24, bytesOf))
	}
}

// done ends the line the bar was drawn on.
func (p *byteProgress) done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drawn {
		fmt.Fprint(p.w, "\r\033[K")
		p.drawn = false
	}
}

func bytesOf(n int64) string { return humanBytes(int(n)) }

// progressBar renders one bar of width cells; unit formats the counts.
func progressBar(label string, done, total int64, width int, unit func(int64) string) string {
	frac := 1.0
	if total > 0 {
		frac = min(1, max(0, float64(done)/float64(total)))
	}
	full := int(frac * float64(width))
	bar := strings.Repeat("=", full)
	if full < width {
		bar += ">" + strings.Repeat(" ", width-full-1)
	}
	return fmt.Sprintf("%s [%s] %3.0f%%  %s/%s", label, bar, 100*frac, unit(done), unit(total))
}
