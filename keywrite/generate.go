package keywrite

import (
	"encoding/binary"

	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/primitive"
)

// Generate: key j mod Keys, data Value(key, j / Keys) as 4 big-endian
// bytes, Redundancy copies.
func (kind) Generate(s *primitive.Synthetic, j int, r *dta.Report, buf []byte) {
	key := j % s.Keys
	binary.BigEndian.PutUint32(buf, s.Value(key, j/s.Keys))
	r.KeyWrite = dta.KeyWrite{Redundancy: uint8(s.Redundancy), Key: uint32(key), Data: buf[:4]}
}
