#include "server/ranks.h"

#include <fmt/ranges.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <thread>

#include "core/error.h"
#include "core/log.h"
#include "distributed/process_group.h"

namespace tandem::server {

RankLayout rank_layout(const ServerArgs& a) {
  RankLayout r;
  r.world = static_cast<int>(a.tp_size);
  r.per_node = static_cast<int>(a.tp_size / a.nnodes);
  r.local_rank = static_cast<int>(a.dist_local_rank);
  if (r.local_rank < 0 || r.local_rank >= r.per_node)
    throw InvalidArgument(
        fmt::format("--dist-local-rank {} outside [0, {})", r.local_rank, r.per_node));
  r.rank = static_cast<int>(a.node_rank) * r.per_node + r.local_rank;
  r.gpu = static_cast<int>(a.base_gpu_id) + r.local_rank;
  return r;
}

std::vector<std::string> own_command_line() {
  std::ifstream f("/proc/self/cmdline", std::ios::binary);
  const std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i < all.size(); ++i)
    if (all[i] == '\0') {
      out.push_back(all.substr(start, i - start));
      start = i + 1;
    }
  if (out.empty()) fail("cannot read this process's command line from /proc/self/cmdline");
  return out;
}

LocalRanks::LocalRanks(const RankLayout& me, const std::vector<std::string>& argv,
                       const std::vector<std::string>& extra) {
  const pid_t parent = getpid();
  for (int i = 1; i < me.per_node; ++i) {
    std::vector<std::string> args = argv;
    args.insert(args.end(), extra.begin(), extra.end());
    args.push_back("--dist-local-rank");
    args.push_back(std::to_string(i));
    std::vector<char*> cargs;
    for (std::string& s : args) cargs.push_back(s.data());
    cargs.push_back(nullptr);
    const pid_t pid = fork();
    if (pid < 0) fail("cannot start local rank {}: fork failed", i);
    if (pid == 0) {
      // Between fork and exec only async-signal-safe calls. The child dies with its launcher,
      // and leaves Ctrl-C to rank 0 (which stops everyone in order).
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(1);
      // The launcher blocks SIGINT/SIGTERM for its signal thread; a blocked mask survives exec.
      sigset_t none;
      sigemptyset(&none);
      sigprocmask(SIG_SETMASK, &none, nullptr);
      signal(SIGINT, SIG_IGN);
      execv("/proc/self/exe", cargs.data());
      _exit(127);
    }
    pids_.push_back(pid);
    reaped_.push_back(false);
  }
  if (!pids_.empty())
    log_info("started local ranks 1..{} of this node (pids {})", me.per_node - 1,
             fmt::join(pids_, ", "));
}

void LocalRanks::check_alive() {
  for (size_t i = 0; i < pids_.size(); ++i) {
    int status = 0;
    if (reaped_[i] || waitpid(pids_[i], &status, WNOHANG) != pids_[i]) continue;
    reaped_[i] = true;
    throw PeerError(fmt::format(
        "local rank {} (pid {}) exited ({}) before the ranks could join; its error is above", i + 1,
        pids_[i],
        WIFEXITED(status) ? fmt::format("exit code {}", WEXITSTATUS(status))
                          : fmt::format("signal {}", WTERMSIG(status))));
  }
}

LocalRanks::~LocalRanks() {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (size_t i = 0; i < pids_.size(); ++i) {
    if (reaped_[i]) continue;
    const pid_t pid = pids_[i];
    int status = 0;
    while (waitpid(pid, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
}

}  // namespace tandem::server
