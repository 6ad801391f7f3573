// Package shmem is a shared-memory file for batch buffers between two
// processes: an unlinked file (in /dev/shm where there is one) mapped
// read-write, whose descriptor the other side maps after receiving it over
// a Unix socket (SCM_RIGHTS), so a batch crosses without a copy. The env
// server and the self-play evaluator client lay their buffers out in one.
package shmem

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Align keeps every buffer on its own cache lines.
const Align = 64

// Field is one buffer of a layout: its name and size in bytes.
type Field struct {
	Name  string
	Bytes int
}

// Layout places fields one after another, each on its own cache lines, and
// returns their offsets and the total size.
func Layout(fields ...Field) (offsets map[string]int, size int) {
	offsets = make(map[string]int, len(fields))
	for _, f := range fields {
		offsets[f.Name] = size
		size += (f.Bytes + Align - 1) / Align * Align
	}
	return offsets, size
}

// File is a mapped shared file.
type File struct {
	f   *os.File
	Mem []byte
}

// New makes a shared file of size bytes; prefix names it while it exists
// (it is unlinked at once and lives while a descriptor or mapping does).
func New(prefix string, size int) (*File, error) {
	dir := os.TempDir()
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		dir = "/dev/shm" // memory, not disk
	}
	f, err := os.CreateTemp(dir, prefix+"-*")
	if err != nil {
		return nil, fmt.Errorf("shared buffers: %w", err)
	}
	os.Remove(f.Name())
	if err := f.Truncate(int64(size)); err != nil {
		f.Close()
		return nil, fmt.Errorf("shared buffers: %d bytes: %w", size, err)
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("shared buffers: mmap %d bytes: %w", size, err)
	}
	return &File{f: f, Mem: mem}, nil
}

// Fd is the descriptor to send.
func (s *File) Fd() int { return int(s.f.Fd()) }

// Float32s is n float32s at byte offset off.
func (s *File) Float32s(off, n int) []float32 {
	if n == 0 {
		return []float32{}
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&s.Mem[off])), n)
}

// Bools is n one-byte flags at byte offset off.
func (s *File) Bools(off, n int) []bool {
	if n == 0 {
		return []bool{}
	}
	return unsafe.Slice((*bool)(unsafe.Pointer(&s.Mem[off])), n)
}

// Close unmaps and closes the file.
func (s *File) Close() error {
	err := unix.Munmap(s.Mem)
	if cerr := s.f.Close(); err == nil {
		err = cerr
	}
	return err
}
