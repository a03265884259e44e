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
/* After the last copy that touches them: clients and transfers are gone. */
void agent_gpus_destroy(struct mc_agent *a);

#endif /* MC_AGENT_GPU_H */
