/* bench-fuse-read.h: what the two halves of bench-fuse-read share: the
 * clocks, the listing of a flat source directory, and the three commands.
 * bench-fuse-read.c (gen, read, main) and bench-fuse-read-serve.c (the FUSE
 * server) are one program; see the comment at the top of bench-fuse-read.c. */
#ifndef BENCH_FUSE_READ_H
#define BENCH_FUSE_READ_H

#include <stdint.h>
#include <time.h>

#define TIMEOUT 86400.0 /* the files never change during a mount */
#define READ_BUF (64 * 1024)
#define FIRST_INO 2 /* inode of file 0; 1 is the root */

double now(void);
double cpu_now(clockid_t clk);
/* The sorted names of the regular files in dir (flat); negative errno. */
int list_files(const char *dir, char ***names_out, uint32_t *n_out);

int cmd_gen(int argc, char **argv);
int cmd_read(int argc, char **argv);
int cmd_serve(int argc, char **argv);

#endif
