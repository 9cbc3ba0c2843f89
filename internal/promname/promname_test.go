package promname

import "testing"

func TestSnake(t *testing.T) {
	for in, want := range map[string]string{
		"WritePackets": "write_packets", "BadICRC": "bad_icrc", "NACKs": "nacks", "SeqNAKs": "seq_naks",
		"AtomicACKs": "atomic_acks", "ACKsSent": "acks_sent", "Frames": "frames", "CMMessages": "cm_messages",
	} {
		if got := Snake(in); got != want {
			t.Errorf("Snake(%q) = %q, want %q", in, got, want)
		}
	}
}
