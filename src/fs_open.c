/* The open file handles (fi->fh).  Reference-counted, because the kernel
 * may send RELEASE before the thread that replied to the last READ has let
 * go of the bytes (fs_i.h, struct fs_open); listed, because a RELEASE the
 * kernel still had queued when the mount went away never arrives, and
 * cfs_fs_destroy() frees what is left.  The lowest of the fs files: it
 * knows how to free both kinds of handle (a control file's rendered text,
 * a data-path file) and calls nothing else of the FUSE layer, so that
 * every file above may take and drop handles. */
#include "fs_i.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

/* A control file's handle: the text rendered at open (fs_ctl.c). */
static void ctl_handle_free(struct ctl_handle *h)
{
    free(h->text);
    free(h);
}

struct fs_open *fs_open_new(struct cfs_fs *fs, enum open_kind kind, void *handle)
{
    struct fs_open *o = malloc(sizeof(*o));
    if (!o)
        return NULL;
    atomic_init(&o->refs, 1);
    o->kind = kind;
    o->handle = handle;
    o->prev = NULL;
    pthread_mutex_lock(&fs->opens_mu);
    o->next = fs->opens;
    if (fs->opens)
        fs->opens->prev = o;
    fs->opens = o;
    /* Opened while the switch answered its ENOSYS: no RELEASE will come
     * (fs_open_unpin_all).  Under opens_mu, so that either this sees the
     * switch or the switch's walk sees this handle. */
    if (kind == OPEN_DATA && atomic_load(&fs->opens_off))
        cfs_prefetch_unpin(fs->prefetch, handle);
    pthread_mutex_unlock(&fs->opens_mu);
    return o;
}

/* Once the kernel opens files itself it sends no RELEASE, not even for a
 * file it opened through clairfs before and closes afterwards (Linux's
 * fuse_file_put ends such a release without a request once no_open is
 * set).  The handles open at the switch would keep their pins on the tier
 * until unmount, and a staged file read for the last time would stay
 * charged: their pins end now, and the open watch's close events drop
 * those files as for every other. */
void fs_open_unpin_all(struct cfs_fs *fs)
{
    pthread_mutex_lock(&fs->opens_mu);
    for (struct fs_open *o = fs->opens; o; o = o->next)
        if (o->kind == OPEN_DATA)
            cfs_prefetch_unpin(fs->prefetch, o->handle);
    pthread_mutex_unlock(&fs->opens_mu);
}

static void open_free(struct cfs_fs *fs, struct fs_open *o)
{
    switch (o->kind) {
    case OPEN_CTL:
        ctl_handle_free(o->handle);
        break;
    case OPEN_DATA:
        cfs_prefetch_release(fs->prefetch, o->handle);
        break;
    }
    free(o);
}

void fs_open_put(struct cfs_fs *fs, struct fs_open *o)
{
    if (atomic_fetch_sub_explicit(&o->refs, 1, memory_order_acq_rel) != 1)
        return;
    pthread_mutex_lock(&fs->opens_mu);
    if (o->prev)
        o->prev->next = o->next;
    else
        fs->opens = o->next;
    if (o->next)
        o->next->prev = o->prev;
    pthread_mutex_unlock(&fs->opens_mu);
    open_free(fs, o);
}

void fs_open_free_all(struct cfs_fs *fs)
{
    for (struct fs_open *o = fs->opens, *next; o; o = next) {
        next = o->next;
        open_free(fs, o);
    }
    fs->opens = NULL;
}
