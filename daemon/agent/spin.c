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

#define SPIN_WINDOW_NS   10000000u /* 10 ms */
#define HOT_DELAY_PCT    50u       /* polling, a window waiting more: probe sleeping now */
#define QUIET_DELAY_PCT  5u        /* sleeping, QUIET_WINDOWS windows waiting less: probe */
#define QUIET_WINDOWS    8u
#define TALLY_MIN        3u        /* windows of the current mode before a probe */
#define PROBE_WINDOWS    4u        /* counted windows of a probe (after one to settle) */
#define EXPLOIT_MIN      30u       /* 0.3 s between probes ... */
#define EXPLOIT_MAX      500u      /* ... doubling up to 5 s while they lose */
#define LOAD_MIN         10u       /* requests per window below which there is nothing to
                                      compare: the hints decide */
#define WIN_PCT          105u      /* a probe wins with 5 % more requests per window */

static void set_busy(struct agent_spin *s, bool busy)
{
    atomic_store_explicit(&s->node->busy, busy ? 1 : 0, memory_order_relaxed);
}

int agent_spin_init(struct agent_spin *s, bool adaptive)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    void *p;
    int err;

    *s = (struct agent_spin){.fd = -1, .stat_fd = -1, .exploit_windows = EXPLOIT_MIN};
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
    s->cores = cores > 0 ? (uint32_t)cores : 1;
    atomic_store(&s->node->cores, s->cores);
    if (!adaptive)
        return 0; /* never busy: everyone polls as configured */
    s->stat_fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
    if (s->stat_fd < 0)
        return MC_ERR_IO;
    /* sleeping until polling has shown it pays: on a quiet host that takes ~0.1 s, while
     * polling on an oversubscribed one costs milliseconds per request from the start */
    set_busy(s, true);
    return 0;
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

void agent_spin_sample(struct agent_spin *s, uint64_t now_ns, uint64_t ops)
{
    uint64_t delay;

    if (s->stat_fd < 0 || s->node == NULL || now_ns - s->win_start_ns < SPIN_WINDOW_NS)
        return;
    if (run_delay(s->stat_fd, &delay))
        agent_spin_window(s, now_ns, delay, ops);
}

/* The mode changed or was confirmed: count afresh. */
static void phase_reset(struct agent_spin *s)
{
    s->tally_ops = 0;
    s->tally_windows = 0;
    s->phase_windows = 0;
    s->quiet_windows = 0;
}

static void probe_end(struct agent_spin *s)
{
    bool busy = agent_spin_busy(s);

    /* per window: probe_ops / probe_windows against tally_ops / tally_windows */
    if (s->probe_ops * s->tally_windows * 100 >
        s->tally_ops * s->probe_windows * WIN_PCT) {
        s->switches++;
        s->exploit_windows = EXPLOIT_MIN;
    } else {
        set_busy(s, !busy); /* back to what was better */
        if (s->exploit_windows < EXPLOIT_MAX)
            s->exploit_windows *= 2;
    }
    s->probing = false;
    phase_reset(s);
}

void agent_spin_window(struct agent_spin *s, uint64_t now_ns, uint64_t delay, uint64_t ops)
{
    uint64_t pct, n;
    bool busy, hot, quiet;

    if (s->node == NULL || now_ns <= s->win_start_ns)
        return;
    if (s->win_start_ns == 0 || delay < s->win_delay_ns || ops < s->win_ops) {
        s->win_start_ns = now_ns;
        s->win_delay_ns = delay;
        s->win_ops = ops;
        return;
    }
    pct = (delay - s->win_delay_ns) * 100 / (now_ns - s->win_start_ns);
    n = ops - s->win_ops;
    s->win_start_ns = now_ns;
    s->win_delay_ns = delay;
    s->win_ops = ops;
    busy = agent_spin_busy(s);

    if (s->probing) {
        if (s->probe_settling) {
            s->probe_settling = false;
        } else {
            s->probe_ops += n;
            s->probe_windows++;
            /* done after PROBE_WINDOWS, or at once when it takes under half as many:
             * polling on an oversubscribed host costs milliseconds per request */
            if (s->probe_windows >= PROBE_WINDOWS ||
                s->probe_ops * s->tally_windows * 2 < s->tally_ops * s->probe_windows)
                probe_end(s);
        }
        return;
    }
    /* oversubscribed while polling, and (with load) polling stopped paying: its requests
     * fell below half their average. A host that is merely loaded, where polling still
     * pays, keeps a steady rate and waits for the next probe. */
    hot = !busy && pct > HOT_DELAY_PCT &&
          (s->tally_windows == 0 || s->tally_ops < (uint64_t)LOAD_MIN * s->tally_windows ||
           n * 2 * s->tally_windows < s->tally_ops);
    s->tally_ops += n;
    s->tally_windows++;
    s->phase_windows++;
    s->quiet_windows = busy && pct < QUIET_DELAY_PCT ? s->quiet_windows + 1 : 0;
    quiet = s->quiet_windows >= QUIET_WINDOWS;
    if (hot && s->tally_windows >= TALLY_MIN &&
        s->tally_ops >= (uint64_t)LOAD_MIN * s->tally_windows) {
        /* the probe competes with polling as it is now, not as it was */
        s->tally_ops = n;
        s->tally_windows = 1;
    } else if (s->tally_windows < TALLY_MIN ||
               (s->phase_windows < s->exploit_windows && !hot && !quiet)) {
        return;
    }
    if (hot || quiet)
        s->exploit_windows = EXPLOIT_MIN; /* the host changed: look again soon */
    if (s->tally_ops < (uint64_t)LOAD_MIN * s->tally_windows) {
        /* too few requests to compare: the host's hints decide */
        if (hot || quiet) {
            set_busy(s, hot);
            s->switches++;
        }
        phase_reset(s);
        return;
    }
    s->probes++;
    s->probing = true;
    s->probe_settling = true;
    s->probe_ops = 0;
    s->probe_windows = 0;
    set_busy(s, !busy);
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
    /* what a client may have scribbled over: ours again */
    s->node->magic = MC_SHM_NODE_MAGIC;
    atomic_store_explicit(&s->node->cores, s->cores, memory_order_relaxed);
}
