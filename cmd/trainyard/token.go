package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/trainyard/trainyard/internal/auth"
)

// newTokenCmd manages the token store file directly (on the server's
// machine, e.g. to recover a lost admin token); remote clients use the API.
func newTokenCmd() *cobra.Command {
	var file string
	cmd := &cobra.Command{Use: "token", Short: "Manage API tokens in a local token store file"}
	cmd.PersistentFlags().StringVar(&file, "tokens-file", ".trainyard/tokens.json", "the token store (dev keeps it in DATA/tokens.json)")

	var name, role string
	create := &cobra.Command{
		Use:   "create",
		Short: "Create a token and print its secret once",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := auth.ParseRole(role)
			if err != nil {
				return err
			}
			s, err := auth.Open(file)
			if err != nil {
				return err
			}
			secret, _, err := s.Create(name, r)
			if err != nil {
				return err
			}
			fmt.Fprintln(os.Stdout, secret)
			return nil
		},
	}
	create.Flags().StringVar(&name, "name", "cli", "who holds the token")
	create.Flags().StringVar(&role, "role", "viewer", "viewer, operator or admin")

	list := &cobra.Command{
		Use:   "ls",
		Short: "List tokens (never their secrets)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := auth.Open(file)
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stdout, "%-14s %-10s %-20s %s\n", "ID", "ROLE", "NAME", "CREATED")
			for _, t := range s.List() {
				fmt.Fprintf(os.Stdout, "%-14s %-10s %-20s %s\n", t.ID, t.Role, t.Name, t.CreatedAt.Format("2006-01-02 15:04"))
			}
			return nil
		},
	}
	cmd.AddCommand(create, list)
	return cmd
}
