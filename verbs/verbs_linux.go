//go:build linux && cgo && rdma

package verbs

/*
#cgo LDFLAGS: -libverbs -lrdmacm
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <endian.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

// Every shim returns 0 or a positive errno, whatever convention the
// rdma-core function has (NULL and errno, -1 and errno, or the errno itself).

static int dtk_errno(void) { return errno ? errno : EIO; }

struct dtk_dev { char name[IBV_SYSFS_NAME_MAX]; uint64_t guid; };

static int dtk_devices(struct dtk_dev *out, int max, int *n) {
	int num = 0;
	errno = 0;
	struct ibv_device **l = ibv_get_device_list(&num);
	if (!l) return dtk_errno();
	int k = 0;
	for (int i = 0; i < num && k < max; i++, k++) {
		strncpy(out[k].name, ibv_get_device_name(l[i]), IBV_SYSFS_NAME_MAX - 1);
		out[k].name[IBV_SYSFS_NAME_MAX - 1] = 0;
		out[k].guid = be64toh(ibv_get_device_guid(l[i]));
	}
	*n = num;
	ibv_free_device_list(l);
	return 0;
}

static int dtk_open(const char *name, struct ibv_context **ctx) {
	int num = 0;
	errno = 0;
	struct ibv_device **l = ibv_get_device_list(&num);
	if (!l) return dtk_errno();
	int rc = ENODEV;
	for (int i = 0; i < num; i++) {
		if (name[0] && strcmp(name, ibv_get_device_name(l[i])) != 0) continue;
		errno = 0;
		*ctx = ibv_open_device(l[i]);
		rc = *ctx ? 0 : dtk_errno();
		break;
	}
	ibv_free_device_list(l);
	return rc;
}

static int dtk_query_port(struct ibv_context *ctx, uint8_t port, uint8_t *state, uint8_t *max_mtu,
		uint8_t *active_mtu, int *gid_len, uint8_t *link_layer) {
	struct ibv_port_attr a;
	memset(&a, 0, sizeof a);
	int rc = ibv_query_port(ctx, port, &a);
	if (rc) return rc > 0 ? rc : dtk_errno();
	*state = a.state; *max_mtu = a.max_mtu; *active_mtu = a.active_mtu;
	*gid_len = a.gid_tbl_len; *link_layer = a.link_layer;
	return 0;
}

static int dtk_query_gid(struct ibv_context *ctx, uint8_t port, int index, uint8_t *gid) {
	union ibv_gid g;
	int rc = ibv_query_gid(ctx, port, index, &g);
	if (rc) return rc > 0 ? rc : dtk_errno();
	memcpy(gid, g.raw, 16);
	return 0;
}

static int dtk_alloc_pd(struct ibv_context *ctx, struct ibv_pd **pd) {
	errno = 0;
	*pd = ibv_alloc_pd(ctx);
	return *pd ? 0 : dtk_errno();
}

static int dtk_reg_mr(struct ibv_pd *pd, uintptr_t addr, size_t len, int access, struct ibv_mr **mr) {
	errno = 0;
	*mr = ibv_reg_mr(pd, (void *)addr, len, access);
	return *mr ? 0 : dtk_errno();
}

static int dtk_create_comp_channel(struct ibv_context *ctx, struct ibv_comp_channel **ch) {
	errno = 0;
	*ch = ibv_create_comp_channel(ctx);
	if (!*ch) return dtk_errno();
	int fl = fcntl((*ch)->fd, F_GETFL);
	if (fl < 0 || fcntl((*ch)->fd, F_SETFL, fl | O_NONBLOCK) < 0) {
		int e = dtk_errno();
		ibv_destroy_comp_channel(*ch);
		return e;
	}
	return 0;
}

static int dtk_create_cq(struct ibv_context *ctx, int cqe, struct ibv_comp_channel *ch, struct ibv_cq **cq) {
	errno = 0;
	*cq = ibv_create_cq(ctx, cqe, NULL, ch, 0);
	return *cq ? 0 : dtk_errno();
}

static int dtk_get_cq_event(struct ibv_comp_channel *ch, struct ibv_cq **cq) {
	void *cq_ctx;
	errno = 0;
	if (ibv_get_cq_event(ch, cq, &cq_ctx)) return dtk_errno();
	ibv_ack_cq_events(*cq, 1);
	return 0;
}

static int dtk_req_notify(struct ibv_cq *cq, int solicited) {
	return ibv_req_notify_cq(cq, solicited);
}

struct dtk_wc {
	uint64_t wr_id;
	uint32_t status, opcode, vendor_err, byte_len, imm, qp_num, src_qp, flags;
};

static int dtk_poll(struct ibv_cq *cq, int n, struct ibv_wc *tmp, struct dtk_wc *out) {
	int k = ibv_poll_cq(cq, n, tmp);
	if (k < 0) return k;
	for (int i = 0; i < k; i++) {
		out[i].wr_id = tmp[i].wr_id;
		out[i].status = tmp[i].status;
		out[i].opcode = tmp[i].opcode;
		out[i].vendor_err = tmp[i].vendor_err;
		out[i].byte_len = tmp[i].byte_len;
		out[i].imm = (tmp[i].wc_flags & IBV_WC_WITH_IMM) ? be32toh(tmp[i].imm_data) : 0;
		out[i].qp_num = tmp[i].qp_num;
		out[i].src_qp = tmp[i].src_qp;
		out[i].flags = tmp[i].wc_flags;
	}
	return k;
}

static void dtk_init_attr(struct ibv_qp_init_attr *a, struct ibv_cq *scq, struct ibv_cq *rcq,
		uint32_t max_send, uint32_t max_recv, uint32_t send_sge, uint32_t recv_sge, uint32_t inl, int sig_all) {
	memset(a, 0, sizeof *a);
	a->send_cq = scq; a->recv_cq = rcq;
	a->cap.max_send_wr = max_send; a->cap.max_recv_wr = max_recv;
	a->cap.max_send_sge = send_sge; a->cap.max_recv_sge = recv_sge;
	a->cap.max_inline_data = inl;
	a->qp_type = IBV_QPT_RC;
	a->sq_sig_all = sig_all;
}

static int dtk_create_qp(struct ibv_pd *pd, struct ibv_cq *scq, struct ibv_cq *rcq,
		uint32_t max_send, uint32_t max_recv, uint32_t send_sge, uint32_t recv_sge, uint32_t inl, int sig_all,
		struct ibv_qp **qp, uint32_t *qpn) {
	struct ibv_qp_init_attr a;
	dtk_init_attr(&a, scq, rcq, max_send, max_recv, send_sge, recv_sge, inl, sig_all);
	errno = 0;
	*qp = ibv_create_qp(pd, &a);
	if (!*qp) return dtk_errno();
	*qpn = (*qp)->qp_num;
	return 0;
}

static int dtk_qp_init(struct ibv_qp *qp, uint8_t port, int access) {
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_INIT; a.pkey_index = 0; a.port_num = port; a.qp_access_flags = access;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

static int dtk_qp_rtr(struct ibv_qp *qp, uint32_t dqpn, uint32_t rq_psn, int mtu, const uint8_t *dgid,
		uint8_t sgid_index, uint8_t hop_limit, uint8_t port, uint8_t max_dest_rd_atomic, uint8_t min_rnr_timer) {
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTR; a.path_mtu = mtu; a.dest_qp_num = dqpn; a.rq_psn = rq_psn;
	a.max_dest_rd_atomic = max_dest_rd_atomic; a.min_rnr_timer = min_rnr_timer;
	a.ah_attr.is_global = 1; a.ah_attr.port_num = port;
	memcpy(a.ah_attr.grh.dgid.raw, dgid, 16);
	a.ah_attr.grh.sgid_index = sgid_index; a.ah_attr.grh.hop_limit = hop_limit;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
		IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
}

static int dtk_qp_rts(struct ibv_qp *qp, uint32_t sq_psn, uint8_t timeout, uint8_t retry, uint8_t rnr_retry, uint8_t max_rd_atomic) {
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTS; a.sq_psn = sq_psn; a.timeout = timeout; a.retry_cnt = retry;
	a.rnr_retry = rnr_retry; a.max_rd_atomic = max_rd_atomic;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
		IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

static int dtk_qp_state(struct ibv_qp *qp, int state) {
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof a);
	a.qp_state = state;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE);
}

static int dtk_query_qp(struct ibv_qp *qp, int *state, uint32_t *rq_psn, uint32_t *sq_psn, uint32_t *dqpn, int *mtu) {
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;
	int rc = ibv_query_qp(qp, &a, IBV_QP_STATE | IBV_QP_RQ_PSN | IBV_QP_SQ_PSN | IBV_QP_DEST_QPN | IBV_QP_PATH_MTU, &ia);
	if (rc) return rc;
	*state = a.qp_state; *rq_psn = a.rq_psn; *sq_psn = a.sq_psn; *dqpn = a.dest_qp_num; *mtu = a.path_mtu;
	return 0;
}

static int dtk_post_send(struct ibv_qp *qp, uint64_t wr_id, int opcode, unsigned flags,
		uint64_t laddr, uint32_t len, uint32_t lkey, uint64_t raddr, uint32_t rkey,
		uint32_t imm, uint64_t cmp_add, uint64_t swap) {
	struct ibv_sge sge = { .addr = laddr, .length = len, .lkey = lkey };
	struct ibv_send_wr wr, *bad = NULL;
	memset(&wr, 0, sizeof wr);
	wr.wr_id = wr_id; wr.sg_list = &sge; wr.num_sge = len ? 1 : 0;
	wr.opcode = opcode; wr.send_flags = flags;
	switch (opcode) {
	case IBV_WR_SEND_WITH_IMM:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		wr.imm_data = htobe32(imm);
		break;
	}
	switch (opcode) {
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		wr.wr.atomic.remote_addr = raddr; wr.wr.atomic.rkey = rkey;
		wr.wr.atomic.compare_add = cmp_add; wr.wr.atomic.swap = swap;
		break;
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
	case IBV_WR_RDMA_READ:
		wr.wr.rdma.remote_addr = raddr; wr.wr.rdma.rkey = rkey;
		break;
	}
	return ibv_post_send(qp, &wr, &bad);
}

static int dtk_post_recv(struct ibv_qp *qp, uint64_t wr_id, uint64_t laddr, uint32_t len, uint32_t lkey) {
	struct ibv_sge sge = { .addr = laddr, .length = len, .lkey = lkey };
	struct ibv_recv_wr wr, *bad = NULL;
	memset(&wr, 0, sizeof wr);
	wr.wr_id = wr_id; wr.sg_list = &sge; wr.num_sge = len ? 1 : 0;
	return ibv_post_recv(qp, &wr, &bad);
}

// RDMA CM.

static int dtk_create_event_channel(struct rdma_event_channel **ch) {
	errno = 0;
	*ch = rdma_create_event_channel();
	if (!*ch) return dtk_errno();
	int fl = fcntl((*ch)->fd, F_GETFL);
	if (fl < 0 || fcntl((*ch)->fd, F_SETFL, fl | O_NONBLOCK) < 0) {
		int e = dtk_errno();
		rdma_destroy_event_channel(*ch);
		return e;
	}
	return 0;
}

static int dtk_create_id(struct rdma_event_channel *ch, struct rdma_cm_id **id) {
	return rdma_create_id(ch, id, NULL, RDMA_PS_TCP) ? dtk_errno() : 0;
}

static void dtk_sockaddr(struct sockaddr_storage *ss, int v6, const uint8_t *ip, uint16_t port) {
	memset(ss, 0, sizeof *ss);
	if (v6) {
		struct sockaddr_in6 *s = (struct sockaddr_in6 *)ss;
		s->sin6_family = AF_INET6; s->sin6_port = htons(port); memcpy(&s->sin6_addr, ip, 16);
	} else {
		struct sockaddr_in *s = (struct sockaddr_in *)ss;
		s->sin_family = AF_INET; s->sin_port = htons(port); memcpy(&s->sin_addr, ip, 4);
	}
}

static int dtk_read_sockaddr(struct sockaddr *sa, uint8_t *ip, uint16_t *port) {
	if (!sa) return 0;
	if (sa->sa_family == AF_INET) {
		struct sockaddr_in *s = (struct sockaddr_in *)sa;
		memcpy(ip, &s->sin_addr, 4); *port = ntohs(s->sin_port); return 4;
	}
	if (sa->sa_family == AF_INET6) {
		struct sockaddr_in6 *s = (struct sockaddr_in6 *)sa;
		memcpy(ip, &s->sin6_addr, 16); *port = ntohs(s->sin6_port); return 16;
	}
	return 0;
}

static int dtk_bind(struct rdma_cm_id *id, int v6, const uint8_t *ip, uint16_t port) {
	struct sockaddr_storage ss;
	dtk_sockaddr(&ss, v6, ip, port);
	return rdma_bind_addr(id, (struct sockaddr *)&ss) ? dtk_errno() : 0;
}

static int dtk_listen(struct rdma_cm_id *id, int backlog) {
	return rdma_listen(id, backlog) ? dtk_errno() : 0;
}

static int dtk_resolve_addr(struct rdma_cm_id *id, int has_src, int v6, const uint8_t *sip,
		const uint8_t *dip, uint16_t dport, int timeout_ms) {
	struct sockaddr_storage src, dst;
	dtk_sockaddr(&dst, v6, dip, dport);
	if (has_src) dtk_sockaddr(&src, v6, sip, 0);
	return rdma_resolve_addr(id, has_src ? (struct sockaddr *)&src : NULL, (struct sockaddr *)&dst, timeout_ms) ? dtk_errno() : 0;
}

static int dtk_resolve_route(struct rdma_cm_id *id, int timeout_ms) {
	return rdma_resolve_route(id, timeout_ms) ? dtk_errno() : 0;
}

static int dtk_rdma_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd, struct ibv_cq *scq, struct ibv_cq *rcq,
		uint32_t max_send, uint32_t max_recv, uint32_t send_sge, uint32_t recv_sge, uint32_t inl, int sig_all,
		struct ibv_qp **qp, uint32_t *qpn) {
	struct ibv_qp_init_attr a;
	dtk_init_attr(&a, scq, rcq, max_send, max_recv, send_sge, recv_sge, inl, sig_all);
	if (rdma_create_qp(id, pd, &a)) return dtk_errno();
	*qp = id->qp;
	*qpn = id->qp->qp_num;
	return 0;
}

static void dtk_conn_param(struct rdma_conn_param *p, const void *pdata, uint8_t plen, uint8_t rr, uint8_t id,
		uint8_t retry, uint8_t rnr) {
	memset(p, 0, sizeof *p);
	p->private_data = pdata; p->private_data_len = plen;
	p->responder_resources = rr; p->initiator_depth = id;
	p->retry_count = retry; p->rnr_retry_count = rnr;
}

static int dtk_connect(struct rdma_cm_id *id, const void *pdata, uint8_t plen, uint8_t rr, uint8_t ini,
		uint8_t retry, uint8_t rnr) {
	struct rdma_conn_param p;
	dtk_conn_param(&p, pdata, plen, rr, ini, retry, rnr);
	return rdma_connect(id, &p) ? dtk_errno() : 0;
}

static int dtk_accept(struct rdma_cm_id *id, const void *pdata, uint8_t plen, uint8_t rr, uint8_t ini,
		uint8_t retry, uint8_t rnr) {
	struct rdma_conn_param p;
	dtk_conn_param(&p, pdata, plen, rr, ini, retry, rnr);
	return rdma_accept(id, &p) ? dtk_errno() : 0;
}

static int dtk_reject(struct rdma_cm_id *id, const void *pdata, uint8_t plen) {
	return rdma_reject(id, pdata, plen) ? dtk_errno() : 0;
}

static int dtk_disconnect(struct rdma_cm_id *id) {
	return rdma_disconnect(id) ? dtk_errno() : 0;
}

static int dtk_destroy_id(struct rdma_cm_id *id) {
	if (id->qp) rdma_destroy_qp(id);
	return rdma_destroy_id(id) ? dtk_errno() : 0;
}

struct dtk_event {
	int type, status;
	struct rdma_cm_id *id, *listen_id;
	uint8_t pdata[256];
	int plen;
};

static int dtk_get_event(struct rdma_event_channel *ch, struct dtk_event *out) {
	struct rdma_cm_event *ev;
	errno = 0;
	if (rdma_get_cm_event(ch, &ev)) return dtk_errno();
	out->type = ev->event; out->status = ev->status;
	out->id = ev->id; out->listen_id = ev->listen_id;
	out->plen = 0;
	if (ev->event != RDMA_CM_EVENT_MULTICAST_JOIN && ev->event != RDMA_CM_EVENT_MULTICAST_ERROR &&
			ev->param.conn.private_data && ev->param.conn.private_data_len) {
		out->plen = ev->param.conn.private_data_len;
		if (out->plen > 256) out->plen = 256;
		memcpy(out->pdata, ev->param.conn.private_data, out->plen);
	}
	return rdma_ack_cm_event(ev) ? dtk_errno() : 0;
}

static struct ibv_context *dtk_id_verbs(struct rdma_cm_id *id) { return id->verbs; }
static uint8_t dtk_id_port(struct rdma_cm_id *id) { return id->port_num; }
static int dtk_local_addr(struct rdma_cm_id *id, uint8_t *ip, uint16_t *port) {
	return dtk_read_sockaddr(rdma_get_local_addr(id), ip, port);
}
static int dtk_peer_addr(struct rdma_cm_id *id, uint8_t *ip, uint16_t *port) {
	return dtk_read_sockaddr(rdma_get_peer_addr(id), ip, port);
}

static int dtk_const(int i) {
	static const int v[] = {
		IBV_ACCESS_LOCAL_WRITE, IBV_ACCESS_REMOTE_WRITE, IBV_ACCESS_REMOTE_READ, IBV_ACCESS_REMOTE_ATOMIC,
		IBV_QPS_RESET, IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS, IBV_QPS_SQD, IBV_QPS_SQE, IBV_QPS_ERR,
		IBV_MTU_256, IBV_MTU_1024, IBV_MTU_4096,
		IBV_WR_RDMA_WRITE, IBV_WR_RDMA_WRITE_WITH_IMM, IBV_WR_SEND, IBV_WR_SEND_WITH_IMM, IBV_WR_RDMA_READ,
		IBV_WR_ATOMIC_CMP_AND_SWP, IBV_WR_ATOMIC_FETCH_AND_ADD,
		IBV_SEND_FENCE, IBV_SEND_SIGNALED, IBV_SEND_SOLICITED, IBV_SEND_INLINE,
		IBV_WC_SEND, IBV_WC_RDMA_WRITE, IBV_WC_RDMA_READ, IBV_WC_COMP_SWAP, IBV_WC_FETCH_ADD, IBV_WC_RECV,
		IBV_WC_RECV_RDMA_WITH_IMM,
		IBV_WC_SUCCESS, IBV_WC_WR_FLUSH_ERR, IBV_WC_REM_ACCESS_ERR, IBV_WC_RETRY_EXC_ERR, IBV_WC_GENERAL_ERR,
		RDMA_CM_EVENT_ADDR_RESOLVED, RDMA_CM_EVENT_CONNECT_REQUEST, RDMA_CM_EVENT_REJECTED,
		RDMA_CM_EVENT_ESTABLISHED, RDMA_CM_EVENT_DISCONNECTED, RDMA_CM_EVENT_TIMEWAIT_EXIT,
	};
	return i < (int)(sizeof v / sizeof v[0]) ? v[i] : -1;
}
*/
import "C"

import (
	"net/netip"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

type (
	ctxH = *C.struct_ibv_context
	pdH  = *C.struct_ibv_pd
	mrH  = *C.struct_ibv_mr
	cqH  = *C.struct_ibv_cq
	chH  = *C.struct_ibv_comp_channel
	qpH  = *C.struct_ibv_qp
	ecH  = *C.struct_rdma_event_channel
	idH  = *C.struct_rdma_cm_id
)

func errnoOf(rc C.int) syscall.Errno { return syscall.Errno(rc) }

func callErr(op string, errno syscall.Errno) error {
	return &Error{Op: op, Errno: errno}
}

const maxDevices = 64

func devices() ([]Device, error) {
	var out [maxDevices]C.struct_dtk_dev
	var n C.int
	if rc := C.dtk_devices(&out[0], maxDevices, &n); rc != 0 {
		if rc == C.ENOSYS {
			// No RDMA support in the kernel (no uverbs): no device.
			return nil, &Error{Op: "ibv_get_device_list", Errno: errnoOf(rc), Err: ErrNoDevice}
		}
		return nil, callErr("ibv_get_device_list", errnoOf(rc))
	}
	k := min(int(n), maxDevices)
	devs := make([]Device, k)
	for i := range k {
		devs[i] = Device{Name: C.GoString(&out[i].name[0]), GUID: uint64(out[i].guid)}
	}
	return devs, nil
}

func openDevice(name string) (ctxH, error) {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	var h ctxH
	if rc := C.dtk_open(cs, &h); rc != 0 {
		if rc == C.ENODEV {
			return nil, &Error{Op: "ibv_open_device", Err: ErrNoDevice}
		}
		return nil, callErr("ibv_open_device", errnoOf(rc))
	}
	return h, nil
}

func closeDevice(h ctxH) error {
	if rc := C.ibv_close_device(h); rc != 0 {
		return callErr("ibv_close_device", syscall.Errno(-rc))
	}
	return nil
}

func queryPort(h ctxH, port uint8) (PortAttr, error) {
	var st, maxMTU, actMTU, ll C.uint8_t
	var gids C.int
	if rc := C.dtk_query_port(h, C.uint8_t(port), &st, &maxMTU, &actMTU, &gids, &ll); rc != 0 {
		return PortAttr{}, callErr("ibv_query_port", errnoOf(rc))
	}
	return PortAttr{State: uint8(st), MaxMTU: MTU(maxMTU), ActiveMTU: MTU(actMTU), GIDTblLen: int(gids), LinkLayer: uint8(ll)}, nil
}

func queryGID(h ctxH, port uint8, index int) (GID, error) {
	var g [16]C.uint8_t
	if rc := C.dtk_query_gid(h, C.uint8_t(port), C.int(index), &g[0]); rc != 0 {
		return GID{}, callErr("ibv_query_gid", errnoOf(rc))
	}
	var out GID
	for i := range out {
		out[i] = byte(g[i])
	}
	return out, nil
}

func allocPD(h ctxH) (pdH, error) {
	var pd pdH
	if rc := C.dtk_alloc_pd(h, &pd); rc != 0 {
		return nil, callErr("ibv_alloc_pd", errnoOf(rc))
	}
	return pd, nil
}

func deallocPD(h pdH) error {
	if rc := C.ibv_dealloc_pd(h); rc != 0 {
		return callErr("ibv_dealloc_pd", syscall.Errno(rc))
	}
	return nil
}

func regMR(pd pdH, addr uintptr, n int, a Access) (mrH, uint32, uint32, error) {
	var mr mrH
	if rc := C.dtk_reg_mr(pd, C.uintptr_t(addr), C.size_t(n), C.int(a), &mr); rc != 0 {
		return nil, 0, 0, callErr("ibv_reg_mr", errnoOf(rc))
	}
	return mr, uint32(mr.lkey), uint32(mr.rkey), nil
}

func deregMR(h mrH) error {
	if rc := C.ibv_dereg_mr(h); rc != 0 {
		return callErr("ibv_dereg_mr", syscall.Errno(rc))
	}
	return nil
}

func createCompChannel(h ctxH) (chH, int, error) {
	var ch chH
	if rc := C.dtk_create_comp_channel(h, &ch); rc != 0 {
		return nil, -1, callErr("ibv_create_comp_channel", errnoOf(rc))
	}
	return ch, int(ch.fd), nil
}

func destroyCompChannel(h chH) error {
	if rc := C.ibv_destroy_comp_channel(h); rc != 0 {
		return callErr("ibv_destroy_comp_channel", syscall.Errno(rc))
	}
	return nil
}

func getCQEvent(h chH) (cqH, error) {
	var cq cqH
	if rc := C.dtk_get_cq_event(h, &cq); rc != 0 {
		return nil, callErr("ibv_get_cq_event", errnoOf(rc))
	}
	return cq, nil
}

// cqBuf is the C memory ibv_poll_cq fills and the flattened copy read back.
type cqBuf struct {
	raw  *C.struct_ibv_wc
	flat *C.struct_dtk_wc
	n    int
}

func createCQ(h ctxH, cqe int, ch chH) (cqH, cqBuf, error) {
	var cq cqH
	if rc := C.dtk_create_cq(h, C.int(cqe), ch, &cq); rc != 0 {
		return nil, cqBuf{}, callErr("ibv_create_cq", errnoOf(rc))
	}
	const n = 32
	b := cqBuf{
		raw:  (*C.struct_ibv_wc)(C.calloc(n, C.size_t(unsafe.Sizeof(C.struct_ibv_wc{})))),
		flat: (*C.struct_dtk_wc)(C.calloc(n, C.size_t(unsafe.Sizeof(C.struct_dtk_wc{})))),
		n:    n,
	}
	return cq, b, nil
}

func destroyCQ(h cqH, b cqBuf) error {
	C.free(unsafe.Pointer(b.raw))
	C.free(unsafe.Pointer(b.flat))
	if rc := C.ibv_destroy_cq(h); rc != 0 {
		return callErr("ibv_destroy_cq", syscall.Errno(rc))
	}
	return nil
}

func reqNotify(h cqH, solicited bool) error {
	s := C.int(0)
	if solicited {
		s = 1
	}
	if rc := C.dtk_req_notify(h, s); rc != 0 {
		return callErr("ibv_req_notify_cq", syscall.Errno(rc))
	}
	return nil
}

func pollCQ(h cqH, b cqBuf, wcs []WC) (int, error) {
	n := min(len(wcs), b.n)
	k := int(C.dtk_poll(h, C.int(n), b.raw, b.flat))
	if k < 0 {
		return 0, callErr("ibv_poll_cq", syscall.Errno(-k))
	}
	flat := unsafe.Slice(b.flat, b.n)
	for i := range k {
		f := &flat[i]
		wcs[i] = WC{
			ID: uint64(f.wr_id), Status: WCStatus(f.status), Opcode: WCOpcode(f.opcode),
			VendorErr: uint32(f.vendor_err), ByteLen: uint32(f.byte_len), Imm: uint32(f.imm),
			HasImm: f.flags&C.IBV_WC_WITH_IMM != 0, QPN: uint32(f.qp_num), SrcQPN: uint32(f.src_qp),
		}
	}
	return k, nil
}

func cqHandle(cq *CQ) cqH {
	if cq == nil {
		return nil
	}
	return cq.h
}

func b2i(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

func createQP(pd pdH, a QPInitAttr) (qpH, uint32, error) {
	var qp qpH
	var qpn C.uint32_t
	rc := C.dtk_create_qp(pd, cqHandle(a.SendCQ), cqHandle(a.RecvCQ), C.uint32_t(a.MaxSendWR), C.uint32_t(a.MaxRecvWR),
		C.uint32_t(a.MaxSendSGE), C.uint32_t(a.MaxRecvSGE), C.uint32_t(a.MaxInlineData), b2i(a.SigAll), &qp, &qpn)
	if rc != 0 {
		return nil, 0, callErr("ibv_create_qp", errnoOf(rc))
	}
	return qp, uint32(qpn), nil
}

func destroyQP(h qpH) error {
	if rc := C.ibv_destroy_qp(h); rc != 0 {
		return callErr("ibv_destroy_qp", syscall.Errno(rc))
	}
	return nil
}

func modifyInit(h qpH, port uint8, a Access) error {
	if rc := C.dtk_qp_init(h, C.uint8_t(port), C.int(a)); rc != 0 {
		return callErr("ibv_modify_qp", syscall.Errno(rc))
	}
	return nil
}

func modifyRTR(h qpH, a RTRAttr) error {
	dgid := a.DGID
	rc := C.dtk_qp_rtr(h, C.uint32_t(a.DestQPN), C.uint32_t(a.RQPSN), C.int(a.PathMTU), (*C.uint8_t)(unsafe.Pointer(&dgid[0])),
		C.uint8_t(a.SGIDIndex), C.uint8_t(a.HopLimit), C.uint8_t(a.Port), C.uint8_t(a.MaxDestRdAtomic), C.uint8_t(a.MinRNRTimer))
	if rc != 0 {
		return callErr("ibv_modify_qp", syscall.Errno(rc))
	}
	return nil
}

func modifyRTS(h qpH, a RTSAttr) error {
	rc := C.dtk_qp_rts(h, C.uint32_t(a.SQPSN), C.uint8_t(a.Timeout), C.uint8_t(a.RetryCount), C.uint8_t(a.RNRRetry), C.uint8_t(a.MaxRdAtomic))
	if rc != 0 {
		return callErr("ibv_modify_qp", syscall.Errno(rc))
	}
	return nil
}

func modifyState(h qpH, s QPState) error {
	if rc := C.dtk_qp_state(h, C.int(s)); rc != 0 {
		return callErr("ibv_modify_qp", syscall.Errno(rc))
	}
	return nil
}

func queryQP(h qpH) (QPAttr, error) {
	var st, mtu C.int
	var rq, sq, dq C.uint32_t
	if rc := C.dtk_query_qp(h, &st, &rq, &sq, &dq, &mtu); rc != 0 {
		return QPAttr{}, callErr("ibv_query_qp", syscall.Errno(rc))
	}
	return QPAttr{State: QPState(st), RQPSN: uint32(rq), SQPSN: uint32(sq), DestQPN: uint32(dq), PathMTU: MTU(mtu)}, nil
}

func postSend(h qpH, wr *SendWR, laddr uint64, lkey uint32) error {
	rc := C.dtk_post_send(h, C.uint64_t(wr.ID), C.int(wr.Opcode), C.uint(wr.Flags), C.uint64_t(laddr), C.uint32_t(wr.Local.Length),
		C.uint32_t(lkey), C.uint64_t(wr.RemoteAddr), C.uint32_t(wr.RKey), C.uint32_t(wr.Imm), C.uint64_t(wr.CompareAdd), C.uint64_t(wr.Swap))
	if rc != 0 {
		return callErr("ibv_post_send", syscall.Errno(rc))
	}
	return nil
}

func postRecv(h qpH, id uint64, laddr uint64, n int, lkey uint32) error {
	if rc := C.dtk_post_recv(h, C.uint64_t(id), C.uint64_t(laddr), C.uint32_t(n), C.uint32_t(lkey)); rc != 0 {
		return callErr("ibv_post_recv", syscall.Errno(rc))
	}
	return nil
}

// RDMA CM.

func createEventChannel() (ecH, int, error) {
	var ch ecH
	if rc := C.dtk_create_event_channel(&ch); rc != 0 {
		return nil, -1, callErr("rdma_create_event_channel", errnoOf(rc))
	}
	return ch, int(ch.fd), nil
}

func destroyEventChannel(h ecH) { C.rdma_destroy_event_channel(h) }

func createID(h ecH) (idH, error) {
	var id idH
	if rc := C.dtk_create_id(h, &id); rc != 0 {
		return nil, callErr("rdma_create_id", errnoOf(rc))
	}
	return id, nil
}

func destroyID(h idH) error {
	if rc := C.dtk_destroy_id(h); rc != 0 {
		return callErr("rdma_destroy_id", errnoOf(rc))
	}
	return nil
}

func ipBytes(a netip.Addr) (v6 C.int, b [16]C.uint8_t) {
	if a.Is4() {
		a4 := a.As4()
		for i, x := range a4 {
			b[i] = C.uint8_t(x)
		}
		return 0, b
	}
	a16 := a.As16()
	for i, x := range a16 {
		b[i] = C.uint8_t(x)
	}
	return 1, b
}

func bindAddr(h idH, ap netip.AddrPort) error {
	v6, ip := ipBytes(ap.Addr())
	if rc := C.dtk_bind(h, v6, &ip[0], C.uint16_t(ap.Port())); rc != 0 {
		return callErr("rdma_bind_addr", errnoOf(rc))
	}
	return nil
}

func listen(h idH, backlog int) error {
	if rc := C.dtk_listen(h, C.int(backlog)); rc != 0 {
		return callErr("rdma_listen", errnoOf(rc))
	}
	return nil
}

func resolveAddr(h idH, src netip.Addr, dst netip.AddrPort, ms int) error {
	v6, dip := ipBytes(dst.Addr())
	_, sip := ipBytes(src)
	rc := C.dtk_resolve_addr(h, b2i(src.IsValid()), v6, &sip[0], &dip[0], C.uint16_t(dst.Port()), C.int(ms))
	if rc != 0 {
		return callErr("rdma_resolve_addr", errnoOf(rc))
	}
	return nil
}

func resolveRoute(h idH, ms int) error {
	if rc := C.dtk_resolve_route(h, C.int(ms)); rc != 0 {
		return callErr("rdma_resolve_route", errnoOf(rc))
	}
	return nil
}

func cmCreateQP(h idH, pd pdH, a QPInitAttr) (qpH, uint32, error) {
	var qp qpH
	var qpn C.uint32_t
	rc := C.dtk_rdma_create_qp(h, pd, cqHandle(a.SendCQ), cqHandle(a.RecvCQ), C.uint32_t(a.MaxSendWR), C.uint32_t(a.MaxRecvWR),
		C.uint32_t(a.MaxSendSGE), C.uint32_t(a.MaxRecvSGE), C.uint32_t(a.MaxInlineData), b2i(a.SigAll), &qp, &qpn)
	if rc != 0 {
		return nil, 0, callErr("rdma_create_qp", errnoOf(rc))
	}
	return qp, uint32(qpn), nil
}

// withPrivate calls f with p copied to C memory, freed after.
func withPrivate(p []byte, f func(unsafe.Pointer, C.uint8_t) C.int) C.int {
	if len(p) == 0 {
		return f(nil, 0)
	}
	cp := C.CBytes(p)
	defer C.free(cp)
	return f(cp, C.uint8_t(len(p)))
}

func connect(h idH, p ConnParam) error {
	rc := withPrivate(p.PrivateData, func(d unsafe.Pointer, n C.uint8_t) C.int {
		return C.dtk_connect(h, d, n, C.uint8_t(p.ResponderResources), C.uint8_t(p.InitiatorDepth), C.uint8_t(p.RetryCount), C.uint8_t(p.RNRRetryCount))
	})
	if rc != 0 {
		return callErr("rdma_connect", errnoOf(rc))
	}
	return nil
}

func accept(h idH, p ConnParam) error {
	rc := withPrivate(p.PrivateData, func(d unsafe.Pointer, n C.uint8_t) C.int {
		return C.dtk_accept(h, d, n, C.uint8_t(p.ResponderResources), C.uint8_t(p.InitiatorDepth), C.uint8_t(p.RetryCount), C.uint8_t(p.RNRRetryCount))
	})
	if rc != 0 {
		return callErr("rdma_accept", errnoOf(rc))
	}
	return nil
}

func reject(h idH, pdata []byte) error {
	rc := withPrivate(pdata, func(d unsafe.Pointer, n C.uint8_t) C.int { return C.dtk_reject(h, d, n) })
	if rc != 0 {
		return callErr("rdma_reject", errnoOf(rc))
	}
	return nil
}

func disconnect(h idH) error {
	if rc := C.dtk_disconnect(h); rc != 0 {
		return callErr("rdma_disconnect", errnoOf(rc))
	}
	return nil
}

type rawEvent struct {
	typ, status int
	id, listen  idH
	pdata       []byte
}

func getEvent(h ecH) (rawEvent, error) {
	var ev C.struct_dtk_event
	if rc := C.dtk_get_event(h, &ev); rc != 0 {
		return rawEvent{}, callErr("rdma_get_cm_event", errnoOf(rc))
	}
	r := rawEvent{typ: int(ev._type), status: int(ev.status), id: ev.id, listen: ev.listen_id}
	if ev.plen > 0 {
		r.pdata = C.GoBytes(unsafe.Pointer(&ev.pdata[0]), ev.plen)
	}
	return r, nil
}

func idVerbs(h idH) ctxH { return C.dtk_id_verbs(h) }
func idPort(h idH) uint8 { return uint8(C.dtk_id_port(h)) }

func idAddr(h idH, peer bool) netip.AddrPort {
	var ip [16]C.uint8_t
	var port C.uint16_t
	var n C.int
	if peer {
		n = C.dtk_peer_addr(h, &ip[0], &port)
	} else {
		n = C.dtk_local_addr(h, &ip[0], &port)
	}
	var b [16]byte
	for i := range b {
		b[i] = byte(ip[i])
	}
	switch n {
	case 4:
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[:4])), uint16(port))
	case 16:
		return netip.AddrPortFrom(netip.AddrFrom16(b).Unmap(), uint16(port))
	}
	return netip.AddrPort{}
}

// cConstants returns rdma-core's values for the constants TestConstantsMatchC
// compares with the package's, in dtk_const's order.
func cConstants() []int {
	var v []int
	for i := 0; ; i++ {
		c := int(C.dtk_const(C.int(i)))
		if c < 0 {
			return v
		}
		v = append(v, c)
	}
}

// waitFD polls fd for input up to timeout (negative: forever).
func waitFD(fd int, timeout time.Duration, op string) error {
	ms := -1
	if timeout >= 0 {
		ms = int(timeout.Milliseconds())
	}
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, ms)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return &Error{Op: op, Errno: err.(unix.Errno)}
		}
		if n == 0 {
			return opErr(op, ErrTimeout)
		}
		return nil
	}
}
