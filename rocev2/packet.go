package rocev2

import "encoding/binary"

// Packet is a whole RoCEv2 UDP payload: the BTH, the extension headers its
// opcode carries ([Opcode.Headers]), the payload, pad bytes and the ICRC.
// Only the extension headers named by BTH.Opcode are meaningful; the others are
// zero after Decode and ignored by AppendTo.
type Packet struct {
	BTH          BTH
	DETH         DETH
	RETH         RETH
	AtomicETH    AtomicETH
	AETH         AETH
	AtomicAckETH AtomicAckETH
	ImmDt        ImmDt
	IETH         IETH
	// Payload is the payload without pad bytes, nil when empty. Decode
	// aliases its input.
	Payload []byte
	// ICRC is the ICRC found by Decode (as a number; the wire holds it
	// least-significant byte first). Encoders compute it and ignore this field.
	ICRC uint32
}

// HeaderLen returns the length of the BTH and the extension headers.
func (p *Packet) HeaderLen() int { return BTHLen + int(opcodeTable[p.BTH.Opcode].extLen) }

// padLen returns the pad bytes that make the payload a multiple of 4.
func (p *Packet) padLen() int { return -len(p.Payload) & 3 }

// Len returns the length of the UDP payload p encodes to: headers, payload,
// pad and ICRC.
func (p *Packet) Len() int { return p.HeaderLen() + len(p.Payload) + p.padLen() + ICRCLen }

// Validate reports what keeps p from being encoded: an opcode this package
// does not implement, a field wider than its bits, a payload on an opcode
// that carries none. BTH.PadCount is not checked: encoders set it.
func (p *Packet) Validate() error {
	if p.BTH.Version != 0 {
		return errTVer
	}
	if err := p.BTH.Validate(); err != nil {
		return err
	}
	h := p.BTH.Opcode.Headers()
	if h&HasDETH != 0 && p.DETH.SrcQP > PSNMask {
		return errDETHQP
	}
	if h&HasAETH != 0 && p.AETH.MSN > PSNMask {
		return errAETHMSN
	}
	if len(p.Payload) > 0 && !p.BTH.Opcode.HasPayload() {
		return errEncodePayload
	}
	return nil
}

// AppendTo appends the headers, payload and pad bytes (zeros) of p to b,
// without the ICRC, which covers the IP and UDP headers ([Frame.AppendTo]
// and [ICRC] compute it). It sets the encoded pad count from the payload
// length, whatever BTH.PadCount says. It does not allocate when b has room.
func (p *Packet) AppendTo(b []byte) ([]byte, error) {
	if err := p.Validate(); err != nil {
		return b, err
	}
	n := p.Len() - ICRCLen
	b = grow(b, n)
	p.put(b[len(b)-n:])
	return b, nil
}

// grow extends b by n bytes, reallocating only when b has no room.
func grow(b []byte, n int) []byte {
	if cap(b)-len(b) < n {
		nb := make([]byte, len(b), 2*cap(b)+n)
		copy(nb, b)
		b = nb
	}
	return b[:len(b)+n]
}

// put writes the headers, payload and pad of a validated p into w, which is
// exactly p.Len()-ICRCLen bytes long.
func (p *Packet) put(w []byte) {
	pad := p.padLen()
	bth := p.BTH
	bth.PadCount = uint8(pad)
	bth.appendTo(w[:0])
	o := BTHLen
	h := bth.Opcode.Headers()
	// Each AppendTo appends into w's own array: w[o:o] has the room.
	if h&HasDETH != 0 {
		o += len(p.DETH.AppendTo(w[o:o]))
	}
	if h&HasRETH != 0 {
		o += len(p.RETH.AppendTo(w[o:o]))
	}
	if h&HasAtomicETH != 0 {
		o += len(p.AtomicETH.AppendTo(w[o:o]))
	}
	if h&HasAETH != 0 {
		o += len(p.AETH.AppendTo(w[o:o]))
	}
	if h&HasAtomicAckETH != 0 {
		o += len(p.AtomicAckETH.AppendTo(w[o:o]))
	}
	if h&HasImmDt != 0 {
		o += len(p.ImmDt.AppendTo(w[o:o]))
	}
	if h&HasIETH != 0 {
		o += len(p.IETH.AppendTo(w[o:o]))
	}
	o += copy(w[o:], p.Payload)
	clear(w[o : o+pad])
}

// PeekMemory returns the remote memory the request in b, a RoCEv2 UDP
// payload, names: the VA and R_Key of its RETH or AtomicETH, and n, the bytes
// this packet brings there (its payload, or 8 for an atomic). ok is false
// for an opcode with neither header and for a b too short to hold it. It
// checks nothing else (Decode does), so that a responder can start loading a
// batch's memory before it decodes and executes the batch.
func PeekMemory(b []byte) (va uint64, rkey uint32, n int, ok bool) {
	if len(b) < BTHLen {
		return 0, 0, 0, false
	}
	info := &opcodeTable[Opcode(b[0])]
	o := BTHLen
	if info.headers&HasDETH != 0 {
		o += DETHLen
	}
	switch {
	case info.headers&HasRETH != 0:
		r, err := DecodeRETH(b[min(o, len(b)):])
		n = len(b) - ICRCLen - BTHLen - int(info.extLen) - int(b[1]>>4&3)
		return r.VA, r.RKey, max(n, 0), err == nil
	case info.headers&HasAtomicETH != 0:
		a, err := DecodeAtomicETH(b[min(o, len(b)):])
		return a.VA, a.RKey, 8, err == nil
	}
	return 0, 0, 0, false
}

// Decode decodes a whole RoCEv2 UDP payload into p: BTH, the extension
// headers of its opcode, payload, pad and ICRC. It rejects a transport
// version other than 0, reserved and unsupported opcodes, a header sequence
// cut short, a payload on an opcode that carries none and a pad count
// inconsistent with the length. It does not verify the ICRC, which covers the
// IP and UDP headers ([Frame.Decode] and [VerifyICRC] do). Payload aliases b.
// On an error p is zero. It does not allocate.
func (p *Packet) Decode(b []byte) error {
	if len(b) < BTHLen {
		*p = Packet{}
		return errShortBTH
	}
	// Everything that can fail is checked on b before p is written, so
	// that p is written once.
	op := Opcode(b[0])
	info := &opcodeTable[op]
	end := BTHLen + int(info.extLen)
	var err error
	switch {
	case b[1]&15 != 0: // TVer
		err = errTVer
	case !info.valid:
		err = op.check()
	case len(b) < end:
		err = errShortExt
	case len(b) < end+ICRCLen:
		err = errShortICRC
	default:
		rest := len(b) - ICRCLen - end // payload and pad
		pad := int(b[1] >> 4 & 3)
		switch {
		case !info.payload && (rest != 0 || pad != 0):
			err = errUnexpectedPayload
		case rest&3 != 0:
			err = errPadUnaligned
		case pad > rest:
			err = errPadTooLong
		}
	}
	if err != nil {
		*p = Packet{}
		return err
	}
	p.BTH.decode((*[BTHLen]byte)(b))
	// The length is checked: the header decoders below cannot fail. Each
	// header is written once, decoded or zero.
	h := info.headers
	o := BTHLen
	p.DETH, p.RETH, p.AtomicETH = DETH{}, RETH{}, AtomicETH{}
	p.AETH, p.AtomicAckETH, p.ImmDt, p.IETH = AETH{}, AtomicAckETH{}, ImmDt{}, IETH{}
	if h&HasDETH != 0 {
		p.DETH, _ = DecodeDETH(b[o:])
		o += DETHLen
	}
	if h&HasRETH != 0 {
		p.RETH, _ = DecodeRETH(b[o:])
		o += RETHLen
	}
	if h&HasAtomicETH != 0 {
		p.AtomicETH, _ = DecodeAtomicETH(b[o:])
		o += AtomicETHLen
	}
	if h&HasAETH != 0 {
		p.AETH, _ = DecodeAETH(b[o:])
		o += AETHLen
	}
	if h&HasAtomicAckETH != 0 {
		p.AtomicAckETH, _ = DecodeAtomicAckETH(b[o:])
		o += AtomicAckETHLen
	}
	if h&HasImmDt != 0 {
		p.ImmDt, _ = DecodeImmDt(b[o:])
		o += ImmDtLen
	}
	if h&HasIETH != 0 {
		p.IETH, _ = DecodeIETH(b[o:])
	}
	n := len(b) - ICRCLen
	p.Payload = nil
	if m := n - end - int(p.BTH.PadCount); m > 0 {
		p.Payload = b[end : end+m : end+m]
	}
	p.ICRC = binary.LittleEndian.Uint32(b[n:])
	return nil
}
