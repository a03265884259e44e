/*
 * GPU segments of the agent (seg.h, kind MC_SEG_GPU): device memory of one device of the
 * device seam (dev/dev.h), CUDA or the test device. Not addressable from the host: span
 * answers NULL, and bytes go in and out by copies on the segment's own stream, waited for
 * before write and read return. Local readers cannot map it (ro_fd is -1).
 *
 * One thread, like the agent.
 */
#ifndef MC_AGENT_SEG_GPU_H
#define MC_AGENT_SEG_GPU_H

#include <stddef.h>
#include <stdint.h>

#include "daemon/agent/seg.h"
#include "daemon/agent/gpu_cfg.h"
#include "dev/dev.h"

/*
 * A GPU segment of size bytes on dev (which must outlive it). Errors: MC_ERR_NOMEM (device
 * memory), MC_ERR_IO.
 */
int mc_seg_gpu_create(struct mc_dev *dev, uint64_t size, struct mc_seg **s_p);

/* The device address of [off, off + len) of a GPU segment, or 0 (out of range). */
uint64_t mc_seg_gpu_addr(struct mc_seg *s, uint64_t off, uint64_t len);

#endif /* MC_AGENT_SEG_GPU_H */
