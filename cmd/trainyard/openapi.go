package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/trainyard/trainyard/api"
)

func newOpenAPICmd() *cobra.Command {
	return &cobra.Command{
		Use:   "openapi",
		Short: "Print the OpenAPI document (YAML) of the REST API",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := api.OpenAPIYAML()
			if err != nil {
				return err
			}
			_, err = fmt.Fprint(os.Stdout, string(b))
			return err
		},
	}
}
