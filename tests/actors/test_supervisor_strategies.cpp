// Supervisor: strategies, restart policies, restart intensity.
#include "supervision_fixture.hpp"

using namespace dseek::test;

namespace {

supervisor_config three(std::shared_ptr<probe> p, restart_strategy s) {
  supervisor_config c;
  c.name = "sup";
  c.strategy = s;
  c.max_restarts = 5;
  c.restart_period = 10s;
  for (auto n : {"a", "b", "c"})
    c.children.push_back(worker_spec(p, n));
  return c;
}

} // namespace

TEST_CASE("supervisor starts its children in order and lists them", "[actors][supervision]") {
  fixture f;
  auto sup = f.start(three(f.log, restart_strategy::one_for_one));
  auto kids = f.children(sup);
  REQUIRE(kids.size() == 3);
  CHECK(kids[0].name == "a");
  CHECK(kids[1].name == "b");
  CHECK(kids[2].name == "c");
  for (auto& k : kids) {
    CHECK(k.running);
    CHECK(k.handle);
    CHECK(k.restarts == 0);
  }
  CHECK(f.wait_log(3) == strs({"start:a", "start:b", "start:c"}));
}

TEST_CASE("one_for_one restarts only the child that crashed", "[actors][supervision]") {
  fixture f;
  auto sup = f.start(three(f.log, restart_strategy::one_for_one));
  auto before = f.children(sup);
  f.wait_log(3);
  f.log->clear();
  f.self->send(before[1].handle, crash_atom::value);
  auto ex = f.next<child_exited>();
  CHECK(ex.child == "b");
  CHECK(ex.supervisor == "sup");
  CHECK(ex.will_restart);
  CHECK(ex.reason == caf::sec::runtime_error);
  auto ev = f.next<child_restarted>();
  CHECK(ev.child == "b");
  CHECK(ev.cause == "b");
  CHECK(ev.restarts == 1);
  CHECK(ev.reason == caf::sec::runtime_error);
  auto after = f.children(sup);
  REQUIRE(after.size() == 3);
  CHECK(after[0].handle == before[0].handle);
  CHECK(after[1].handle != before[1].handle);
  CHECK(after[1].running);
  CHECK(after[1].restarts == 1);
  CHECK(after[2].handle == before[2].handle);
  CHECK(f.wait_log(2) == strs({"stop:b", "start:b"}));
}

TEST_CASE("one_for_all stops the others in reverse order and restarts all in start order",
          "[actors][supervision]") {
  fixture f;
  auto sup = f.start(three(f.log, restart_strategy::one_for_all));
  auto before = f.children(sup);
  f.wait_log(3);
  f.log->clear();
  f.self->send(before[1].handle, crash_atom::value);
  for (auto n : {"a", "b", "c"}) {
    auto ev = f.next<child_restarted>();
    CHECK(ev.child == n);
    CHECK(ev.cause == "b");
    CHECK(ev.restarts == 1);
  }
  auto after = f.children(sup);
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(after[i].handle != before[i].handle);
    CHECK(after[i].running);
  }
  CHECK(f.wait_log(6)
        == strs({"stop:b", "stop:c", "stop:a", "start:a", "start:b", "start:c"}));
  CHECK(f.exit_of("a") == caf::exit_reason::user_shutdown);
}

TEST_CASE("rest_for_one restarts the crashed child and the ones started after it",
          "[actors][supervision]") {
  fixture f;
  auto cfg = three(f.log, restart_strategy::rest_for_one);
  cfg.children.push_back(worker_spec(f.log, "d"));
  auto sup = f.start(std::move(cfg));
  auto before = f.children(sup);
  f.wait_log(4);
  f.log->clear();
  f.self->send(before[1].handle, crash_atom::value);
  for (auto n : {"b", "c", "d"})
    CHECK(f.next<child_restarted>().child == n);
  auto after = f.children(sup);
  CHECK(after[0].handle == before[0].handle);
  CHECK(after[0].restarts == 0);
  for (std::size_t i = 1; i < 4; ++i) {
    CHECK(after[i].handle != before[i].handle);
    CHECK(after[i].restarts == 1);
  }
  CHECK(f.wait_log(6)
        == strs({"stop:b", "stop:d", "stop:c", "start:b", "start:c", "start:d"}));
}

TEST_CASE("restart policies: permanent always, transient after a crash, temporary never",
          "[actors][supervision]") {
  fixture f;
  supervisor_config c;
  c.name = "sup";
  c.children.push_back(worker_spec(f.log, "perm", restart_policy::permanent));
  c.children.push_back(worker_spec(f.log, "trans", restart_policy::transient));
  c.children.push_back(worker_spec(f.log, "temp", restart_policy::temporary));
  auto sup = f.start(std::move(c));
  auto kids = f.children(sup);
  REQUIRE(kids.size() == 3);

  SECTION("a normal exit restarts only the permanent child") {
    f.self->send(kids[0].handle, finish_atom::value);
    CHECK(f.next<child_exited>().will_restart);
    CHECK(f.next<child_restarted>().child == "perm");
    f.self->send(kids[1].handle, finish_atom::value);
    auto ex = f.next<child_exited>();
    CHECK(ex.child == "trans");
    CHECK_FALSE(ex.will_restart);
    f.self->send(kids[2].handle, finish_atom::value);
    ex = f.next<child_exited>();
    CHECK(ex.child == "temp");
    CHECK_FALSE(ex.will_restart);
    auto now = f.children(sup);
    REQUIRE(now.size() == 2); // a temporary child is removed when it ends
    CHECK(now[0].running);
    CHECK(now[0].restarts == 1);
    CHECK_FALSE(now[1].running); // transient, done: kept, not running
    CHECK_FALSE(now[1].handle);
  }
  SECTION("a crash restarts the transient child but not the temporary one") {
    f.self->send(kids[1].handle, crash_atom::value);
    auto ex = f.next<child_exited>();
    CHECK(ex.child == "trans");
    CHECK(ex.will_restart);
    CHECK(f.next<child_restarted>().child == "trans");
    f.self->send(kids[2].handle, crash_atom::value);
    ex = f.next<child_exited>();
    CHECK(ex.child == "temp");
    CHECK_FALSE(ex.will_restart);
    auto now = f.children(sup);
    REQUIRE(now.size() == 2);
    CHECK(now[1].name == "trans");
    CHECK(now[1].running);
    CHECK(now[1].restarts == 1);
  }
}

TEST_CASE("a child that throws is restarted and its exit reason is runtime_error",
          "[actors][supervision]") {
  fixture f;
  auto sup = f.start(three(f.log, restart_strategy::one_for_one));
  f.self->send(f.child(sup, "c"), throw_atom::value);
  auto ex = f.next<child_exited>();
  CHECK(ex.child == "c");
  CHECK(ex.reason == caf::sec::runtime_error);
  CHECK(f.next<child_restarted>().child == "c");
}

TEST_CASE("too many restarts: the supervisor stops its children and exits naming the child",
          "[actors][supervision]") {
  fixture f;
  auto c = three(f.log, restart_strategy::one_for_one);
  c.max_restarts = 2;
  auto sup = f.start(std::move(c));
  auto sup_h = caf::actor_cast<caf::actor>(sup);
  f.self->monitor(sup_h);
  for (int i = 0; i < 2; ++i) {
    f.self->send(f.child(sup, "b"), crash_atom::value);
    CHECK(f.next<child_restarted>().restarts == static_cast<std::uint32_t>(i + 1));
  }
  f.wait_log(7);
  f.log->clear();
  f.self->send(f.child(sup, "b"), crash_atom::value);
  auto dm = f.wait_down(sup_h);
  CHECK(dm.reason.category() == supervision_category);
  CHECK(dm.reason.code()
        == static_cast<std::uint8_t>(supervision_errc::restart_intensity_exceeded));
  REQUIRE(dm.reason.context().match_elements<std::string, std::uint32_t, std::int64_t>());
  CHECK(dm.reason.context().get_as<std::string>(0) == "b");
  CHECK(dm.reason.context().get_as<std::uint32_t>(1) == 3);
  auto text = f.sys.render(dm.reason);
  CHECK(text.find("restart_intensity_exceeded") != std::string::npos);
  CHECK(text.find("'b'") != std::string::npos);
  // The others were stopped in reverse start order; b was not restarted.
  CHECK(f.wait_log(3) == strs({"stop:b", "stop:c", "stop:a"}));
}

TEST_CASE("a start that fails during a restart counts against the intensity",
          "[actors][supervision]") {
  fixture f;
  auto attempts = std::make_shared<std::atomic<int>>(0);
  supervisor_config c;
  c.name = "sup";
  c.max_restarts = 3;
  child_spec flaky;
  flaky.name = "flaky";
  flaky.start = [p = f.log, attempts](caf::actor_system& sys) -> caf::actor {
    if ((*attempts)++ > 0)
      throw std::runtime_error("cannot start again");
    p->add("start:flaky");
    return sys.spawn(worker, p, "flaky");
  };
  c.children.push_back(std::move(flaky));
  auto sup = caf::actor_cast<caf::actor>(f.start(std::move(c)));
  f.self->monitor(sup);
  f.self->send(f.child(caf::actor_cast<supervisor_actor>(sup), "flaky"), crash_atom::value);
  auto dm = f.wait_down(sup);
  CHECK(dm.reason.code()
        == static_cast<std::uint8_t>(supervision_errc::restart_intensity_exceeded));
  CHECK(attempts->load() == 4); // the first start and 3 failed restarts
}
