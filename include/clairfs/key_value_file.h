/* A file of `key = value` lines, '#' comments and blank lines: the form of
 * the performance model's file (model.h) and of a cluster's description
 * (cluster_env.h).  The reader splits the lines; the caller knows the keys. */
#ifndef CLAIRFS_KEY_VALUE_FILE_H
#define CLAIRFS_KEY_VALUE_FILE_H

#include <stddef.h>

/* One line's key and value, trimmed; 0, or a negative errno with err set
 * (the message names path and lineno). */
typedef int (*cfs_key_value_fn)(const char *key, char *value, const char *path,
                                unsigned lineno, void *arg, char *err, size_t errlen);

/* Calls fn for each `key = value` line of path, in order, until one
 * fails.  what names the file in the open and read errors ("model PATH:
 * ...").  0, the first failure, -EINVAL for a line without '=', or
 * -errno / -EIO. */
int cfs_key_value_file_read(const char *path, const char *what, cfs_key_value_fn fn, void *arg,
                            char *err, size_t errlen);

#endif
