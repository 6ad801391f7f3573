package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/trainyard/trainyard/internal/pluginscaffold"
)

func newPluginInitCmd() *cobra.Command {
	var lang string
	cmd := &cobra.Command{
		Use:   "init NAME",
		Short: "Start a plugin project in the new directory NAME: an env that `plugin build NAME` compiles",
		Long: "Writes a complete env plugin into NAME (which must not exist or be empty), with its own copy\n" +
			"of the guest SDK: Go (go.mod replacing the SDK module with third_party/trainyard-sdk-go; builds\n" +
			"without network) or AssemblyScript (package.json pinning the compiler, the SDK in\n" +
			"third_party/trainyard-sdk-as). The plugin is named after NAME's last element.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := pluginscaffold.Init(args[0], lang); err != nil {
				return err
			}
			name := filepath.Base(filepath.Clean(args[0]))
			fmt.Fprintf(os.Stdout, "%s: a new %s plugin project (an env)\n  trainyard plugin build %s\n  trainyard plugin run %s.wasm\n", args[0], lang, args[0], name)
			return nil
		},
	}
	cmd.Flags().StringVar(&lang, "lang", "go", "go or assemblyscript (as)")
	return cmd
}
