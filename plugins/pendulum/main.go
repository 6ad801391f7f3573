// Command pendulum is Pendulum-v1 (continuous torque) as a WASM plugin. It
// runs the native reference batch (sdk/go/envs/native) unchanged through
// the SDK's VecEnv interface: bit-identical to native by construction.
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared.
package main

import (
	"github.com/trainyard/trainyard/plugins/internal/spec"
	"github.com/trainyard/trainyard/sdk/go/envs/native"
	"github.com/trainyard/trainyard/sdk/go/envs/pendulum"
	"github.com/trainyard/trainyard/sdk/go/plugin"
)

func init() {
	plugin.RegisterVecEnv(spec.Metadata(pendulum.Spec(), "1.0.0", "Pendulum-v1, Gymnasium dynamics"),
		func(n int) (plugin.VecEnv, error) { return native.New(pendulum.Name, n) })
}

func main() {}
