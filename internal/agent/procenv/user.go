package procenv

import (
	"fmt"
	"os"
	"os/user"
	"strconv"
	"strings"
	"syscall"
)

// User is another account jobs run as (the agent's --job-user), so a job
// cannot read what its agent holds: the agent's 0600 secrets file, and its
// /proc entries, which a non-dumpable agent closes to other users.
type User struct {
	Name     string
	UID, GID uint32
	Groups   []uint32
}

// LookupUser finds the account name (or a numeric uid).
func LookupUser(name string) (*User, error) {
	u, err := user.Lookup(name)
	if err != nil {
		if n, nerr := strconv.ParseUint(name, 10, 32); nerr == nil {
			if u, err = user.LookupId(name); err != nil && n != 0 {
				// A uid with no account (a container image's): its own group.
				return &User{Name: name, UID: uint32(n), GID: uint32(n)}, nil
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("job user %q: %w", name, err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("job user %q: non-numeric uid %q or gid %q", name, u.Uid, u.Gid)
	}
	if uid == 0 {
		return nil, fmt.Errorf("job user %q is root: jobs would read everything the agent holds", name)
	}
	r := &User{Name: u.Username, UID: uint32(uid), GID: uint32(gid)}
	if gids, err := u.GroupIds(); err == nil {
		for _, g := range gids {
			if n, err := strconv.ParseUint(g, 10, 32); err == nil {
				r.Groups = append(r.Groups, uint32(n))
			}
		}
	}
	return r, nil
}

func (u *User) credential() *syscall.Credential {
	return &syscall.Credential{Uid: u.UID, Gid: u.GID, Groups: u.Groups}
}

// Workdir makes a fresh private directory for one process of u (under the
// system temp dir, since the agent's own directory is closed to u) and
// returns env with HOME, USER and LOGNAME set to u's. remove deletes it.
func (u *User) Workdir(env []string) (dir string, out []string, remove func(), err error) {
	dir, err = os.MkdirTemp("", "trainyard-job-")
	if err != nil {
		return "", nil, nil, fmt.Errorf("job user %s: work dir: %w", u.Name, err)
	}
	remove = func() { _ = os.RemoveAll(dir) }
	if err := os.Chown(dir, int(u.UID), int(u.GID)); err != nil {
		remove()
		return "", nil, nil, fmt.Errorf("job user %s: work dir: %w", u.Name, err)
	}
	set := map[string]string{"HOME": dir, "USER": u.Name, "LOGNAME": u.Name}
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := set[k]; !ok {
			out = append(out, kv)
		}
	}
	for _, k := range []string{"HOME", "USER", "LOGNAME"} {
		out = append(out, k+"="+set[k])
	}
	return dir, out, remove, nil
}
