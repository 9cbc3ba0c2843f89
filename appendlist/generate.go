package appendlist

import (
	"encoding/binary"

	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/primitive"
)

// Generate: list j mod Lists, data j / Lists + 1 as EntrySize big-endian
// bytes (the low 4 bytes; the rest 0).
func (kind) Generate(s *primitive.Synthetic, j int, r *dta.Report, buf []byte) {
	d := buf[:s.EntrySize]
	clear(d)
	binary.BigEndian.PutUint32(d[s.EntrySize-4:], uint32(j/s.Lists+1))
	r.Append = dta.Append{ListID: uint32(j % s.Lists), Data: d}
}
