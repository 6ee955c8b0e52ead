// zps launch's job bookkeeping (tools/launch_children.h, launch_output.h's LinePrefixer and
// launch_args.h's workerProcess): the exit code the job ends with, how a child's output is cut into
// prefixed lines, and each worker process's label, environment and metrics port.
#include "tools/launch_children.h"

#include <catch2/catch.hpp>

#include "tools/launch_args.h"

using namespace zps;

namespace {

Child exited(const std::string& label, int code, bool stopped = false) {
  Child c{label, nullptr, LinePrefixer(label, 64)};
  c.exit_code = code;
  c.stopped = stopped;
  return c;
}

}  // namespace

TEST_CASE("launch children: the job's exit code", "[launch]") {
  std::vector<Child> children;
  children.push_back(exited("scheduler", 0));
  children.push_back(exited("server 0", 1));
  children.push_back(exited("worker 0", 3));
  CHECK(jobExitCode(JobEnd::kAllExited, children, std::nullopt, 0) == 0);
  CHECK(jobExitCode(JobEnd::kSignal, children, std::nullopt, 15) == 143);
  CHECK(jobExitCode(JobEnd::kTimeout, children, std::nullopt, 0) == 124);
  CHECK(jobExitCode(JobEnd::kChildFailed, children, 2, 0) == 3);
  CHECK(jobExitCode(JobEnd::kChildFailed, children, 1, 0) == 1);
  // A user error anywhere wins over the failures it caused, unless launch stopped that child.
  children.push_back(exited("worker 1", 2));
  CHECK(jobExitCode(JobEnd::kChildFailed, children, 2, 0) == 2);
  children.back().stopped = true;
  CHECK(jobExitCode(JobEnd::kChildFailed, children, 2, 0) == 3);
  // A first failure by signal (negative or zero code) still fails the job.
  children[2].exit_code = 0;
  CHECK(jobExitCode(JobEnd::kChildFailed, children, 2, 0) == 1);
}

TEST_CASE("launch children: a worker stopped while others never joined fails the job", "[launch]") {
  std::vector<Child> children;
  children.push_back(exited("worker 0", 0));
  CHECK(jobExitCode(JobEnd::kNeverJoined, children, std::nullopt, 0) == 0);
  children.push_back(exited("worker 1", 143, true));
  CHECK(jobExitCode(JobEnd::kNeverJoined, children, std::nullopt, 0) == 1);
  CHECK(runningCount(children) == 0);
}

TEST_CASE("launch output: a child's bytes become whole prefixed lines", "[launch]") {
  LinePrefixer out("worker 1", 16);
  CHECK(out.feed("hello") == "");
  CHECK(out.feed(" world\nsecond\nthi") == "[worker 1] hello world\n[worker 1] second\n");
  CHECK(out.flush() == "[worker 1] thi\n");
  CHECK(out.flush() == "");
  // A line that never ends is cut at the bound, so launch's memory stays bounded.
  CHECK(out.feed(std::string(20, 'x')) == "[worker 1] " + std::string(20, 'x') + "\n");
  CHECK(out.feed("\n") == "[worker 1] \n");
}

TEST_CASE("launch args: each worker process's label, environment and metrics port", "[launch]") {
  LaunchConfig config;
  config.servers = 2;
  config.workers = 3;
  WorkerProcess plain = workerProcess(config, 1, 0, 1);
  CHECK(plain.label == "worker 1");
  CHECK(plain.metrics_offset == 1 + 2 + 1);
  CHECK(plain.env ==
        std::vector<std::pair<std::string, std::string>>{{"DMLC_ROLE", "worker"}, {"DMLC_WORKER_ID", "1"}});
  CHECK(std::find(plain.unset.begin(), plain.unset.end(), "ZPS_LOCAL_RANK") != plain.unset.end());
  WorkerProcess local = workerProcess(config, 2, 1, 2);
  CHECK(local.label == "worker 2.1");
  // Local rank 0 of each worker keeps 3..5; the others follow every worker: 6 + 2 x 1 + 0.
  CHECK(local.metrics_offset == 1 + 2 + 3 + 2 * 1 + 0);
  CHECK(local.env.back() == std::pair<std::string, std::string>{"ZPS_LOCAL_SIZE", "2"});
  CHECK(workerProcess(config, 0, 0, 2).label == "worker 0.0");
  CHECK(workerProcess(config, 0, 0, 2).metrics_offset == 3);
}
