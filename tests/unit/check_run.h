/* The end of every unit test's main(): run the suite (timeouts and forking
 * as CK_* environment variables say), exit non-zero on any failure. */
#ifndef CLAIRFS_TEST_CHECK_RUN_H
#define CLAIRFS_TEST_CHECK_RUN_H

#include <check.h>
#include <stdlib.h>

static inline int cfs_check_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif
