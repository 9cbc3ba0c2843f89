package dta

import (
	"errors"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// Layer types. dtakit registers its gopacket layer types in the
// application range 1000-1999: 1400-1419 belong to this package,
// 1420-1459 to package rocev2.
var (
	// LayerTypeReport is a whole DTA report, decoded by [ReportLayer].
	LayerTypeReport = gopacket.RegisterLayerType(1400, gopacket.LayerTypeMetadata{
		Name: "DTA", Decoder: gopacket.DecodeFunc(decodeReport)})
	// LayerTypeAck is a DTA acknowledgement, decoded by [AckLayer].
	LayerTypeAck = gopacket.RegisterLayerType(1401, gopacket.LayerTypeMetadata{
		Name: "DTAAck", Decoder: gopacket.DecodeFunc(decodeAck)})
)

// The one place the UDP ports are bound: gopacket's UDP layer picks the
// next layer by destination port, then by source port.
func init() {
	layers.RegisterUDPPortLayerType(ReportPort, LayerTypeReport)
	layers.RegisterUDPPortLayerType(AckPort, LayerTypeAck)
}

// ReportLayer is the gopacket layer of a DTA report: the whole UDP payload,
// base header, sub-header and data, as one [Report]. It is the packet's
// application layer and the last layer: the report's data is a field of
// the report (its length is part of what makes the report valid), not a
// payload for another layer, so LayerPayload is empty and NextLayerType
// is [gopacket.LayerTypeZero].
//
// As a [gopacket.DecodingLayer] it decodes without allocating, and as a
// [gopacket.SerializableLayer] it encodes its Report field (the DTA header
// has no length field; FixLengths fixes UDP's and IPv4's). Its decoder is
// fuzzed never to panic, so a DecodingLayerParser of dta layers alone may set
// IgnorePanic and save the recover it otherwise defers on every packet.
type ReportLayer struct {
	Report
	contents []byte
}

// LayerType returns [LayerTypeReport].
func (l *ReportLayer) LayerType() gopacket.LayerType { return LayerTypeReport }

// LayerContents returns the report's bytes, aliasing the decoded data.
func (l *ReportLayer) LayerContents() []byte { return l.contents }

// LayerPayload returns nil: a report carries no further layer.
func (l *ReportLayer) LayerPayload() []byte { return nil }

// Payload returns nil, like LayerPayload; the report's data is in
// Report.KeyWrite.Data or Report.Append.Data.
func (l *ReportLayer) Payload() []byte { return nil }

// CanDecode returns [LayerTypeReport].
func (l *ReportLayer) CanDecode() gopacket.LayerClass { return LayerTypeReport }

// NextLayerType returns [gopacket.LayerTypeZero]: nothing follows a report.
func (l *ReportLayer) NextLayerType() gopacket.LayerType { return gopacket.LayerTypeZero }

// DecodeFromBytes decodes a report from data, the whole UDP payload, as
// [ParseReport] does, and tells df when data was truncated. It resets l
// first and does not allocate.
func (l *ReportLayer) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	l.contents = data
	if err := l.Report.Decode(data); err != nil {
		if errors.Is(err, ErrTruncated) {
			df.SetTruncated()
		}
		return err
	}
	return nil
}

func decodeReport(data []byte, p gopacket.PacketBuilder) error {
	l := &ReportLayer{}
	if err := l.DecodeFromBytes(data, p); err != nil {
		return err
	}
	p.AddLayer(l)
	p.SetApplicationLayer(l)
	return nil
}

// SerializeTo prepends the encoded Report to b, after checking it with
// [Report.Validate]. It ignores LayerContents.
func (l *ReportLayer) SerializeTo(b gopacket.SerializeBuffer, opts gopacket.SerializeOptions) error {
	if err := l.Report.Validate(); err != nil {
		return err
	}
	buf, err := b.PrependBytes(l.Report.Len())
	if err != nil {
		return err
	}
	l.Report.AppendTo(buf[:0])
	return nil
}

// AckLayer is the gopacket layer of a DTA acknowledgement, the whole
// payload of a UDP datagram to [AckPort]. Like [ReportLayer] it is the
// application layer and the last layer.
type AckLayer struct {
	Ack
	contents []byte
}

// LayerType returns [LayerTypeAck].
func (l *AckLayer) LayerType() gopacket.LayerType { return LayerTypeAck }

// LayerContents returns the acknowledgement's 2 bytes.
func (l *AckLayer) LayerContents() []byte { return l.contents }

// LayerPayload returns nil.
func (l *AckLayer) LayerPayload() []byte { return nil }

// Payload returns nil.
func (l *AckLayer) Payload() []byte { return nil }

// CanDecode returns [LayerTypeAck].
func (l *AckLayer) CanDecode() gopacket.LayerClass { return LayerTypeAck }

// NextLayerType returns [gopacket.LayerTypeZero].
func (l *AckLayer) NextLayerType() gopacket.LayerType { return gopacket.LayerTypeZero }

// DecodeFromBytes decodes an acknowledgement as [ParseAck] does. It resets
// l first and does not allocate.
func (l *AckLayer) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	l.contents = data
	a, err := ParseAck(data)
	l.Ack = a
	if err == errAckShort {
		df.SetTruncated()
	}
	return err
}

func decodeAck(data []byte, p gopacket.PacketBuilder) error {
	l := &AckLayer{}
	if err := l.DecodeFromBytes(data, p); err != nil {
		return err
	}
	p.AddLayer(l)
	p.SetApplicationLayer(l)
	return nil
}

// SerializeTo prepends the encoded Ack to b, after checking it with
// [Ack.Validate].
func (l *AckLayer) SerializeTo(b gopacket.SerializeBuffer, opts gopacket.SerializeOptions) error {
	if err := l.Ack.Validate(); err != nil {
		return err
	}
	buf, err := b.PrependBytes(l.Ack.Len())
	if err != nil {
		return err
	}
	l.Ack.AppendTo(buf[:0])
	return nil
}
