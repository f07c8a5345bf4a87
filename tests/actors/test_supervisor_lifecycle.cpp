// Supervisor: orderly shutdown, hung children, exits from outside, nested
// supervisors, children added and removed at run time, message types.
#include "supervision_fixture.hpp"

using namespace dseek::test;

namespace {

caf::error shutdown(fixture& f, const supervisor_actor& sup, bool* ok = nullptr) {
  caf::error out;
  bool replied = false;
  f.self->request(sup, std::chrono::seconds(10), shutdown_atom::value)
      .receive([&](caf::ok_atom) { replied = true; },
               [&](caf::error& e) {
                 replied = true;
                 out = std::move(e);
               });
  if (ok != nullptr)
    *ok = replied && !out;
  return out;
}

} // namespace

TEST_CASE("shutdown stops the children in reverse start order, then the supervisor exits",
          "[actors][supervision]") {
  fixture f;
  supervisor_config c;
  c.name = "sup";
  for (auto n : {"a", "b", "c"})
    c.children.push_back(worker_spec(f.log, n));
  auto sup = f.start(std::move(c));
  auto sup_h = caf::actor_cast<caf::actor>(sup);
  f.self->monitor(sup_h);
  f.wait_log(3);
  f.log->clear();
  bool ok = false;
  shutdown(f, sup, &ok);
  CHECK(ok);
  CHECK(f.log->events() == strs({"stop:c", "stop:b", "stop:a"}));
  for (auto n : {"a", "b", "c"})
    CHECK(f.exit_of(n) == caf::exit_reason::user_shutdown);
  auto dm = f.wait_down(sup_h);
  CHECK(dm.reason == caf::exit_reason::normal);
}

TEST_CASE("a child that ignores the exit is killed after its shutdown timeout",
          "[actors][supervision]") {
  fixture f;
  supervisor_config c;
  c.name = "sup";
  c.children.push_back(worker_spec(f.log, "a"));
  c.children.push_back(hung_spec(f.log, "stuck", 300ms));
  c.children.push_back(worker_spec(f.log, "c"));
  auto sup = f.start(std::move(c));
  f.wait_log(3);
  f.log->clear();
  auto t0 = std::chrono::steady_clock::now();
  bool ok = false;
  shutdown(f, sup, &ok);
  auto took = std::chrono::steady_clock::now() - t0;
  CHECK(ok);
  CHECK(took >= 300ms);
  CHECK(took < 3s);
  CHECK(f.exit_of("stuck") == caf::exit_reason::kill);
  CHECK(f.exit_of("a") == caf::exit_reason::user_shutdown);
  CHECK(f.exit_of("c") == caf::exit_reason::user_shutdown);
  auto log = f.wait_log(3);
  REQUIRE(log.size() == 3);
  CHECK(log.front() == "stop:c"); // reverse order; stuck logs from its cleanup
  std::sort(log.begin(), log.end());
  CHECK(log == strs({"stop:a", "stop:c", "stop:stuck"}));
}

TEST_CASE("a zero shutdown timeout kills the child at once", "[actors][supervision]") {
  fixture f;
  supervisor_config c;
  c.name = "sup";
  c.children.push_back(hung_spec(f.log, "stuck", 0ms));
  auto sup = f.start(std::move(c));
  auto t0 = std::chrono::steady_clock::now();
  bool ok = false;
  shutdown(f, sup, &ok);
  CHECK(ok);
  CHECK(std::chrono::steady_clock::now() - t0 < 1s);
  CHECK(f.exit_of("stuck") == caf::exit_reason::kill);
}

TEST_CASE("an exit message to the supervisor stops its children and it exits with that reason",
          "[actors][supervision]") {
  fixture f;
  supervisor_config c;
  c.name = "sup";
  for (auto n : {"a", "b"})
    c.children.push_back(worker_spec(f.log, n));
  auto sup = caf::actor_cast<caf::actor>(f.start(std::move(c)));
  f.self->monitor(sup);
  f.wait_log(2);
  f.log->clear();
  f.self->send_exit(sup, caf::exit_reason::user_shutdown);
  auto dm = f.wait_down(sup);
  CHECK(dm.reason == caf::exit_reason::user_shutdown);
  CHECK(f.log->events() == strs({"stop:b", "stop:a"}));
}

TEST_CASE("a killed supervisor takes its children with it", "[actors][supervision]") {
  fixture f;
  supervisor_config c;
  c.name = "sup";
  c.children.push_back(worker_spec(f.log, "a"));
  c.children.push_back(hung_spec(f.log, "stuck", 5000ms));
  auto sup = f.start(std::move(c));
  auto kids = f.children(sup);
  for (auto& k : kids)
    f.self->monitor(k.handle);
  f.self->send_exit(sup, caf::exit_reason::kill);
  for (auto& k : kids)
    CHECK(f.wait_down(k.handle).reason == caf::exit_reason::kill);
}

TEST_CASE("a failed initial start stops the started children and the supervisor exits",
          "[actors][supervision]") {
  fixture f;
  supervisor_config c;
  c.name = "sup";
  c.children.push_back(worker_spec(f.log, "a"));
  child_spec bad;
  bad.name = "bad";
  bad.start = [](caf::actor_system&) -> caf::actor { throw std::runtime_error("no device"); };
  c.children.push_back(std::move(bad));
  c.children.push_back(worker_spec(f.log, "never"));
  auto sup = caf::actor_cast<caf::actor>(f.start(std::move(c)));
  f.self->monitor(sup);
  auto dm = f.wait_down(sup);
  CHECK(dm.reason.code() == static_cast<std::uint8_t>(supervision_errc::child_start_failed));
  CHECK(f.sys.render(dm.reason).find("no device") != std::string::npos);
  CHECK(f.wait_log(2) == strs({"start:a", "stop:a"}));
}

TEST_CASE("an inner supervisor that gives up is restarted by the outer one",
          "[actors][supervision]") {
  fixture f;
  supervisor_config inner;
  inner.name = "inner";
  inner.max_restarts = 0; // any crash makes it give up
  inner.children.push_back(worker_spec(f.log, "x"));
  inner.children.push_back(worker_spec(f.log, "y"));
  supervisor_config outer;
  outer.name = "outer";
  outer.children.push_back(worker_spec(f.log, "w"));
  outer.children.push_back(supervisor_child(inner));
  auto sup = f.start(std::move(outer));
  auto kids = f.children(sup);
  REQUIRE(kids.size() == 2);
  CHECK(kids[1].name == "inner");
  auto inner_h = caf::actor_cast<supervisor_actor>(kids[1].handle);
  f.self->send(f.child(inner_h, "x"), crash_atom::value);
  // The inner supervisor has no listener; the outer one reports.
  auto ex = f.next<child_exited>();
  CHECK(ex.supervisor == "outer");
  CHECK(ex.child == "inner");
  CHECK(ex.reason.code()
        == static_cast<std::uint8_t>(supervision_errc::restart_intensity_exceeded));
  auto ev = f.next<child_restarted>();
  CHECK(ev.child == "inner");
  auto again = f.children(caf::actor_cast<supervisor_actor>(f.child(sup, "inner")));
  REQUIRE(again.size() == 2);
  CHECK(again[0].running);
  CHECK(again[1].running);
  // Shutting the outer one down takes the whole tree down in order.
  f.log->clear();
  bool ok = false;
  shutdown(f, sup, &ok);
  CHECK(ok);
  CHECK(f.log->events() == strs({"stop:y", "stop:x", "stop:w"}));
}

TEST_CASE("children can be added and removed at run time", "[actors][supervision]") {
  fixture f;
  supervisor_config c;
  c.name = "sup";
  c.children.push_back(worker_spec(f.log, "a"));
  auto sup = f.start(std::move(c));
  caf::actor added;
  f.self->request(sup, wait_limit, start_child_atom::value, worker_spec(f.log, "b"))
      .receive([&](caf::actor& h) { added = h; },
               [&](caf::error& e) { FAIL(f.sys.render(e)); });
  REQUIRE(added);
  auto kids = f.children(sup);
  REQUIRE(kids.size() == 2);
  CHECK(kids[1].name == "b");
  CHECK(kids[1].handle == added);

  caf::error dup;
  f.self->request(sup, wait_limit, start_child_atom::value, worker_spec(f.log, "b"))
      .receive([&](caf::actor&) {}, [&](caf::error& e) { dup = e; });
  CHECK(dup.code() == static_cast<std::uint8_t>(supervision_errc::duplicate_child));

  bool stopped = false;
  f.self->request(sup, wait_limit, stop_child_atom::value, std::string{"a"})
      .receive([&](caf::ok_atom) { stopped = true; },
               [&](caf::error& e) { FAIL(f.sys.render(e)); });
  CHECK(stopped);
  CHECK(f.exit_of("a") == caf::exit_reason::user_shutdown);
  kids = f.children(sup);
  REQUIRE(kids.size() == 1);
  CHECK(kids[0].name == "b");

  caf::error unknown;
  f.self->request(sup, wait_limit, stop_child_atom::value, std::string{"zz"})
      .receive([&](caf::ok_atom) {}, [&](caf::error& e) { unknown = e; });
  CHECK(unknown.code() == static_cast<std::uint8_t>(supervision_errc::unknown_child));
}

TEST_CASE("supervision messages survive a serialization round trip", "[actors][supervision]") {
  fixture f;
  child_restarted ev{"sup", "b",
                     make_error(supervision_errc::restart_intensity_exceeded,
                                caf::make_message(std::string{"b"}, std::uint32_t{4},
                                                  std::int64_t{5000})),
                     "a", 7};
  std::vector<char> buf;
  {
    caf::binary_serializer sink{f.sys, buf};
    REQUIRE_FALSE(sink(ev));
  }
  child_restarted back;
  {
    caf::binary_deserializer source{f.sys, buf};
    REQUIRE_FALSE(source(back));
  }
  CHECK(back.supervisor == "sup");
  CHECK(back.child == "b");
  CHECK(back.cause == "a");
  CHECK(back.restarts == 7);
  CHECK(back.reason == ev.reason);
  CHECK(f.sys.render(back.reason)
        == "supervision: restart_intensity_exceeded: child 'b' needed 4 restarts within "
           "5000 ms");
  // Announced under dseek's names (what a remote node must use too).
  auto& types = f.sys.config().type_names_by_rtti;
  CHECK(types.count(std::type_index(typeid(child_info))) == 1);
  CHECK(types.count(std::type_index(typeid(std::vector<child_info>))) == 1);
  CHECK(types.count(std::type_index(typeid(child_exited))) == 1);
}

TEST_CASE("a shutdown during a group restart stops everything and restarts nothing",
          "[actors][supervision]") {
  fixture f;
  supervisor_config c;
  c.name = "sup";
  c.strategy = restart_strategy::one_for_all;
  c.children.push_back(worker_spec(f.log, "a"));
  c.children.push_back(hung_spec(f.log, "stuck", 400ms));
  c.children.push_back(worker_spec(f.log, "c"));
  auto sup = f.start(std::move(c));
  auto sup_h = caf::actor_cast<caf::actor>(sup);
  f.self->monitor(sup_h);
  f.wait_log(3);
  f.log->clear();
  // c crashes; the group stop then waits on stuck (400 ms) when the shutdown comes.
  f.self->send(f.child(sup, "c"), crash_atom::value);
  CHECK(f.next<child_exited>().child == "c");
  bool ok = false;
  shutdown(f, sup, &ok);
  CHECK(ok);
  CHECK(f.wait_down(sup_h).reason == caf::exit_reason::normal);
  auto log = f.wait_log(3);
  std::sort(log.begin(), log.end());
  CHECK(log == strs({"stop:a", "stop:c", "stop:stuck"})); // no "start:"
  CHECK(f.exit_of("stuck") == caf::exit_reason::kill);
  // No restart was reported.
  bool restarted = false;
  f.self->receive([&](child_restarted&) { restarted = true; },
                  caf::after(std::chrono::milliseconds(50)) >> [] {});
  CHECK_FALSE(restarted);
}

TEST_CASE("stop_child waits for a running group restart to finish", "[actors][supervision]") {
  fixture f;
  supervisor_config c;
  c.name = "sup";
  c.strategy = restart_strategy::rest_for_one;
  c.children.push_back(worker_spec(f.log, "a"));
  c.children.push_back(hung_spec(f.log, "stuck", 300ms));
  auto sup = f.start(std::move(c));
  f.self->send(f.child(sup, "a"), crash_atom::value);
  CHECK(f.next<child_exited>().child == "a"); // the group stop has begun
  bool stopped = false;
  f.self->request(sup, wait_limit, stop_child_atom::value, std::string{"a"})
      .receive([&](caf::ok_atom) { stopped = true; },
               [&](caf::error& e) { FAIL(f.sys.render(e)); });
  CHECK(stopped);
  auto kids = f.children(sup);
  REQUIRE(kids.size() == 1);
  CHECK(kids[0].name == "stuck");
  CHECK(kids[0].running);
  CHECK(kids[0].restarts == 1);
}
