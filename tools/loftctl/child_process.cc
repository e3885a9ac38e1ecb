#include "tools/loftctl/child_process.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fstream>
#include <thread>

namespace loft::ctl {

Status Spawn(Child& c) {
  if (c.argv.empty()) return InvalidArgument("no command for " + c.name);
  // Built before fork: the child only makes async-signal-safe calls.
  std::vector<char*> args;
  for (auto& a : c.argv) args.push_back(a.data());
  args.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) return IOError("fork failed for " + c.name);
  if (pid == 0) {
    if (c.own_group) ::setpgid(0, 0);
    ::signal(SIGPIPE, SIG_DFL);  // loftctl ignores it (exit_signals.h); an exec keeps "ignored"
    // stdin from /dev/null: a child in a background process group that read
    // the terminal would be stopped (SIGTTIN) instead of failing.
    int in = ::open("/dev/null", O_RDONLY);
    if (in >= 0) {
      ::dup2(in, 0);
      if (in != 0) ::close(in);
    }
    int fd = ::open(c.log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      ::close(fd);
    }
    ::execv(args[0], args.data());
    std::fprintf(stderr, "exec %s failed: %s\n", args[0], std::strerror(errno));
    ::_exit(127);
  }
  if (c.own_group) ::setpgid(pid, pid);  // also here: no window before the child's own call
  c.pid = pid;
  c.pgid = c.own_group ? pid : -1;
  c.wait_status.reset();
  c.exited_at_s = 0;
  return OkStatus();
}

bool Poll(Child& c, double now_s) {
  if (c.pid <= 0) return false;
  int status = 0;
  if (::waitpid(c.pid, &status, WNOHANG) != c.pid) return false;
  c.pid = -1;
  c.wait_status = status;
  c.exited_at_s = now_s;
  return true;
}

namespace {

// Signals the child (its group when it has one; the group may outlive its leader).
void Signal(const Child& c, int sig) {
  if (c.pgid > 0) {
    ::kill(-c.pgid, sig);
  } else if (c.pid > 0) {
    ::kill(c.pid, sig);
  }
}

// Reaps what is left of the child's group (its orphans come to this
// process when it is a subreaper, see BecomeSubreaper) and says whether
// anything of it still runs.
bool Gone(Child& c) {
  if (c.pid > 0) {
    pid_t r = ::waitpid(c.pid, nullptr, WNOHANG);
    if (r == c.pid || (r < 0 && errno == ECHILD)) c.pid = -1;
  }
  if (c.pgid > 0) {
    pid_t r = 0;
    while ((r = ::waitpid(-c.pgid, nullptr, WNOHANG)) > 0) {
    }
    // ECHILD: no process of ours is left in the group. What a trainer
    // starts is our descendant (this process is a subreaper), so the group
    // is over; a later kill(-pgid) could reach an unrelated group that got
    // the same number, so the group is forgotten here.
    if ((r < 0 && errno == ECHILD) || (::kill(-c.pgid, 0) != 0 && errno == ESRCH)) c.pgid = -1;
  }
  return c.pid <= 0 && c.pgid <= 0;
}

}  // namespace

Status BecomeSubreaper() {
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0)
    return IOError(std::string("prctl(PR_SET_CHILD_SUBREAPER): ") + std::strerror(errno) +
                   " (what a trainer starts in the background may outlive the run)");
  return OkStatus();
}

void KillNow(Child& c) {
  Signal(c, SIGKILL);
  if (c.pid > 0) ::waitpid(c.pid, nullptr, 0);
  c.pid = -1;
  if (c.pgid > 0) {
    // Reap the group's other members (SIGKILLed above, dying now) so they
    // do not stay zombies until loftctl exits; at most ~2 s.
    for (int waited_ms = 0; waited_ms < 2000; waited_ms += 10) {
      pid_t r = 0;
      while ((r = ::waitpid(-c.pgid, nullptr, WNOHANG)) > 0) {
      }
      if (r < 0) break;  // ECHILD: none left
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  c.pgid = -1;
}

void StopAll(const std::vector<Child*>& children, int grace_ms) {
  std::vector<Child*> left;
  for (Child* c : children) {
    if (!Gone(*c)) {
      Signal(*c, SIGTERM);
      left.push_back(c);
    }
  }
  for (int waited = 0; waited < grace_ms && !left.empty(); waited += 20) {
    std::erase_if(left, [](Child* c) { return Gone(*c); });
    if (!left.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (Child* c : left) KillNow(*c);
}

void Stop(Child& c, int grace_ms) {
  StopAll({&c}, grace_ms);
}

std::string DescribeWaitStatus(int wait_status) {
  if (WIFEXITED(wait_status)) return fmt::format("status {}", WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status)) {
    const int sig = WTERMSIG(wait_status);
    const char* name = ::strsignal(sig);
    return fmt::format("signal {} ({})", sig, name ? name : "?");
  }
  return fmt::format("wait status {}", wait_status);
}

std::string LogTail(const std::string& path, int lines) {
  std::ifstream in(path);
  std::deque<std::string> tail;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    tail.push_back(std::move(line));
    if (static_cast<int>(tail.size()) > lines) tail.pop_front();
  }
  std::string out;
  for (const auto& l : tail) out += (out.empty() ? "" : "\n") + l;
  return out;
}

ExitVerdict JudgeTrainerExit(int wait_status, const JobProgress& job, double seconds_since_exit,
                             double grace_s) {
  const bool clean = WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0;
  if (!clean) return ExitVerdict::kFail;
  if (job.finished) return ExitVerdict::kOk;
  if (job.last_iteration < 0 || job.iteration < job.last_iteration) return ExitVerdict::kFail;
  return seconds_since_exit < grace_s ? ExitVerdict::kWait : ExitVerdict::kFail;
}

Status ChildExitError(const Child& c, const std::string& what, bool trainer, const JobProgress& job,
                      int tail_lines) {
  const std::string how = c.wait_status ? DescribeWaitStatus(*c.wait_status) : std::string("unknown status");
  std::string where;
  if (job.finished) {
    where = "after the job ended";
  } else if (job.iteration < 0) {
    where = "before the job started";
  } else {
    where =
        fmt::format("at iteration {} of {}, before the job ended", job.iteration + 1, job.last_iteration + 1);
  }
  std::string msg = fmt::format("{} exited with {} {}", what, how, where);
  if (trainer && c.wait_status && WIFEXITED(*c.wait_status) && WEXITSTATUS(*c.wait_status) == 0 &&
      !job.finished)
    msg += " (a trainer must take batches until the job's last iteration)";
  msg += fmt::format("; log {}", c.log);
  const std::string tail = LogTail(c.log, tail_lines);
  if (tail.empty()) {
    msg += " (empty)";
  } else {
    msg += ", last lines:";
    std::size_t at = 0;
    while (at <= tail.size()) {
      std::size_t nl = tail.find('\n', at);
      if (nl == std::string::npos) nl = tail.size();
      msg += "\n    " + tail.substr(at, nl - at);
      at = nl + 1;
    }
  }
  return Internal(msg);
}

}  // namespace loft::ctl
