/*
 * The ready file of a daemon: written once it serves (scripts and tests wait for it instead
 * of sleeping), atomically by rename so a reader never sees it half-written, and removed
 * when the daemon stops.
 */
#ifndef MC_COMMON_READY_H
#define MC_COMMON_READY_H

/* Write "<pid> <line>\n" ("<pid>\n" when line is NULL) to path.tmp.<pid>, then rename it
 * to path. Returns 0, MC_ERR_INVALID (path too long) or MC_ERR_IO. */
int mc_ready_file_write(const char *path, const char *line);

/* Remove path on a clean exit, if it is still the file this process wrote (it names our
 * pid), so that nothing says "ready" for a daemon that is gone. */
void mc_ready_file_remove(const char *path);

#endif /* MC_COMMON_READY_H */
