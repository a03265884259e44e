/*
 * libmc's symbol visibility: libmc is built with -fvisibility=hidden (and a version
 * script), so only the definitions marked MC_EXPORT (the public API of <mc/mc.h>) leave
 * the shared object. Internal header; never installed.
 */
#ifndef MC_LIBMC_EXPORT_H
#define MC_LIBMC_EXPORT_H

#define MC_EXPORT __attribute__((visibility("default")))

#endif /* MC_LIBMC_EXPORT_H */
