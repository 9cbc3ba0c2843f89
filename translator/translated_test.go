package translator

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/dtakit/dtakit/dta"
)

// TestTranslatedCountsReports: Reports counts datagrams, a NACKed report's
// included; Translated counts the reports turned into operations.
func TestTranslatedCountsReports(t *testing.T) {
	e, _ := memSetup(t, kwInst(t), Config{RingSize: 2})
	now := time.Now().UnixNano()
	report := func(seq uint8, n uint8) []byte {
		b, err := dta.AppendPayload(nil, &dta.Report{Header: dta.Header{Opcode: dta.OpKeyWrite, Sequenced: true, Seq: uint32(seq)},
			KeyWrite: dta.KeyWrite{Redundancy: n, Key: 1, Data: binary.BigEndian.AppendUint32(nil, 1)}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	e.HandleReport(report(1, 4), testReporter, now) // 4 copies, a ring of 2: NACKed
	e.HandleReport(report(2, 1), testReporter, now)
	c := e.Counters()
	if c.Reports[dta.OpKeyWrite] != 2 || c.NACKs != 1 || c.Translated[dta.OpKeyWrite] != 1 {
		t.Errorf("datagrams %d, NACKs %d, translated %d: want 2, 1, 1", c.Reports[dta.OpKeyWrite], c.NACKs, c.Translated[dta.OpKeyWrite])
	}
}
