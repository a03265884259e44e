/* The listener of a worker (ucx.h, listen_ip): peers connect by socket address through UCX's
 * connection manager; ucx.c's handler creates the endpoint each of them opens. Nothing here
 * calls back into ucx.c. */
#include <string.h>

#include "mc/mc_status.h"
#include "ucx_backend/ucx_int.h"

int ucx_listen_on(struct mc_ucx *u, const char *ip, ucp_listener_conn_callback_t conn_cb)
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
