package dta

import "github.com/dtakit/dtakit/dta/tofino"

// CollectorChoice is the table that sends a report to one of several
// collectors (docs/DTA-WIRE.md section 8.6, "Collector choice"): the report
// with key k (the Key-Write or Key-Increment key, the Append list ID, the
// postcard flow ID) goes to collector table[CRC8(be32(k))], CRC8 being the
// Tofino predefined CRC8. The translator routes reports with it and a
// client that queries many collectors routes queries with it.
type CollectorChoice [256]uint8

// DefaultCollectorChoice returns the table whose entry i names collector
// i mod collectors (collectors in 1..256).
func DefaultCollectorChoice(collectors int) CollectorChoice {
	var c CollectorChoice
	for i := range c {
		c[i] = uint8(i % max(collectors, 1))
	}
	return c
}

// Collector returns the index of the collector that receives key's reports.
// It does not allocate.
func (c *CollectorChoice) Collector(key uint32) int {
	return int(c[ChoiceHash(key)])
}

// ChoiceHash returns CRC8(be32(key)), the choice table's index.
func ChoiceHash(key uint32) uint8 {
	r := crc8Tab[byte(key>>24)]
	r = crc8Tab[r^byte(key>>16)]
	r = crc8Tab[r^byte(key>>8)]
	return crc8Tab[r^byte(key)]
}

// crc8Tab is the Tofino CRC8's (polynomial 0x07, not reflected, init and
// xor-out 0) byte table: crc8Tab[b] = CRC8(b).
var crc8Tab = func() (t [256]uint8) {
	h, err := tofino.NewPredefined(8, "CRC8")
	if err != nil {
		panic(err) // a built-in name: cannot fail
	}
	for i := range t {
		t[i] = uint8(h.SumBytes([]byte{byte(i)}))
	}
	return t
}()
