/*
 * The agent's GPU segments (--gpu DEV:SIZE, docs/gpu.md): the devices opened, a segment on
 * each (seg_gpu.h), mounted at the master as MC_SEG_GPU for the default tenant. Placement
 * puts no replica there unless a put names the tier.
 */
#ifndef MC_AGENT_GPU_H
#define MC_AGENT_GPU_H

struct mc_agent;
struct mc_master;

/*
 * Open the devices of spec (the `gpu` setting) and a segment on each. A device that is not
 * there ("no device") fails the start: a node configured with GPU memory and none to give
 * must not come up as something else. Errors: MC_ERR_INVALID, MC_ERR_UNAVAILABLE,
 * MC_ERR_NOMEM, MC_ERR_IO (logged here).
 */
int agent_gpus_create(struct mc_agent *a, const char *spec);
/* Standalone: mount them at the in-process master. Errors: the master's (logged). */
int agent_gpus_mount_local(struct mc_agent *a, struct mc_master *m);
/*
 * Once the mode made a->rio: put the GPU segments' replica I/O in front of it. A put's
 * replica in our GPU segment has no window in place (span is NULL), so put.c sends it the
 * image like a remote replica; a GET's replica there is read into the reader's landing
 * segment like a remote one. Both are copies on the segment's stream, waited for, and
 * completed before the call returns; everything else goes on to what was there. A
 * standalone agent gets landing segments here (cluster mode has them). Errors: MC_ERR_NOMEM.
 */
int agent_gpus_rio_wrap(struct mc_agent *a);
/* After the last copy that touches them: clients and transfers are gone. */
void agent_gpus_destroy(struct mc_agent *a);

#endif /* MC_AGENT_GPU_H */
