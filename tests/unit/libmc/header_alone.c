/*
 * Compiles only if <mc/mc.h> is self-contained: it is the first and only include, and
 * the code below uses what it must provide by itself (types, macros, <stddef.h> and
 * <stdint.h> names, the status codes).
 */
#include <mc/mc.h>

int main(void)
{
    mc_put_opts_t o = MC_PUT_OPTS_INIT;
    mc_obj_info_t info = {0, 0, 0, 0, 0, {0, 0, 0, 0}};
    size_t n = sizeof(mc_client_t *) + sizeof(mc_op_t *) + MC_KEY_MAX;
    uint32_t bits = o.flags | info.flags | (uint32_t)MC_INPROGRESS;

    return bits == 1u && n > 0 && mc_version() != NULL && mc_strerror(MC_ERR_INVALID) != NULL
               ? 0
               : 1;
}
