// The event log and JSON lines: one object per line with ts, node and event first, and
// strings escaped so that any text (paths, error messages) stays valid JSON.
#include <catch2/catch.hpp>

#include <fstream>
#include <string>

#include "runtime/metrics/event_log.hpp"
#include "runtime/metrics/progress.hpp"
#include "runtime/util/json_line.hpp"
#include "support/test_paths.hpp"

using dseek::util::JsonLine;

TEST_CASE("JSON lines escape strings and keep numbers exact enough", "[metrics][json]") {
  JsonLine line;
  line.add("path", "a\"b\\c\nd").add("n", int64_t{-3}).add("x", 0.5).add("ok", true)
      .add("nan", std::numeric_limits<double>::quiet_NaN()).add("ts", 1795987180.123456);
  CHECK(line.str() ==
        R"({"path":"a\"b\\c\nd","n":-3,"x":0.5,"ok":true,"nan":null,"ts":1795987180.123456})");
  CHECK(dseek::util::json_quote(std::string("\x01", 1)) == "\"\\u0001\"");
}

TEST_CASE("the event log appends one object per line under node-<id>", "[metrics][events]") {
  dseek::testing::ScratchDir dir("events");
  {
    dseek::metrics::EventLog log(dir.path(), 3);
    log.emit("step", JsonLine().add("step", 1).add("loss", 2.5));
    log.emit("train_done");
  }
  std::ifstream in(dir / "node-3/events.jsonl");
  std::string first, second, extra;
  REQUIRE(std::getline(in, first));
  REQUIRE(std::getline(in, second));
  CHECK_FALSE(std::getline(in, extra));
  CHECK(first.rfind("{\"ts\":", 0) == 0);
  CHECK(first.find(",\"node\":3,\"event\":\"step\",\"step\":1,\"loss\":2.5}") != std::string::npos);
  CHECK(second.find("\"event\":\"train_done\"}") != std::string::npos);
}

TEST_CASE("durations print as a person reads them", "[metrics][progress]") {
  using dseek::metrics::format_duration;
  CHECK(format_duration(42.4) == "42s");
  CHECK(format_duration(83) == "1m23s");
  CHECK(format_duration(7260) == "2h01m");
  CHECK(format_duration(-1) == "?");
}
