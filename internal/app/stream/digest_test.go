package stream

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/primitive"
)

// TestDigest pins the streams' bytes: the SHA-256 of the payloads of the
// first 20 000 reports of each primitive's stream alone and of the mix,
// under the default parameters and under other ones. Tools and tests on
// both sides of a run recompute a stream from its parameters, so a change
// here is a change of what dtareport sends.
func TestDigest(t *testing.T) {
	other := Synthetic{Synthetic: primitive.Synthetic{Seed: 7, Keys: 10, Redundancy: 3, Hops: 3, Lists: 3, EntrySize: 8, Universe: 100}}
	for _, c := range []struct {
		name string
		s    Synthetic
		mix  []dta.Opcode
		want string
	}{
		{"default/keywrite", Default, []dta.Opcode{dta.OpKeyWrite}, "99314057d35b8414de8c829dc0d29311392338c974bd8fc072da876a8fc5b869"},
		{"default/keyincrement", Default, []dta.Opcode{dta.OpKeyIncrement}, "7e260b313cd9a23e011311a8cf8b9e8fb1a367bb2724037ddee094866f4485aa"},
		{"default/postcard", Default, []dta.Opcode{dta.OpPostcard}, "5ab657a2a5cff65b8acbe9769fdcb4b4a13147363411acb13b730e2843defefb"},
		{"default/append", Default, []dta.Opcode{dta.OpAppend}, "05da5b2f18a3823f8ef26e3e0661410b22ce3f64867227ac027939d4e89e89c2"},
		{"default/mix", Default, Default.Mix, "6269809f7d84ca3044843d587d47a1b73f282f432fd2712cfd505cba76061922"},
		{"other/keywrite", other, []dta.Opcode{dta.OpKeyWrite}, "314e6629ec56fc3458f06401b59d9f5a23d46c1da94fb96736054bf29a257d63"},
		{"other/keyincrement", other, []dta.Opcode{dta.OpKeyIncrement}, "3c970fd7123e7f11eac5b27cea537cd92d16872553b243e8b8253a63b047ca4c"},
		{"other/postcard", other, []dta.Opcode{dta.OpPostcard}, "4d24456905a26917cba517c1aa48a710580078d0c4c04d59bc3b5d81429d975b"},
		{"other/append", other, []dta.Opcode{dta.OpAppend}, "c4a4252cd2f80dc610161c9a98a501f5e2f05d284f56afb30267f9d9c623ae92"},
		{"other/mix", other, []dta.Opcode{dta.OpAppend, dta.OpPostcard, dta.OpKeyWrite, dta.OpPostcard, dta.OpKeyIncrement}, "2f23281fb0d8a5f9fb2e8d84ecfbd6fb57a0ab87d30cb3a4490025e2b58ed805"},
	} {
		s := c.s
		s.Mix = c.mix
		if err := s.Validate(); err != nil {
			t.Fatal(err)
		}
		h := sha256.New()
		buf := make([]byte, s.EntrySize)
		var r dta.Report
		var b []byte
		for i := range 20000 {
			s.Report(i, &r, buf)
			var err error
			if b, err = dta.AppendPayload(b[:0], &r); err != nil {
				t.Fatalf("%s: report %d: %v", c.name, i, err)
			}
			h.Write(b)
		}
		if got := hex.EncodeToString(h.Sum(nil)); got != c.want {
			t.Errorf("%s: digest %s, want %s", c.name, got, c.want)
		}
	}
}
