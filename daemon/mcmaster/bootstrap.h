/*
 * mc-master's TCP bootstrap: the message format of daemon/common/bootstrap.h, which
 * mc-agent's cluster listener shares. These names stay for the tests and tools that
 * speak it directly.
 */
#ifndef MC_MCMASTER_BOOTSTRAP_H
#define MC_MCMASTER_BOOTSTRAP_H

#include "daemon/common/bootstrap.h"

#define MC_MCMASTER_BOOT_MAGIC    MC_BOOT_MAGIC
#define MC_MCMASTER_BOOT_HDR      MC_BOOT_HDR
#define MC_MCMASTER_BOOT_ADDR_MAX MC_BOOT_ADDR_MAX

#endif /* MC_MCMASTER_BOOTSTRAP_H */
