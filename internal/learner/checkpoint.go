package learner

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
)

// ErrCheckpoint marks a learner checkpoint that is corrupt, of an unknown
// version, or for a different environment.
var ErrCheckpoint = errors.New("bad checkpoint")

// Seal frames a learner checkpoint, the envelope every algorithm's Save
// writes (little-endian):
//
//	magic   8 bytes naming the algorithm's format
//	version uint32
//	hdrLen  uint32, then hdrLen bytes of header (JSON)
//	payload the algorithm's arrays
//	sha256 of everything above
func Seal(magic string, version uint32, hdr, payload []byte) []byte {
	b := make([]byte, 0, len(magic)+8+len(hdr)+len(payload)+sha256.Size)
	b = append(b, magic...)
	b = binary.LittleEndian.AppendUint32(b, version)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(hdr)))
	b = append(b, hdr...)
	b = append(b, payload...)
	sum := sha256.Sum256(b)
	return append(b, sum[:]...)
}

// Unseal checks a checkpoint Seal framed (what names the format in the
// error: "PPO") and returns its header and payload; its errors wrap
// ErrCheckpoint.
func Unseal(data []byte, magic string, version uint32, what string) (hdr, payload []byte, err error) {
	if len(data) < len(magic)+8+sha256.Size || string(data[:len(magic)]) != magic {
		return nil, nil, fmt.Errorf("%w: not a %s checkpoint", ErrCheckpoint, what)
	}
	body, sum := data[:len(data)-sha256.Size], data[len(data)-sha256.Size:]
	if got := sha256.Sum256(body); !bytes.Equal(got[:], sum) {
		return nil, nil, fmt.Errorf("%w: sha256 mismatch (corrupt or truncated)", ErrCheckpoint)
	}
	p := len(magic)
	if v := binary.LittleEndian.Uint32(body[p:]); v != version {
		return nil, nil, fmt.Errorf("%w: version %d, this build reads %d", ErrCheckpoint, v, version)
	}
	hl := int64(binary.LittleEndian.Uint32(body[p+4:]))
	p += 8
	if hl > int64(len(body)-p) {
		return nil, nil, fmt.Errorf("%w: header length %d exceeds the file", ErrCheckpoint, hl)
	}
	return body[p : p+int(hl)], body[p+int(hl):], nil
}
