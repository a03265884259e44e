/* Compiles only if <mc/mc_limits.h> is self-contained: the first and only include. */
#include <mc/mc_limits.h>

int main(void)
{
    unsigned long long ttl = MC_TTL_MAX_MS;

    return MC_KEY_MAX == 512 && MC_REPLICAS_MAX > 0 && ttl > 0 &&
                   (MC_PUT_FLAGS_ALL & MC_PUT_UPSERT) != 0
               ? 0
               : 1;
}
