/* The listener of a worker (ucx.h, listen_ip): peers connect by socket address through UCX's
 * connection manager, and each endpoint they open is created here, by us. */
#include <string.h>

#include "mc/mc_status.h"
#include "ucx_backend/ucx_int.h"

/* A peer connects to our listener (from progress): the endpoint is created here, by us, with
 * peer error handling, so UCX reports its failure and leaves freeing it to us (ucx.h,
 * listen_ip). It is an accepted endpoint in every other respect: unauthenticated, no
 * session until its HELLO. */
static void conn_cb(ucp_conn_request_h req, void *arg)
{
    struct mc_ucx *u = arg;
    struct mc_ucx_ep *ep = ucx_ep_new(u, NULL, true);
    ucp_ep_params_t p;

    if (ep == NULL) {
        u->st.conns_refused++;
        (void)ucp_listener_reject(u->listener, req);
        return;
    }
    ep->created = true;
    memset(&p, 0, sizeof(p));
    p.field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                   UCP_EP_PARAM_FIELD_ERR_HANDLER;
    p.conn_request = req;
    p.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    p.err_handler.cb = ucx_ep_err_cb;
    p.err_handler.arg = ep;
    if (ucp_ep_create(u->worker, &p, &ep->uep) != UCS_OK) {
        u->st.conns_refused++; /* UCX consumed the request either way */
        ucx_ep_free(ep);
        return;
    }
    ucx_ep_hash_add(ep);
    u->st.eps_accepted++;
}

int ucx_listen_on(struct mc_ucx *u, const char *ip)
{
    struct sockaddr_storage ss;
    socklen_t sslen;
    ucp_listener_params_t lp;
    ucp_listener_attr_t la;

    if (mc_saddr_from_ip(ip, 0, &ss, &sslen) != 0)
        return MC_ERR_INVALID;
    memset(&lp, 0, sizeof(lp));
    lp.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
    lp.sockaddr.addr = (const struct sockaddr *)&ss;
    lp.sockaddr.addrlen = sslen;
    lp.conn_handler.cb = conn_cb;
    lp.conn_handler.arg = u;
    if (ucp_listener_create(u->worker, &lp, &u->listener) != UCS_OK) {
        u->listener = NULL;
        return MC_ERR_IO;
    }
    memset(&la, 0, sizeof(la));
    la.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
    if (ucp_listener_query(u->listener, &la) != UCS_OK ||
        (u->saddr_len = mc_saddr_pack((const struct sockaddr *)&la.sockaddr, u->saddr,
                                      sizeof(u->saddr))) == 0) {
        ucp_listener_destroy(u->listener);
        u->listener = NULL;
        return MC_ERR_IO;
    }
    return 0;
}
