//go:build linux && cgo && rdma

package verbs

import "testing"

const cgoLinux = true

func TestConstantsMatchC(t *testing.T) {
	ours := []int{
		int(AccessLocalWrite), int(AccessRemoteWrite), int(AccessRemoteRead), int(AccessRemoteAtomic),
		int(QPReset), int(QPInit), int(QPRTR), int(QPRTS), int(QPSQD), int(QPSQE), int(QPErr),
		int(MTU256), int(MTU1024), int(MTU4096),
		int(OpWrite), int(OpWriteImm), int(OpSend), int(OpSendImm), int(OpRead), int(OpCompareSwap), int(OpFetchAdd),
		int(SendFence), int(SendSignaled), int(SendSolicited), int(SendInline),
		int(WCSend), int(WCWrite), int(WCRead), int(WCCompareSwap), int(WCFetchAdd), int(WCRecv), int(WCRecvImm),
		int(WCSuccess), int(WCFlushErr), int(WCRemAccessErr), int(WCRetryExcErr), int(WCGeneralErr),
		int(CMAddrResolved), int(CMConnectRequest), int(CMRejected), int(CMEstablished), int(CMDisconnected), int(CMTimewaitExit),
	}
	c := cConstants()
	if len(c) != len(ours) {
		t.Fatalf("%d C constants, %d of ours", len(c), len(ours))
	}
	for i := range c {
		if c[i] != ours[i] {
			t.Errorf("constant %d: ours %d, rdma-core %d", i, ours[i], c[i])
		}
	}
}
