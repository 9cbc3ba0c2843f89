package cm

import (
	"errors"
	"fmt"

	"github.com/dtakit/dtakit/rocev2"
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// LayerTypeMAD is the gopacket layer of a CM MAD (layer types 1440-1459 are
// this package's). Importing this package makes package rocev2 decode the
// payload of a UD SEND Only to QP 1 with it.
var LayerTypeMAD = gopacket.RegisterLayerType(1440, gopacket.LayerTypeMetadata{Name: "CM MAD", Decoder: gopacket.DecodeFunc(decodeMADLayer)})

func init() {
	rocev2.QP1LayerType = LayerTypeMAD
}

// MADLayer is a CM MAD as gopacket.NewPacket decodes it: the header and the
// message.
type MADLayer struct {
	layers.BaseLayer
	Header  MADHeader
	Message Message
}

// LayerType returns LayerTypeMAD.
func (*MADLayer) LayerType() gopacket.LayerType { return LayerTypeMAD }

func decodeMADLayer(data []byte, pb gopacket.PacketBuilder) error {
	h, m, err := DecodeMAD(data)
	if err != nil {
		if errors.Is(err, ErrTruncated) {
			pb.SetTruncated()
		}
		return err
	}
	pb.AddLayer(&MADLayer{BaseLayer: layers.BaseLayer{Contents: data}, Header: h, Message: m})
	return nil
}

// errNoMessage: a MAD layer to serialize holds no message.
var errNoMessage = fmt.Errorf("serialize mad: %w: no message", ErrAttribute)

// SerializeTo prepends the 256-byte MAD to b, as [AppendMAD] encodes it
// (the header's AttrID is the message's), for the payload of a UD SEND Only
// to QP 1 built with gopacket.SerializeLayers.
func (l *MADLayer) SerializeTo(b gopacket.SerializeBuffer, _ gopacket.SerializeOptions) error {
	if l.Message == nil {
		return errNoMessage
	}
	w, err := b.PrependBytes(MADLen)
	if err != nil {
		return err
	}
	_, err = AppendMAD(w[:0], l.Header, l.Message)
	return err
}
