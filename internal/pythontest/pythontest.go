// Package pythontest gives tests Debian's Python with the python3-*
// packages the make fragments install (mk/numpy.mk, mk/torch.mk,
// mk/tensorboard.mk), and skips or fails those that lack them.
package pythontest

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Python is Debian's interpreter: the python3-* packages are installed
// for it (a python3 earlier on PATH, pyenv's say, may lack them).
const Python = "/usr/bin/python3"

// Require skips t unless Python imports every module in imports. Where
// the variable requireEnv is set (make test sets it), it fails t instead,
// naming the make target that installs them.
func Require(t testing.TB, requireEnv, target string, imports ...string) {
	t.Helper()
	err := exec.Command(Python, "-c", "import "+strings.Join(imports, ", ")).Run()
	if err == nil {
		return
	}
	if os.Getenv(requireEnv) != "" {
		t.Fatalf("%s cannot import %s (%v): `make %s` installs them", Python, strings.Join(imports, ", "), err, target)
	}
	t.Skipf("%s cannot import %s (%v): `make %s`", Python, strings.Join(imports, ", "), err, target)
}
