package ssh

import (
	"strings"

	"github.com/trainyard/trainyard/internal/cluster/spec"
)

// Kind is the provisioner kind's name in a spec.
const Kind = "ssh"

// Settings are `provisioner.ssh`; empty fields take the provisioner's
// defaults (port 22, the current user, ~/.ssh/id_ed25519,
// ~/.ssh/known_hosts, .trainyard/agents/<node> under the remote home).
type Settings struct {
	User           string `json:"user,omitempty"`
	Port           int    `json:"port,omitempty"`
	KeyPath        string `json:"key,omitempty"`
	KnownHostsPath string `json:"known_hosts,omitempty"`
	RemoteDir      string `json:"remote_dir,omitempty"`
}

func init() { spec.Register(spec.Kind{Name: Kind, Check: check}) }

// SettingsOf decodes an ssh node's settings.
func SettingsOf(n spec.Node) (Settings, error) {
	var s Settings
	err := spec.DecodeSettings(n, &s)
	return s, err
}

// Set makes s the node's settings.
func Set(n *spec.Node, s Settings) { n.Provisioner.Settings = spec.EncodeSettings(s) }

func check(n spec.Node, fail func(field, format string, a ...any)) {
	if n.Address == "" {
		fail("address", "required for the ssh provisioner")
	} else if strings.ContainsAny(n.Address, " /@") {
		fail("address", "%q must be a host name or IP address (put the user in provisioner.ssh.user)", n.Address)
	}
	s, err := SettingsOf(n)
	if err != nil {
		fail("provisioner.ssh", "%v", err)
		return
	}
	if s.Port < 0 || s.Port > 65535 {
		fail("provisioner.ssh.port", "%d is not a TCP port", s.Port)
	}
	if strings.ContainsAny(s.User, " '\"@:") {
		fail("provisioner.ssh.user", "%q is not a user name", s.User)
	}
	if strings.ContainsAny(s.RemoteDir, "\x00\n") {
		fail("provisioner.ssh.remote_dir", "contains a control character")
	}
}
