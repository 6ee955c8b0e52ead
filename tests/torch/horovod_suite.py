"""One worker of a run of Horovod's PyTorch test suite under zps (horovod_suite_test.sh starts the job).
Joins the job, tells the suite its rank and size as MPI would (OMPI_COMM_WORLD_*), and runs pytest on
test_torch.py in this process; each worker writes a JUnit report, which the shell script summarises.
After each test the workers realign (zps.torch.join.realign): a test that raised on some workers half way
through its operations leaves the others with operations of their own, which are then refused, so the
next test starts in step on every worker instead of failing for that one.
Usage: horovod_suite.py <suite dir> <report dir> [pytest -k expression]"""
import os
import sys

import zps.torch as hvd

suite, reports = sys.argv[1], sys.argv[2]
hvd.init()
os.environ["OMPI_COMM_WORLD_RANK"] = str(hvd.rank())
os.environ["OMPI_COMM_WORLD_SIZE"] = str(hvd.size())
import pytest  # noqa: E402

from zps.torch.join import realign  # noqa: E402


class Realign:
    @pytest.fixture(autouse=True)
    def _realign_after_each_test(self):
        yield
        realign()


args = [os.path.join(suite, "test", "parallel", "test_torch.py"), "-p", "no:cacheprovider", "-v",
        "--junitxml=%s/rank%d.xml" % (reports, hvd.rank()), "-o", "junit_family=xunit1",
        "--rootdir", os.path.join(suite, "test")]
if len(sys.argv) > 3 and sys.argv[3]:
    args += ["-k", sys.argv[3]]
code = pytest.main(args, plugins=[Realign()])
print("worker %d: pytest exited %d" % (hvd.rank(), code), flush=True)
hvd.shutdown()
# The suite's failures are counted from the reports, not from the job's exit code.
