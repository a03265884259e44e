/* Compiles only if <mc/mc_status.h> is self-contained: the first and only include. */
#include <mc/mc_status.h>

int main(void)
{
    const char *(*strerror_fn)(int) = mc_strerror;

    (void)strerror_fn;
    return MC_OK + (MC_ERR_INVALID < 0 ? 0 : 1);
}
