package main

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/gopacket/gopacket"

	"github.com/dtakit/dtakit/dta"
	"github.com/dtakit/dtakit/primitive"
)

// opaque is a registered primitive that does not describe its fields.
type opaque struct{}

const opaqueOp dta.Opcode = 0xF6

func (opaque) Opcode() dta.Opcode     { return opaqueOp }
func (opaque) Name() string           { return "opaque" }
func (opaque) Key(*dta.Report) uint32 { return 0 }
func (opaque) Stateful() bool         { return false }
func (opaque) ParseLayout([]byte) (primitive.Layout, error) {
	return nil, errors.New("opaque: no layout")
}

func init() { primitive.Register(opaque{}) }

// TestRegisteredOpcode: a report of a primitive registered beyond the four
// shows its body as it came, in hex.
func TestRegisteredOpcode(t *testing.T) {
	frame := reportFrame(t, dta.Report{Header: dta.Header{Opcode: opaqueOp}, Body: []byte{0xde, 0xad, 0xbe, 0xef}})
	p := gopacket.NewPacket(frame, gopacket.DecodersByLayerName["Ethernet"], gopacket.Default)
	l := p.Layer(dta.LayerTypeReport)
	if l == nil {
		t.Fatalf("no DTA report layer: %v", p.ErrorLayer())
	}
	b, err := json.Marshal(reportFields(l))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"opcode":"opcode(0xf6)","immediate":false,"sequenced":false,"reserved":0,"body":"deadbeef"}`
	if string(b) != want {
		t.Errorf("fields %s, want %s", b, want)
	}
}
