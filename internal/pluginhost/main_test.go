package pluginhost

import (
	"os"
	"testing"
)

// TestMain lets the test binary serve as the plugin worker process.
func TestMain(m *testing.M) {
	ServeWorkerIfChild()
	os.Exit(m.Run())
}
