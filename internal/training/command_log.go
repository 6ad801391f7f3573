package training

import "io"

// output is where the trainer's stdout and stderr go: the tail kept for
// heartbeats and the result, and the run's log when there is one.
func (in CommandInput) output(tail io.Writer) io.Writer {
	if in.Log == nil {
		return tail
	}
	return io.MultiWriter(tail, in.Log)
}
