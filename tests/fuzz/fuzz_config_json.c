/* libFuzzer target: the config engine (daemon/common/config.h) on hostile config files and
 * --set arguments, for each daemon's table: the master service, mc-agent and mc-master.
 * The input is the JSON text and also one "key=value" argument. Checked promises:
 *   - a load or a set that fails leaves the struct unchanged (every byte, pointers too);
 *   - a load that succeeds dumps as JSON that loads back to the same struct (the dump of
 *     the reloaded struct is byte-identical);
 *   - the daemon's validate hook runs on whatever loaded, and cleanup frees every string
 *     (ASan's leak check). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/agent/agent_config.h"
#include "daemon/common/config.h"
#include "daemon/master/master_config.h"
#include "daemon/mcmaster/mcmaster_config.h"

static int t_master_validate(const void *cfg, char *err, size_t errlen)
{
    return mc_master_config_validate(cfg, err, errlen);
}

static const struct {
    const struct mc_config_entry *table;
    mc_config_validate_fn validate;
} t_tables[] = {
    {mc_master_config_table, t_master_validate},
    {mc_agent_config_table, mc_agent_config_validate},
    {mc_mcmaster_config_table, mc_mcmaster_config_validate},
};

/* One struct big enough for any of the tables' structs. */
union t_cfg {
    struct mc_master_config master;
    struct mc_agent_config agent;
    struct mc_mcmaster_config mcmaster;
};

/* The dump of cfg as a malloc'ed string (aborts if it cannot be made). */
static char *t_dump(const struct mc_config_entry *table, const union t_cfg *cfg)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);

    if (f == NULL || mc_config_dump_json(table, cfg, f) != 0 || fclose(f) != 0)
        abort();
    return text;
}

static void t_one(const struct mc_config_entry *table, mc_config_validate_fn validate,
                  const char *text)
{
    union t_cfg cfg, snap, again;
    char err[256];
    char *dump, *redump;

    memset(&cfg, 0, sizeof(cfg));
    if (mc_config_set_defaults(table, &cfg) != 0)
        abort();
    /* a shallow copy: a failed call that touched a field, or freed a string, shows */
    memcpy(&snap, &cfg, sizeof(cfg));
    if (mc_config_load_json_string(table, &cfg, text, err, sizeof(err)) == 0) {
        (void)validate(&cfg, err, sizeof(err));
        dump = t_dump(table, &cfg);
        memset(&again, 0, sizeof(again));
        if (mc_config_set_defaults(table, &again) != 0 ||
            mc_config_load_json_string(table, &again, dump, err, sizeof(err)) != 0)
            abort();
        redump = t_dump(table, &again);
        if (strcmp(dump, redump) != 0)
            abort();
        free(dump);
        free(redump);
        mc_config_cleanup(table, &again);
    } else if (memcmp(&snap, &cfg, sizeof(cfg)) != 0) {
        abort();
    }

    memcpy(&snap, &cfg, sizeof(cfg));
    if (mc_config_set_kv(table, &cfg, text, err, sizeof(err)) != 0 &&
        memcmp(&snap, &cfg, sizeof(cfg)) != 0)
        abort();
    mc_config_cleanup(table, &cfg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);

    if (text == NULL)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    for (size_t i = 0; i < sizeof(t_tables) / sizeof(t_tables[0]); i++)
        t_one(t_tables[i].table, t_tables[i].validate, text);
    free(text);
    return 0;
}
