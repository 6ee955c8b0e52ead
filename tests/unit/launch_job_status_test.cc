// zps launch's reading of the scheduler's status (tools/launch_job_status.h): worker states parsed
// from /api/status as the scheduler writes it, hostile bytes skipped, the summary made printable.
#include "tools/launch_job_status.h"

#include <catch2/catch.hpp>

using zps::parseWorkerStates;
using zps::printableSummary;

TEST_CASE("launch job status: worker states are read from the scheduler's rows", "[launch]") {
  const std::string json =
      "{\"nodes\":[{\"role\":\"scheduler\",\"rank\":0,\"state\":\"running\"},"
      "{\"role\":\"worker\",\"rank\":0,\"state\":\"running\",\"host\":\"a\"},"
      "{\"role\":\"server\",\"rank\":1,\"state\":\"running\"},"
      "{\"role\":\"worker\",\"rank\":3,\"host\":\"b\",\"state\":\"missing\"}]}";
  auto states = parseWorkerStates(json);
  REQUIRE(states.size() == 2);
  CHECK(states.at(0) == "running");
  CHECK(states.at(3) == "missing");
}

TEST_CASE("launch job status: malformed worker rows are skipped", "[launch]") {
  CHECK(parseWorkerStates("").empty());
  CHECK(parseWorkerStates("{\"role\":\"worker\",\"rank\":x,\"state\":\"running\"}").empty());
  CHECK(parseWorkerStates("{\"role\":\"worker\",\"rank\":-1,\"state\":\"running\"}").empty());
  CHECK(parseWorkerStates("{\"role\":\"worker\",\"rank\":99999999999,\"state\":\"running\"}").empty());
  CHECK(parseWorkerStates("{\"role\":\"worker\",\"rank\":2,\"state\":\"runn").empty());
  CHECK(parseWorkerStates("{\"role\":\"worker\",\"rank\":2}").empty());
}

TEST_CASE("launch job status: the summary reaches the terminal as one printable line", "[launch]") {
  CHECK(printableSummary("step 10\r\n\033[2Jloss 0.5  \n") == "step 10   [2Jloss 0.5");
  CHECK(printableSummary("\x7f\x01") == "");
  CHECK(printableSummary("2 workers running") == "2 workers running");
}
