"""What the sampler oracles (test_sampler_frameworks.py,
test_sampler_libraries.py) share: running sampler_dump, naming the first line
where two streams differ, and the main loop over the cases.

Each oracle compares the streams clairfs's model prints with a transcription
of a library's sampler code run on real torch; only the cases and the checks
of clairfs-plan differ, so they are the oracle's and the loop is here.
"""
import subprocess
import sys


def dump(exe, args):
    """sampler_dump with args, its output as text."""
    return subprocess.run([exe] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=60)


def first_difference(want, got, source):
    """The first line where the source's stream (want) and clairfs's differ."""
    for i, (x, y) in enumerate(zip(want.splitlines(), got.splitlines())):
        if x != y:
            return "line %d:\n  %s: %s\n  clairfs: %s" % (i + 1, source, x[:160], y[:160])
    return "lengths differ (%d vs %d lines)" % (len(want.splitlines()), len(got.splitlines()))


def main(script, torch_version, cases, run_case, check_plan):
    """argv: SAMPLER_DUMP CLAIRFS_PLAN.  Every case through run_case (None
    when clairfs agrees, else what differs), then check_plan(plan) (the
    failures it counts).  Returns the exit status."""
    if len(sys.argv) < 3:
        print("usage: %s SAMPLER_DUMP CLAIRFS_PLAN" % script, file=sys.stderr)
        return 2
    exe, plan = sys.argv[1], sys.argv[2]
    print("torch %s" % torch_version)
    passed = failed = 0
    for c in cases():
        err = run_case(exe, c)
        if err:
            failed += 1
            print("FAIL %r\n%s" % (c, err))
        else:
            passed += 1
    failed += check_plan(plan)
    print("%d cases passed, %d failures" % (passed, failed))
    return 1 if failed else 0
