package transport

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// The chunk format (README.md has the table). All integers are little endian.
const (
	ChunkMagic  = 0x43544453 // "SDTC" in the first four bytes
	ChunkFormat = 1          // bumped whenever the layout changes
	HeaderSize  = 72

	// MaxMessage bounds the payload a receiver reassembles, so a corrupt
	// header cannot make it allocate without limit. A 65,536-entry result
	// frame is 1.5 MiB; this leaves room for tables far larger than any
	// data plane holds.
	MaxMessage = 256 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// header is one chunk's header.
type header struct {
	kind   Kind
	hash   uint64 // config hash the payload was made under
	slot   uint64 // push slot: the payload's version
	index  uint32 // this chunk's place, 0 to count-1
	count  uint32 // chunks the payload travels in
	length uint32 // payload bytes; the chunks' data beyond it is zero
	sum    uint32 // CRC32C of the whole payload
	sender string
}

func (h *header) put(b []byte) {
	le := binary.LittleEndian
	le.PutUint32(b[0:], ChunkMagic)
	b[4], b[5], b[6], b[7] = ChunkFormat, byte(h.kind), 0, 0
	le.PutUint64(b[8:], h.hash)
	le.PutUint64(b[16:], h.slot)
	le.PutUint32(b[24:], h.index)
	le.PutUint32(b[28:], h.count)
	le.PutUint32(b[32:], h.length)
	le.PutUint32(b[36:], h.sum)
	n := copy(b[40:HeaderSize], h.sender)
	clear(b[40+n : HeaderSize])
}

// errChunk marks a message that is not a chunk this version can read.
var errChunk = errors.New("not a steadydns chunk")

// parse reads the header of chunk b and checks that its numbers agree with
// each other and with b's length; it returns the chunk's data.
func (h *header) parse(b []byte) ([]byte, error) {
	le := binary.LittleEndian
	if len(b) < HeaderSize || le.Uint32(b) != ChunkMagic {
		return nil, fmt.Errorf("%w: bad magic or %d bytes", errChunk, len(b))
	}
	if b[4] != ChunkFormat {
		return nil, fmt.Errorf("%w: format %d, want %d", errChunk, b[4], ChunkFormat)
	}
	h.kind = Kind(b[5])
	h.hash = le.Uint64(b[8:])
	h.slot = le.Uint64(b[16:])
	h.index = le.Uint32(b[24:])
	h.count = le.Uint32(b[28:])
	h.length = le.Uint32(b[32:])
	h.sum = le.Uint32(b[36:])
	id := b[40:HeaderSize]
	if i := bytes.IndexByte(id, 0); i >= 0 {
		id = id[:i]
	}
	h.sender = string(id)
	data := b[HeaderSize:]
	size := uint64(len(data))
	switch {
	case h.count == 0 || h.index >= h.count:
		return nil, fmt.Errorf("%w: chunk %d of %d", errChunk, h.index, h.count)
	case h.length > MaxMessage:
		return nil, fmt.Errorf("%w: payload of %d bytes exceeds %d", errChunk, h.length, MaxMessage)
	case uint64(h.length) > uint64(h.count)*size || uint64(h.length) < uint64(h.count-1)*size+1 && h.count > 1:
		// Chunks are as even as possible: count-1 of them cannot hold the payload.
		return nil, fmt.Errorf("%w: %d chunks of %d bytes for a %d-byte payload", errChunk, h.count, size, h.length)
	}
	return data, nil
}

// Split says how a payload of n bytes travels when a chunk holds at most
// limit bytes of data: in count chunks of size bytes each, the last one
// padded with zeros. Every payload of the same length therefore makes the
// same messages, whatever it holds.
func Split(n, limit int) (count, size int) {
	limit = max(limit, 1)
	count = max(1, (n+limit-1)/limit)
	return count, (n + count - 1) / count
}

// encodeChunks splits payload into chunks of at most limit data bytes
// (Split) and calls emit with each, in order, stopping at its first error.
// Every chunk is built in buf, which is grown as needed and returned for
// reuse: emit must not keep chunk.
func encodeChunks(buf []byte, kind Kind, slot, hash uint64, sender string, payload []byte, limit int,
	emit func(i, n int, chunk []byte) error) ([]byte, error) {
	count, size := Split(len(payload), limit)
	h := header{kind: kind, hash: hash, slot: slot, count: uint32(count), length: uint32(len(payload)),
		sum: crc32.Checksum(payload, castagnoli), sender: sender}
	if cap(buf) < HeaderSize+size {
		buf = make([]byte, HeaderSize+size)
	}
	chunk := buf[:HeaderSize+size]
	for i := range count {
		h.index = uint32(i)
		h.put(chunk)
		n := copy(chunk[HeaderSize:], payload[min(i*size, len(payload)):])
		clear(chunk[HeaderSize+n:])
		if err := emit(i, count, chunk); err != nil {
			return buf, err
		}
	}
	return buf, nil
}
