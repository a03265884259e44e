/*
 * Adaptive waiting: the node page and the agent's run-delay verdict (spin.h).
 */
#include "daemon/agent/spin.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include <mc/mc_status.h>

#include "shm/memfd.h"

#define SPIN_WINDOW_NS    10000000u /* 10 ms */
#define BUSY_DELAY_PCT    25u       /* a window waiting more than this: busy */
#define QUIET_DELAY_PCT   5u        /* ... less than this: counts towards quiet */
#define QUIET_WINDOWS_MIN 8u        /* 80 ms */
#define QUIET_WINDOWS_MAX 128u      /* 1.3 s */
#define FLAP_NS           1000000000u /* busy again within this of quiet: wait longer */

int agent_spin_init(struct agent_spin *s)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    void *p;
    int err;

    *s = (struct agent_spin){.fd = -1, .stat_fd = -1, .quiet_needed = QUIET_WINDOWS_MIN};
    err = mc_shm_memfd_create("mc-node", MC_SHM_NODE_SIZE, false, &s->fd, NULL);
    if (err == 0)
        err = mc_shm_memfd_seal_size(s->fd);
    if (err == 0)
        err = mc_shm_memfd_seal_seals(s->fd);
    if (err == 0)
        err = mc_shm_map(s->fd, MC_SHM_NODE_SIZE, true, &p);
    if (err != 0) {
        agent_spin_cleanup(s);
        return err;
    }
    s->node = p;
    s->node->magic = MC_SHM_NODE_MAGIC;
    atomic_store(&s->node->cores, cores > 0 ? (uint32_t)cores : 1);
    s->stat_fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
    return s->stat_fd >= 0 ? 0 : MC_ERR_IO;
}

void agent_spin_cleanup(struct agent_spin *s)
{
    if (s->node != NULL)
        munmap(s->node, MC_SHM_NODE_SIZE);
    if (s->fd >= 0)
        close(s->fd);
    if (s->stat_fd >= 0)
        close(s->stat_fd);
    *s = (struct agent_spin){.fd = -1, .stat_fd = -1};
}

/* The loop thread's run delay so far (ns), or false. */
static bool run_delay(int fd, uint64_t *ns)
{
    unsigned long long run, delay;
    char buf[96];
    ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);

    if (n <= 0)
        return false;
    buf[n] = '\0';
    if (sscanf(buf, "%llu %llu", &run, &delay) != 2)
        return false;
    *ns = delay;
    return true;
}

void agent_spin_sample(struct agent_spin *s, uint64_t now_ns)
{
    uint64_t delay;

    if (s->stat_fd < 0 || s->node == NULL || now_ns - s->win_start_ns < SPIN_WINDOW_NS)
        return;
    if (run_delay(s->stat_fd, &delay))
        agent_spin_window(s, now_ns, delay);
}

void agent_spin_window(struct agent_spin *s, uint64_t now_ns, uint64_t delay)
{
    uint64_t pct;
    bool busy;

    if (s->node == NULL || now_ns <= s->win_start_ns)
        return;
    if (s->win_start_ns == 0 || delay < s->win_delay_ns) {
        s->win_start_ns = now_ns;
        s->win_delay_ns = delay;
        return;
    }
    pct = (delay - s->win_delay_ns) * 100 / (now_ns - s->win_start_ns);
    s->win_start_ns = now_ns;
    s->win_delay_ns = delay;
    busy = atomic_load_explicit(&s->node->busy, memory_order_relaxed) != 0;
    if (!busy && pct > BUSY_DELAY_PCT) {
        /* busy again soon after it went quiet: the quiet was our own polling's absence */
        if (now_ns - s->quiet_since_ns < FLAP_NS && s->quiet_needed < QUIET_WINDOWS_MAX)
            s->quiet_needed *= 2;
        else if (now_ns - s->quiet_since_ns >= 2 * FLAP_NS)
            s->quiet_needed = QUIET_WINDOWS_MIN;
        s->busy_since_ns = now_ns;
        s->quiet_windows = 0;
        s->flips++;
        atomic_store_explicit(&s->node->busy, 1, memory_order_relaxed);
    } else if (busy) {
        s->quiet_windows = pct < QUIET_DELAY_PCT ? s->quiet_windows + 1 : 0;
        if (s->quiet_windows >= s->quiet_needed) {
            s->quiet_since_ns = now_ns;
            s->flips++;
            atomic_store_explicit(&s->node->busy, 0, memory_order_relaxed);
        }
    }
}

bool agent_spin_busy(const struct agent_spin *s)
{
    return s->node != NULL && atomic_load_explicit(&s->node->busy, memory_order_relaxed) != 0;
}

void agent_spin_client_gone(struct agent_spin *s, bool was_polling)
{
    uint32_t n;

    if (s->node == NULL || !was_polling)
        return;
    n = atomic_load(&s->node->spinners);
    while (n > 0 && !atomic_compare_exchange_weak(&s->node->spinners, &n, n - 1))
        ;
}

void agent_spin_repair(struct agent_spin *s, uint32_t polling, uint32_t clients)
{
    uint32_t n;

    if (s->node == NULL)
        return;
    n = atomic_load(&s->node->spinners);
    if (n > clients)
        atomic_compare_exchange_strong(&s->node->spinners, &n, polling);
}
