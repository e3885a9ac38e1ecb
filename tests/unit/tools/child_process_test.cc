#include "tools/loftctl/child_process.h"

#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>

using namespace loft::ctl;

namespace {

// A real wait status: fork a child that exits with `code` (or raises `sig`).
int WaitStatusOf(int code, int sig = 0) {
  pid_t pid = ::fork();
  if (pid == 0) {
    if (sig) ::kill(::getpid(), sig);
    ::_exit(code);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

JobProgress Job(int64_t iteration, int64_t last, bool finished = false) {
  JobProgress p;
  p.iteration = iteration;
  p.last_iteration = last;
  p.finished = finished;
  return p;
}

}  // namespace

TEST_CASE("a trainer exit fails the run unless it is status 0 at the job's end") {
  const int ok = WaitStatusOf(0), three = WaitStatusOf(3), killed = WaitStatusOf(0, SIGKILL);
  // Non-zero or a signal: always a failure, even after the job ended.
  CHECK(JudgeTrainerExit(three, Job(-1, 19), 0, 15) == ExitVerdict::kFail);
  CHECK(JudgeTrainerExit(killed, Job(5, 19), 0, 15) == ExitVerdict::kFail);
  CHECK(JudgeTrainerExit(three, Job(19, 19, true), 0, 15) == ExitVerdict::kFail);
  // Status 0 before the last iteration: failure at once.
  CHECK(JudgeTrainerExit(ok, Job(-1, 19), 0, 15) == ExitVerdict::kFail);
  CHECK(JudgeTrainerExit(ok, Job(18, 19), 0, 15) == ExitVerdict::kFail);
  // Status 0 in the last iteration: wait for the job's end, up to the grace.
  CHECK(JudgeTrainerExit(ok, Job(19, 19), 3, 15) == ExitVerdict::kWait);
  CHECK(JudgeTrainerExit(ok, Job(19, 19), 16, 15) == ExitVerdict::kFail);
  CHECK(JudgeTrainerExit(ok, Job(19, 19, true), 100, 15) == ExitVerdict::kOk);
}

TEST_CASE("exit errors name the process, its status, where the job was and its log's last lines") {
  CHECK(DescribeWaitStatus(WaitStatusOf(3)) == "status 3");
  CHECK(DescribeWaitStatus(WaitStatusOf(0, SIGKILL)).rfind("signal 9 (", 0) == 0);
  const auto log =
      std::filesystem::temp_directory_path() / ("child_process_test_" + std::to_string(::getpid()));
  {
    std::ofstream f(log);
    for (int i = 0; i < 12; ++i) f << "line " << i << "\n\n";
  }
  CHECK(LogTail(log.string(), 2) == "line 10\nline 11");
  Child c{"trainer-edge-2", {"/bin/sh"}, log.string()};
  c.wait_status = WaitStatusOf(0);
  const auto st = ChildExitError(c, "the trainer of node edge-2", /*trainer=*/true, Job(4, 19), 3);
  INFO(st.message());
  CHECK(st.message().find("the trainer of node edge-2 exited with status 0 at iteration 5 of 20") == 0);
  CHECK(st.message().find("must take batches until the job's last iteration") != std::string::npos);
  CHECK(st.message().find("log " + log.string()) != std::string::npos);
  CHECK(st.message().find("\n    line 9\n    line 10\n    line 11") != std::string::npos);
  CHECK(st.message().find("line 8") == std::string::npos);
  c.wait_status = WaitStatusOf(1);
  const auto agent = ChildExitError(c, "agent edge-2", /*trainer=*/false, Job(-1, 19), 1);
  CHECK(agent.message().find("agent edge-2 exited with status 1 before the job started") == 0);
  std::filesystem::remove(log);
}

TEST_CASE("Spawn records an exit Poll sees and StopAll ends a group with its background children") {
  Child quick{"quick", {"/bin/sh", "-c", "exit 4"}, "/dev/null"};
  REQUIRE(Spawn(quick).ok());
  for (int i = 0; i < 500 && !Poll(quick, 1.5); ++i) ::usleep(10000);
  REQUIRE(quick.wait_status);
  CHECK(DescribeWaitStatus(*quick.wait_status) == "status 4");
  CHECK(quick.exited_at_s == 1.5);

  REQUIRE(BecomeSubreaper().ok());
  Child group{"group", {"/bin/sh", "-c", "sleep 30 & sleep 31"}, "/dev/null"};
  group.own_group = true;
  REQUIRE(Spawn(group).ok());
  ::usleep(200000);
  const pid_t pgid = group.pgid;
  REQUIRE(pgid > 0);
  StopAll({&group}, 3000);
  CHECK_FALSE(group.wait_status);  // stopped by us: not an exit of its own
  CHECK(group.pid == -1);
  CHECK((::kill(-pgid, 0) != 0 && errno == ESRCH));  // the background sleep went too
}

TEST_CASE("a child reads /dev/null as stdin and KillNow reaps its whole group") {
  const auto log =
      std::filesystem::temp_directory_path() / ("child_process_stdin_" + std::to_string(::getpid()));
  std::filesystem::remove(log);
  // `read` on /dev/null ends at once (EOF, status 1); on a terminal it would
  // wait or, in a background group, stop the child.
  Child reader{"reader", {"/bin/sh", "-c", "read x; echo read-status $?"}, log.string()};
  reader.own_group = true;
  REQUIRE(Spawn(reader).ok());
  for (int i = 0; i < 500 && !Poll(reader, 1.0); ++i) ::usleep(10000);
  REQUIRE(reader.wait_status);
  CHECK(LogTail(log.string(), 1) == "read-status 1");
  std::filesystem::remove(log);

  REQUIRE(BecomeSubreaper().ok());
  Child group{"group", {"/bin/sh", "-c", "sleep 30 & sleep 30 & sleep 31"}, "/dev/null"};
  group.own_group = true;
  REQUIRE(Spawn(group).ok());
  ::usleep(200000);
  const pid_t pgid = group.pgid;
  REQUIRE(pgid > 0);
  KillNow(group);
  CHECK(group.pid == -1);
  CHECK(group.pgid == -1);
  // Nothing of the group is left, not even a zombie (a zombie still answers kill(-pgid, 0)).
  CHECK((::kill(-pgid, 0) != 0 && errno == ESRCH));
  CHECK((::waitpid(-pgid, nullptr, WNOHANG) < 0 && errno == ECHILD));
}
