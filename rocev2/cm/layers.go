package cm

import (
	"errors"

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
