// Package scalars writes and reads training curves in the formats people
// already read: TensorBoard event files (TFRecord framing around Event
// protobufs, encoded by hand) and a CSV beside them, kept in S3 under one
// prefix per run or self-play loop (store.go).
package scalars

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// ErrCorrupt marks a record whose framing or checksum is wrong.
var ErrCorrupt = errors.New("corrupt tfrecord")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// maskedCRC is TFRecord's checksum: CRC32C, rotated right by 15 bits,
// plus a constant.
func maskedCRC(b []byte) uint32 {
	c := crc32.Checksum(b, castagnoli)
	return ((c >> 15) | (c << 17)) + 0xa282ead8
}

// appendRecord frames data as one TFRecord: uint64 length (little
// endian), masked CRC32C of those 8 bytes, the data, masked CRC32C of
// the data.
func appendRecord(dst, data []byte) []byte {
	var hdr [12]byte
	binary.LittleEndian.PutUint64(hdr[:8], uint64(len(data)))
	binary.LittleEndian.PutUint32(hdr[8:], maskedCRC(hdr[:8]))
	dst = append(dst, hdr[:]...)
	dst = append(dst, data...)
	return binary.LittleEndian.AppendUint32(dst, maskedCRC(data))
}

// splitRecords returns the payloads of a TFRecord file, both checksums of
// every record verified. A file cut short or damaged anywhere is an error
// naming the record and offset.
func splitRecords(b []byte) ([][]byte, error) {
	var out [][]byte
	for off := 0; off < len(b); {
		n := len(out)
		if len(b)-off < 12 {
			return nil, fmt.Errorf("%w: record %d at byte %d: %d bytes left, a header needs 12", ErrCorrupt, n, off, len(b)-off)
		}
		hdr := b[off : off+12]
		if got, want := binary.LittleEndian.Uint32(hdr[8:]), maskedCRC(hdr[:8]); got != want {
			return nil, fmt.Errorf("%w: record %d at byte %d: length checksum %08x, want %08x", ErrCorrupt, n, off, got, want)
		}
		size := binary.LittleEndian.Uint64(hdr[:8])
		if size > uint64(len(b)-off-12) || uint64(len(b)-off-12)-size < 4 {
			return nil, fmt.Errorf("%w: record %d at byte %d: length %d runs past the end", ErrCorrupt, n, off, size)
		}
		data := b[off+12 : off+12+int(size)]
		end := off + 12 + int(size)
		if got, want := binary.LittleEndian.Uint32(b[end:end+4]), maskedCRC(data); got != want {
			return nil, fmt.Errorf("%w: record %d at byte %d: data checksum %08x, want %08x", ErrCorrupt, n, off, got, want)
		}
		out = append(out, data)
		off = end + 4
	}
	return out, nil
}
