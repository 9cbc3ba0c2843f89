//go:build !linux || !cgo || !rdma

package verbs

import (
	"net/netip"
	"time"
)

// Without cgo, off Linux or without the rdma build tag every call fails with
// ErrNotSupported; the handles are never set.
type (
	ctxH  = *struct{}
	pdH   = *struct{}
	mrH   = *struct{}
	cqH   = *struct{}
	chH   = *struct{}
	qpH   = *struct{}
	ecH   = *struct{}
	idH   = *struct{}
	cqBuf struct{}
)

func unsupported(op string) error { return &Error{Op: op, Err: ErrNotSupported} }

func devices() ([]Device, error)              { return nil, unsupported("ibv_get_device_list") }
func openDevice(string) (ctxH, error)         { return nil, unsupported("ibv_open_device") }
func closeDevice(ctxH) error                  { return unsupported("ibv_close_device") }
func queryPort(ctxH, uint8) (PortAttr, error) { return PortAttr{}, unsupported("ibv_query_port") }
func queryGID(ctxH, uint8, int) (GID, error)  { return GID{}, unsupported("ibv_query_gid") }
func allocPD(ctxH) (pdH, error)               { return nil, unsupported("ibv_alloc_pd") }
func deallocPD(pdH) error                     { return unsupported("ibv_dealloc_pd") }
func regMR(pdH, uintptr, int, Access) (mrH, uint32, uint32, error) {
	return nil, 0, 0, unsupported("ibv_reg_mr")
}
func deregMR(mrH) error { return unsupported("ibv_dereg_mr") }
func createCompChannel(ctxH) (chH, int, error) {
	return nil, -1, unsupported("ibv_create_comp_channel")
}
func destroyCompChannel(chH) error                           { return unsupported("ibv_destroy_comp_channel") }
func getCQEvent(chH) (cqH, error)                            { return nil, unsupported("ibv_get_cq_event") }
func createCQ(ctxH, int, chH) (cqH, cqBuf, error)            { return nil, cqBuf{}, unsupported("ibv_create_cq") }
func destroyCQ(cqH, cqBuf) error                             { return unsupported("ibv_destroy_cq") }
func reqNotify(cqH, bool) error                              { return unsupported("ibv_req_notify_cq") }
func pollCQ(cqH, cqBuf, []WC) (int, error)                   { return 0, unsupported("ibv_poll_cq") }
func createQP(pdH, QPInitAttr) (qpH, uint32, error)          { return nil, 0, unsupported("ibv_create_qp") }
func destroyQP(qpH) error                                    { return unsupported("ibv_destroy_qp") }
func modifyInit(qpH, uint8, Access) error                    { return unsupported("ibv_modify_qp") }
func modifyRTR(qpH, RTRAttr) error                           { return unsupported("ibv_modify_qp") }
func modifyRTS(qpH, RTSAttr) error                           { return unsupported("ibv_modify_qp") }
func modifyState(qpH, QPState) error                         { return unsupported("ibv_modify_qp") }
func queryQP(qpH) (QPAttr, error)                            { return QPAttr{}, unsupported("ibv_query_qp") }
func postSend(qpH, *SendWR, uint64, uint32) error            { return unsupported("ibv_post_send") }
func postRecv(qpH, uint64, uint64, int, uint32) error        { return unsupported("ibv_post_recv") }
func createEventChannel() (ecH, int, error)                  { return nil, -1, unsupported("rdma_create_event_channel") }
func destroyEventChannel(ecH)                                {}
func createID(ecH) (idH, error)                              { return nil, unsupported("rdma_create_id") }
func destroyID(idH) error                                    { return unsupported("rdma_destroy_id") }
func bindAddr(idH, netip.AddrPort) error                     { return unsupported("rdma_bind_addr") }
func listen(idH, int) error                                  { return unsupported("rdma_listen") }
func resolveAddr(idH, netip.Addr, netip.AddrPort, int) error { return unsupported("rdma_resolve_addr") }
func resolveRoute(idH, int) error                            { return unsupported("rdma_resolve_route") }
func cmCreateQP(idH, pdH, QPInitAttr) (qpH, uint32, error) {
	return nil, 0, unsupported("rdma_create_qp")
}
func connect(idH, ConnParam) error    { return unsupported("rdma_connect") }
func accept(idH, ConnParam) error     { return unsupported("rdma_accept") }
func reject(idH, []byte) error        { return unsupported("rdma_reject") }
func disconnect(idH) error            { return unsupported("rdma_disconnect") }
func getEvent(ecH) (rawEvent, error)  { return rawEvent{}, unsupported("rdma_get_cm_event") }
func idVerbs(idH) ctxH                { return nil }
func idPort(idH) uint8                { return 0 }
func idAddr(idH, bool) netip.AddrPort { return netip.AddrPort{} }

type rawEvent struct {
	typ, status int
	id, listen  idH
	pdata       []byte
}

func waitFD(int, time.Duration, string) error { return unsupported("poll") }
