/* libFuzzer target: the config engine's JSON loader and --set parser (hostile config files). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/common/config.h"
#include "daemon/master/master_config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct mc_master_config cfg;
    char err[256];
    char *text = malloc(size + 1);

    if (text == NULL)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    mc_config_set_defaults(mc_master_config_table, &cfg);
    if (mc_config_load_json_string(mc_master_config_table, &cfg, text, err, sizeof(err)) == 0)
        (void)mc_master_config_validate(&cfg, err, sizeof(err));
    (void)mc_config_set_kv(mc_master_config_table, &cfg, text, err, sizeof(err));
    mc_config_cleanup(mc_master_config_table, &cfg);
    free(text);
    return 0;
}
