package rocev2

// PSN is a 24-bit packet sequence number. Arithmetic wraps modulo 2^24;
// comparisons hold within a window of 2^23 on either side, as IBTA requires
// of requester and responder.
type PSN uint32

// PSNMask keeps the 24 bits of a PSN.
const PSNMask = 1<<24 - 1

// Valid reports whether p fits in 24 bits.
func (p PSN) Valid() bool { return p <= PSNMask }

// Add returns p+n modulo 2^24.
func (p PSN) Add(n uint32) PSN { return (p + PSN(n)) & PSNMask }

// Next returns p+1 modulo 2^24.
func (p PSN) Next() PSN { return (p + 1) & PSNMask }

// Diff returns p-q as a signed distance in [-2^23, 2^23): positive when p is
// ahead of q within the window, negative when behind.
func (p PSN) Diff(q PSN) int32 { return int32(uint32(p-q)<<8) >> 8 }

// Compare returns -1 when p is behind q, 0 when equal and +1 when p is ahead of
// q, comparing within the 2^23 window.
func (p PSN) Compare(q PSN) int {
	d := int32(uint32(p-q) << 8)
	switch {
	case d < 0:
		return -1
	case d > 0:
		return 1
	}
	return 0
}

// Before reports whether p comes before q within the window.
func (p PSN) Before(q PSN) bool { return int32(uint32(p-q)<<8) < 0 }
