/* The session's I/O for FUSE over io_uring (fuse_ring.h): what libfuse
 * reads and writes goes through here.  The INIT is seen on its way in and
 * its reply asks for the ring where it can run; a reply to a request taken
 * from a ring (ring_current, set by the thread answering it) is copied into
 * its entry and committed, whether libfuse wrote it or spliced it from an
 * SSD entry's file; everything else written (notifications, the /dev/fuse
 * loop's replies) goes to /dev/fuse. */
#include "fuse_ring_i.h"

/* Why the kernel offered no ring, for the INIT line. */
static const char *kernel_refusal(void)
{
    char v = 0;
    int fd = open(ENABLE_URING_KNOB, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return "this kernel has no FUSE over io_uring (Linux 6.14 or later with "
               "CONFIG_FUSE_IO_URING)";
    ssize_t n = read(fd, &v, 1);
    close(fd);
    if (n == 1 && (v == 'N' || v == '0'))
        return "FUSE over io_uring is off in the kernel (as root: echo 1 > " ENABLE_URING_KNOB ")";
    return "the kernel did not offer FUSE over io_uring";
}

static void note_init(struct cfs_fuse_ring *r, const void *buf, size_t n)
{
    const struct fuse_in_header *in = buf;
    const struct fuse_init_in *arg = (const void *)(in + 1);
    r->init_unique = in->unique;
    bool ext = n >= sizeof(*in) + offsetof(struct fuse_init_in, flags2) + sizeof(arg->flags2) &&
               (arg->flags & FUSE_INIT_EXT);
    atomic_store(&r->offered, ext && (arg->flags2 & INIT_FLAGS2_OVER_IO_URING));
    atomic_store(&r->init_seen, true);
}

static struct cfs_fuse_ring *ring_of(void *userdata)
{
    return ((struct cfs_fuse_ring_slot *)userdata)->ring;
}

static ssize_t io_read(int fd, void *buf, size_t len, void *userdata)
{
    ssize_t n = read(fd, buf, len);
    if (n >= (ssize_t)sizeof(struct fuse_in_header)) {
        struct cfs_fuse_ring *r = ring_of(userdata);
        const struct fuse_in_header *in = buf;
        ring_count(r, CFS_M_FUSE_REQUESTS_DEVICE, 1);
        if (in->opcode == FUSE_INIT)
            note_init(r, buf, (size_t)n);
    }
    return n;
}

/* The INIT reply: ask for the ring where the kernel offers it and it can
 * run, say which transport carries the requests, and start the ring once
 * the kernel took the reply. */
static ssize_t init_reply(struct cfs_fuse_ring *r, int fd, struct iovec *iov, int count_)
{
    const struct fuse_out_header *out = iov[0].iov_base;
    struct fuse_init_out *arg = count_ >= 2 ? iov[1].iov_base : NULL;
    bool fits = arg && iov[1].iov_len >= offsetof(struct fuse_init_out, flags2) + sizeof(arg->flags2);
    const char *why = NULL;
    if (r->cfg.mode == CFS_FUSE_IO_DEVICE)
        why = "-o fuse_io=device";
    else if (!atomic_load(&r->offered))
        why = kernel_refusal();
    else if (!r->io_uring_works)
        why = r->why_not;
    else if (out->error != 0 || !fits || !(arg->flags & FUSE_INIT_EXT))
        why = "libfuse's INIT reply has no room for it";
    if (!why) {
        arg->flags2 |= INIT_FLAGS2_OVER_IO_URING;
        size_t pages = (arg->flags & FUSE_MAX_PAGES) ? arg->max_pages : 32;
        size_t cap = pages * r->page;
        if (cap < arg->max_write)
            cap = arg->max_write;
        r->payload_cap = cap < FUSE_MIN_READ_BUFFER ? FUSE_MIN_READ_BUFFER : cap;
        /* Before the kernel has the reply: no retrieve can be asked sooner. */
        atomic_store(&r->asked, true);
    }
    ssize_t n = writev(fd, iov, count_);
    if (n < 0)
        return n;
    if (why) {
        if (r->cfg.mode == CFS_FUSE_IO_URING)
            cfs_warn("-o fuse_io=uring: FUSE requests stay on /dev/fuse: %s", why);
        else if (r->cfg.mode == CFS_FUSE_IO_AUTO)
            cfs_info("FUSE requests over /dev/fuse: %s", why);
    } else {
        ring_start(r);
    }
    return n;
}

#if RING_BUILT
/* The reply to the request in e, its payload already in e's buffer: the
 * header goes in and the entry back to the kernel.  0 or -EIO. */
static int commit_reply(struct ring_ent *e, const struct fuse_out_header *out, size_t payload)
{
    memcpy(e->hdr->in_out, out, sizeof(*out));
    e->hdr->ent.payload_sz = (uint32_t)payload;
    ring_current.replied = true;
    return ring_submit_cmd(e, RING_CMD_COMMIT_AND_FETCH);
}

static bool read_full(int fd, void *buf, size_t len)
{
    for (size_t got = 0; got < len;) {
        ssize_t n = read(fd, (char *)buf + got, len - got);
        if (n <= 0)
            return false;
        got += (size_t)n;
    }
    return true;
}
#endif

static ssize_t io_writev(int fd, struct iovec *iov, int count_, void *userdata)
{
    const struct fuse_out_header *out = iov[0].iov_base;
#if RING_BUILT
    struct ring_ent *e = ring_current.e;
    if (e && !ring_current.replied && out->unique == e->unique) {
        struct fuse_out_header head = *out;
        size_t len = 0;
        for (int i = 1; i < count_; i++) {
            if (len + iov[i].iov_len > e->q->r->payload_cap) {
                head.error = -EIO;
                len = 0;
                break;
            }
            memcpy(e->payload + len, iov[i].iov_base, iov[i].iov_len);
            len += iov[i].iov_len;
        }
        if (commit_reply(e, &head, len) < 0) {
            errno = EIO;
            return -1;
        }
        return (ssize_t)out->len;
    }
#endif
    struct cfs_fuse_ring *r = ring_of(userdata);
    if (out->unique && out->unique == r->init_unique && atomic_load(&r->init_seen) &&
        !atomic_exchange(&r->init_answered, true))
        return init_reply(r, fd, iov, count_);
    return writev(fd, iov, count_);
}

/* A reply libfuse spliced into a pipe (header, then an SSD entry's bytes):
 * the ring's reply is read out of the pipe into the entry. */
static ssize_t io_splice_send(int fdin, loff_t *offin, int fdout, loff_t *offout, size_t len,
                              unsigned int flags, void *userdata)
{
    (void)userdata;
#if RING_BUILT
    struct ring_ent *e = ring_current.e;
    if (e && !ring_current.replied) {
        struct fuse_out_header out;
        if (!read_full(fdin, &out, sizeof(out)))
            return -1;
        size_t want = len - sizeof(out);
        bool ours = out.unique == e->unique && want <= e->q->r->payload_cap;
        char *rest = ours ? NULL : malloc(want + 1);
        if (!ours && !rest)
            return -1;
        if (!read_full(fdin, ours ? e->payload : rest, want)) {
            free(rest);
            return -1;
        }
        if (!ours) { /* a notification made while answering */
            struct iovec iov[2] = {{&out, sizeof(out)}, {rest, want}};
            ssize_t n = writev(fdout, iov, 2);
            free(rest);
            return n;
        }
        return commit_reply(e, &out, want) < 0 ? -1 : (ssize_t)len;
    }
#endif
    return splice(fdin, offin, fdout, offout, len, flags);
}

int cfs_fuse_ring_attach(struct cfs_fuse_ring *r, struct fuse_session *se,
                         struct cfs_fuse_ring_slot *slot)
{
    const struct fuse_custom_io io = {
        .read = io_read,
        .writev = io_writev,
        .splice_send = io_splice_send,
    };
    r->se = se;
    r->fd = fuse_session_fd(se);
    r->slot = slot;
    slot->ring = r;
    return fuse_session_custom_io(se, &io, r->fd);
}
