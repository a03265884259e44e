/*
 * The versions of disk records mc-master freed whose DROP no owner has answered yet
 * (docs/disk.md, "Frees and erases"): an owner answers a DROP of a disk record only once
 * its tombstone is durable, so until then the record may still be on the disk, and the
 * owner's restart (kill -9, the node declared dead, its DROPs forgotten with its segments)
 * would report it again. A RESTORE of a disk record of a version remembered here is refused
 * (the owner then erases it). A version names one put, never reused, so remembering it
 * longer than needed refuses nothing that should stand.
 *
 * Bounded: DROPMEMO_MAX blocks; past that the oldest are forgotten (counted). Lives as
 * long as the mc-master process: a master that restarted knows none of them (docs/disk.md
 * says what then). One thread.
 */
#ifndef MC_MCMASTER_DROPMEMO_H
#define MC_MCMASTER_DROPMEMO_H

#include <stdbool.h>
#include <stdint.h>

#define DROPMEMO_MAX 65536u

struct mc_dropmemo;

int mc_dropmemo_create(struct mc_dropmemo **m_p);
void mc_dropmemo_destroy(struct mc_dropmemo *m); /* accepts NULL */
/* Remember a block of version v (> 0) freed from a disk, its DROP not yet answered. A
 * version may have blocks on several disks: each is counted. */
void mc_dropmemo_add(struct mc_dropmemo *m, uint64_t v);
/* One block's DROP was answered (its owner's tombstone is durable): v is forgotten once
 * every block of it was answered (review D3: one owner's answer must not clear another's). */
void mc_dropmemo_del(struct mc_dropmemo *m, uint64_t v);
bool mc_dropmemo_has(const struct mc_dropmemo *m, uint64_t v);
/* One block the directory handed over (mc_master_drops_take), of a disk segment or not:
 * remembered when it is a disk block freed (once: a FREED drop after_retire was remembered
 * by its RETIRED one) or retired (its block still allocated, the version unpublished while
 * a reader held it, or its offload copy under way: the owner's restart must not publish it
 * again). Returns whether a DROP is to be sent: a RETIRED one only for a disk block, and as
 * a retired DROP (MC_PROTO_DROP_F_RETIRED: the owner marks the record removed on its disk,
 * and neither forgets nor erases it while a reader or a write still uses it); its answer
 * forgets nothing here (the later FREED one's does). */
struct mc_master_drop;
bool mc_dropmemo_note(struct mc_dropmemo *m, const struct mc_master_drop *d, bool disk);
/* A RESTORE batch: the items of a disk segment (is_disk) whose version is remembered are
 * taken out (refused[i] set), the others moved to the front in order; returns how many
 * remain. merge puts the remaining items' results (results[0..remaining)) back in the
 * batch's order and gives the refused ones `refusal`. */
struct mc_master_restore_req;
uint32_t mc_dropmemo_filter(const struct mc_dropmemo *m, struct mc_master_restore_req *reqs,
                            uint32_t n, bool (*is_disk)(void *ctx, uint32_t seg), void *ctx,
                            bool *refused);
void mc_dropmemo_merge(int *results, uint32_t n, const bool *refused, int refusal);
uint64_t mc_dropmemo_count(const struct mc_dropmemo *m);
uint64_t mc_dropmemo_forgotten(const struct mc_dropmemo *m); /* evicted by the bound */

#endif /* MC_MCMASTER_DROPMEMO_H */
