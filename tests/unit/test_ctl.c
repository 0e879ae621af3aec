#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check_run.h"
#include "clairfs/ctl.h"

static int parse(const char *s, struct cfs_ctl_cmd *c)
{
    return cfs_ctl_parse(s, strlen(s), c);
}

START_TEST(commands_parse)
{
    struct cfs_ctl_cmd c;
    ck_assert_int_eq(parse("epoch 3", &c), 0);
    ck_assert_int_eq(c.kind, CFS_CTL_CMD_EPOCH);
    ck_assert_uint_eq(c.value, 3);
    ck_assert_int_eq(parse("  seed\t18446744073709551615 \r", &c), 0);
    ck_assert_int_eq(c.kind, CFS_CTL_CMD_SEED);
    ck_assert_uint_eq(c.value, UINT64_MAX);
    ck_assert_int_eq(parse("epoch 4294967295", &c), 0);
    ck_assert_uint_eq(c.value, 4294967295u);
    ck_assert_int_eq(parse("epoch   0", &c), 0);
    ck_assert_uint_eq(c.value, 0);
}
END_TEST

START_TEST(bad_commands_are_einval)
{
    static const char *bad[] = {
        "", "epoch", "epoch ", "epoch3", "epoch -1", "epoch +1", "epoch 1 2", "epoch 1x",
        "epoch 4294967296", "seed 18446744073709551616", "Epoch 1", "epochs 1", "seed 0x10",
        "stop", "seed 99999999999999999999999999", "epoch 1.5",
    };
    struct cfs_ctl_cmd c;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        ck_assert_msg(parse(bad[i], &c) == -EINVAL, "'%s' accepted", bad[i]);
    /* A NUL inside the value is not a terminator. */
    ck_assert_int_eq(cfs_ctl_parse("epoch 1\0002", 9, &c), -EINVAL);
    /* Only the given length is read. */
    ck_assert_int_eq(cfs_ctl_parse("epoch 12345", 7, &c), 0);
    ck_assert_uint_eq(c.value, 1);
}
END_TEST

struct record {
    int calls;
    struct cfs_ctl_cmd cmds[8];
    int fail_at; /* call index that fails with -EBUSY, or -1 */
};

static int record_cmd(void *arg, const struct cfs_ctl_cmd *cmd)
{
    struct record *r = arg;
    if (r->calls == r->fail_at)
        return -EBUSY;
    r->cmds[r->calls++] = *cmd;
    return 0;
}

static int write_str(struct cfs_ctl *ctl, const char *s)
{
    return cfs_ctl_write(ctl, s, strlen(s));
}

START_TEST(writes_deliver_commands_in_order)
{
    struct cfs_metrics m;
    struct cfs_ctl *ctl;
    struct record r = {.fail_at = -1};
    cfs_metrics_init(&m);
    ck_assert_int_eq(cfs_ctl_create(&m, &ctl), 0);
    cfs_ctl_set_handler(ctl, record_cmd, &r);

    ck_assert_int_eq(write_str(ctl, "epoch 7\n"), 8);
    ck_assert_int_eq(r.calls, 1);
    ck_assert_uint_eq(cfs_metrics_get(&m, CFS_M_EPOCH), 7);

    ck_assert_int_eq(write_str(ctl, "seed 42\r\n\n  epoch 9\n"), 20);
    ck_assert_int_eq(r.calls, 3);
    ck_assert_int_eq(r.cmds[1].kind, CFS_CTL_CMD_SEED);
    ck_assert_uint_eq(r.cmds[1].value, 42);
    ck_assert_int_eq(r.cmds[2].kind, CFS_CTL_CMD_EPOCH);
    ck_assert_uint_eq(r.cmds[2].value, 9);
    ck_assert_uint_eq(cfs_metrics_get(&m, CFS_M_EPOCH), 9);

    /* All or nothing: a bad line anywhere means no command is delivered. */
    ck_assert_int_eq(write_str(ctl, "epoch 11\nbogus\n"), -EINVAL);
    ck_assert_int_eq(write_str(ctl, "\n\n"), -EINVAL);
    ck_assert_int_eq(cfs_ctl_write(ctl, "", 0), -EINVAL);
    ck_assert_int_eq(r.calls, 3);
    ck_assert_uint_eq(cfs_metrics_get(&m, CFS_M_EPOCH), 9);

    char big[CFS_CTL_MAX_WRITE + 2];
    memset(big, '\n', sizeof(big));
    memcpy(big, "epoch 1", 7);
    ck_assert_int_eq(cfs_ctl_write(ctl, big, sizeof(big)), -EINVAL);
    ck_assert_int_eq(cfs_ctl_write(ctl, big, CFS_CTL_MAX_WRITE), CFS_CTL_MAX_WRITE);
    ck_assert_int_eq(r.calls, 4);

    /* The handler's error reaches the writer; the epoch is not taken. */
    r.fail_at = 4;
    ck_assert_int_eq(write_str(ctl, "epoch 20\n"), -EBUSY);
    ck_assert_uint_eq(cfs_metrics_get(&m, CFS_M_EPOCH), 1);
    cfs_ctl_destroy(ctl);
}
END_TEST

START_TEST(without_handler_epoch_updates_the_gauge)
{
    struct cfs_metrics m;
    struct cfs_ctl *ctl;
    cfs_metrics_init(&m);
    ck_assert_int_eq(cfs_ctl_create(&m, &ctl), 0);
    ck_assert_int_eq(write_str(ctl, "epoch 5"), 7);
    ck_assert_uint_eq(cfs_metrics_get(&m, CFS_M_EPOCH), 5);
    ck_assert_int_eq(write_str(ctl, "seed 5"), 6);
    ck_assert_uint_eq(cfs_metrics_get(&m, CFS_M_EPOCH), 5);
    cfs_ctl_destroy(ctl);
    cfs_ctl_destroy(NULL);
}
END_TEST

START_TEST(files_have_names_modes_and_contents)
{
    ck_assert_str_eq(cfs_ctl_file_name(CFS_CTL_READY), "ready");
    ck_assert_str_eq(cfs_ctl_file_name(CFS_CTL_METRICS), "metrics");
    ck_assert_str_eq(cfs_ctl_file_name(CFS_CTL_STATS), "stats");
    ck_assert_str_eq(cfs_ctl_file_name(CFS_CTL_CONTROL), "control");
    ck_assert_int_eq(cfs_ctl_file_lookup("metrics"), CFS_CTL_METRICS);
    ck_assert_int_eq(cfs_ctl_file_lookup("control"), CFS_CTL_CONTROL);
    ck_assert_int_eq(cfs_ctl_file_lookup("Metrics"), -ENOENT);
    ck_assert_int_eq(cfs_ctl_file_lookup(""), -ENOENT);
    ck_assert_uint_eq(cfs_ctl_file_mode(CFS_CTL_CONTROL), S_IFREG | 0200);
    ck_assert_uint_eq(cfs_ctl_file_mode(CFS_CTL_METRICS), S_IFREG | 0444);

    struct cfs_metrics m;
    struct cfs_ctl *ctl;
    cfs_metrics_init(&m);
    ck_assert_int_eq(cfs_ctl_create(&m, &ctl), 0);
    ck_assert(!cfs_ctl_is_ready(ctl));
    cfs_ctl_set_ready(ctl, true);
    ck_assert(cfs_ctl_is_ready(ctl));

    cfs_metrics_add(&m, CFS_M_READS_PFS, 12);
    char *text, *direct;
    size_t len, dlen;
    struct cfs_metrics_snapshot snap;
    ck_assert_int_eq(cfs_ctl_render(ctl, CFS_CTL_METRICS, &text, &len), 0);
    cfs_metrics_snapshot(&m, &snap);
    ck_assert_int_eq(cfs_metrics_render_prometheus(&snap, &direct, &dlen), 0);
    ck_assert_str_eq(text, direct);
    ck_assert_ptr_nonnull(strstr(text, "\nclairfs_reads_total{source=\"pfs\"} 12\n"));
    free(text);
    free(direct);
    ck_assert_int_eq(cfs_ctl_render(ctl, CFS_CTL_STATS, &text, &len), 0);
    ck_assert_ptr_nonnull(strstr(text, "reads     ram 0  ssd 0  peer 0  pfs 12\n"));
    free(text);
    ck_assert_int_eq(cfs_ctl_render(ctl, CFS_CTL_READY, &text, &len), 0);
    ck_assert_uint_eq(len, 0);
    free(text);
    ck_assert_int_eq(cfs_ctl_render(ctl, CFS_CTL_CONTROL, &text, &len), -EACCES);
    cfs_ctl_destroy(ctl);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ctl");
    TCase *tc = tcase_create("ctl");
    tcase_add_test(tc, commands_parse);
    tcase_add_test(tc, bad_commands_are_einval);
    tcase_add_test(tc, writes_deliver_commands_in_order);
    tcase_add_test(tc, without_handler_epoch_updates_the_gauge);
    tcase_add_test(tc, files_have_names_modes_and_contents);
    suite_add_tcase(s, tc);
    return cfs_check_run(s);
}
