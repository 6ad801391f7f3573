package lifecycle

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"strings"
)

// Shell runs scripts with /bin/sh on this machine, in Env (nil: the
// caller's environment). It is the local provisioner's Runner.
type Shell struct {
	Env []string
}

// Run implements Runner.
func (s Shell) Run(ctx context.Context, script string, stdin io.Reader) (string, error) {
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", script)
	cmd.Env = s.Env
	cmd.Stdin = stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}
