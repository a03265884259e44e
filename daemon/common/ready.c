/* The daemons' ready file (ready.h). */
#include "daemon/common/ready.h"

#include <stdio.h>
#include <unistd.h>

#include <mc/mc_status.h>

int mc_ready_file_write(const char *path, const char *line)
{
    char tmp[4096];
    FILE *f;

    if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid()) >= (int)sizeof(tmp))
        return MC_ERR_INVALID;
    f = fopen(tmp, "w");
    if (f == NULL)
        return MC_ERR_IO;
    if (line != NULL)
        fprintf(f, "%d %s\n", (int)getpid(), line);
    else
        fprintf(f, "%d\n", (int)getpid());
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        unlink(tmp);
        return MC_ERR_IO;
    }
    return 0;
}

void mc_ready_file_remove(const char *path)
{
    FILE *f = fopen(path, "r");
    int pid = 0;

    if (f == NULL)
        return;
    /* only our own: a daemon started since may have written its file at the same path */
    if (fscanf(f, "%d", &pid) != 1)
        pid = 0;
    fclose(f);
    if (pid == (int)getpid())
        unlink(path);
}
