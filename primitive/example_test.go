package primitive_test

import (
	"encoding/json"
	"fmt"

	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/keywrite"
	"github.com/dtakit/dtakit/primitive"
	"github.com/dtakit/dtakit/primitive/primitivetest"
)

// A program that runs any primitive looks its Kind up by the opcode a
// collector advertises, parses the geometry, and from the Layout makes
// the translator's side and the collector's side; nothing in it names
// Key-Write.
func Example() {
	geometry, _ := keywrite.Layout{Slots: 1024, DataSize: 4}.AppendBinary(nil)
	ad := dta.Advertisement{Primitive: dta.OpKeyWrite, Geometry: geometry}

	k, _ := primitive.Lookup(ad.Primitive)
	l, _ := k.ParseLayout(ad.Geometry)
	fmt.Println(k.Name(), l.RegionSize(), "bytes")

	tr, _ := l.NewTranslator(primitive.Config{})
	st, _ := l.NewStore(make([]byte, l.RegionSize()))
	sink := &primitivetest.Sink{Store: st} // applies the writes at once
	r := dta.Report{Header: dta.Header{Opcode: dta.OpKeyWrite},
		KeyWrite: dta.KeyWrite{Redundancy: 2, Key: 7, Data: []byte{0xca, 0xfe, 0, 1}}}
	fmt.Println(tr.Translate(sink, &r, -1) == primitive.Applied, sink.Writes, "writes")

	answers, _ := st.Query(primitive.Query{Keys: []uint32{7}, N: 2})
	j, _ := json.Marshal(answers)
	fmt.Println(string(j))
	// Output:
	// keywrite 8192 bytes
	// true 2 writes
	// [{"key":7,"status":"found","data":"cafe0001","votes":2}]
}
