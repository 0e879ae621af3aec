/* CFS_TEST_SANITIZED: 1 in a build instrumented by ASan or TSan (clang's
 * __has_feature, gcc's __SANITIZE_*__), else 0.  The sanitizer stage runs
 * the unit tests some six times slower; a case whose cost is a long walk of
 * the same code (more seeds, more offsets) may take a shorter one there,
 * saying so where it does. */
#ifndef CLAIRFS_TEST_SANITIZED_H
#define CLAIRFS_TEST_SANITIZED_H

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define CFS_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define CFS_TEST_SANITIZED 1
#endif
#endif
#ifndef CFS_TEST_SANITIZED
#define CFS_TEST_SANITIZED 0
#endif

#endif
