#include "tests/daemon/harness.h"
#include "tests/temp_path.h"

#include <fcntl.h>
#include <infiniband/verbs.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

namespace isoroce::test {
namespace {

std::string self_dir() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  std::string p(buf, n > 0 ? static_cast<size_t>(n) : 0);
  return p.substr(0, p.rfind('/'));
}

int counter() {
  static int n = 0;
  return ++n;
}

}  // namespace

std::string bin_path(const std::string& name) { return self_dir() + "/" + name; }
std::string daemon_path() { return bin_path("isoroced"); }

DaemonProcess::DaemonProcess(std::vector<std::string> args, const std::string& netns) {
  const std::string tag = std::to_string(getpid()) + "_" + std::to_string(counter());
  socket_ = "/tmp/isoroce-test-" + tag + ".sock";
  prefix_ = "isoroce_test_" + tag;
  log_ = temp_path("isoroce-test-", tag + ".log");  // kept if a test fails
  std::vector<std::string> argv;
  if (!netns.empty()) argv = {"/usr/sbin/ip", "netns", "exec", netns};
  argv.push_back(daemon_path());
  argv.insert(argv.end(), {"--socket", socket_, "--file-prefix", prefix_});
  // EAL arguments come last, after "--": keep them there.
  auto dash = std::find(args.begin(), args.end(), "--");
  argv.insert(argv.end(), args.begin(), dash);
  argv.insert(argv.end(), dash, args.end());
  // posix_spawn, not fork: a test process that registered memory through
  // libisoroce-verbs has heap and stack pages on MAP_SHARED memfds, and a
  // forked child writing its own heap or stack before exec would write the
  // parent's. posix_spawn's child touches nothing but a stack of its own.
  std::vector<char*> v;
  for (auto& a : argv) v.push_back(a.data());
  v.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, v[0], &fa, nullptr, v.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    pid_ = -1;
    return;
  }
  pid_ = pid;
  for (int i = 0; i < 400; ++i) {
    std::string err;
    if (ctrl::Client::connect(socket_, &err)) {
      ok_ = true;
      return;
    }
    int st;
    if (waitpid(pid_, &st, WNOHANG) == pid_) {
      pid_ = -1;
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

std::string DaemonProcess::log() const {
  std::ifstream f(log_);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

int DaemonProcess::stop(int timeout_ms) {
  if (pid_ <= 0) return -1;
  kill(pid_, SIGTERM);
  for (int waited = 0; waited < timeout_ms; waited += 20) {
    int st;
    if (waitpid(pid_, &st, WNOHANG) == pid_) {
      pid_ = -1;
      return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
  return -1;
}

DaemonProcess::~DaemonProcess() {
  stop();
  unlink(socket_.c_str());
}

Verbs::Verbs(const std::string& socket, const std::string& device) {
  std::string err;
  client_ = ctrl::Client::connect(socket, &err);
  if (!client_) return;
  json r = call({{"op", "open"}, {"device", device}});
  if (!r["ok"].get<bool>()) return;
  device_ = r["device"];
  r = call({{"op", "alloc_pd"}});
  if (!r["ok"].get<bool>()) return;
  pd_ = r["pd"].get<uint32_t>();
  ok_ = true;
}

Verbs::~Verbs() {
  client_.reset();  // the daemon reclaims everything
  for (auto& b : bufs_) {
    munmap(b->data, b->len);
    close(b->fd);
  }
}

Buffer* Verbs::reg(uint64_t len, uint32_t access) {
  auto b = std::make_unique<Buffer>();
  b->fd = memfd_create("isoroce-test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  b->len = len;
  if (b->fd < 0 || ftruncate(b->fd, static_cast<off_t>(len)) != 0) return nullptr;
  b->data = static_cast<uint8_t*>(mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, b->fd, 0));
  if (b->data == MAP_FAILED) return nullptr;
  const int fds[] = {b->fd};
  json r = client_->call({{"op", "reg_mr"}, {"pd", pd_}, {"length", len}, {"offset", 0},
                          {"iova", b->iova()}, {"access", access}},
                         fds);
  if (!r["ok"].get<bool>()) return nullptr;
  b->lkey = r["lkey"].get<uint32_t>();
  b->rkey = r["rkey"].get<uint32_t>();
  bufs_.push_back(std::move(b));
  return bufs_.back().get();
}

uint32_t Verbs::create_cq(int cqe) {
  json r = call({{"op", "create_cq"}, {"cqe", cqe}});
  return r["ok"].get<bool>() ? r["cq"].get<uint32_t>() : 0;
}

uint32_t Verbs::create_qp(uint32_t cq, const std::string& type, uint32_t depth) {
  json r = call({{"op", "create_qp"}, {"pd", pd_}, {"send_cq", cq}, {"recv_cq", cq}, {"type", type},
                 {"max_send_wr", depth}, {"max_recv_wr", depth}, {"max_send_sge", 2}, {"max_recv_sge", 2},
                 {"max_inline_data", 256}});
  return r["ok"].get<bool>() ? r["qpn"].get<uint32_t>() : 0;
}

json Verbs::connect_rc(uint32_t qpn, const std::string& dgid, uint32_t dest_qpn, uint32_t my_psn,
                       uint32_t peer_psn, uint32_t timeout, uint32_t retry_cnt, uint32_t path_mtu) {
  const uint32_t access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                          IBV_ACCESS_REMOTE_ATOMIC;
  json r = call({{"op", "modify_qp"}, {"qpn", qpn},
                 {"attr", {{"qp_state", "INIT"}, {"pkey_index", 0}, {"port_num", 1}, {"qp_access_flags", access}}}});
  if (!r["ok"].get<bool>()) return r;
  r = call({{"op", "modify_qp"}, {"qpn", qpn},
            {"attr", {{"qp_state", "RTR"}, {"path_mtu", path_mtu}, {"dest_qp_num", dest_qpn}, {"rq_psn", peer_psn},
                      {"max_dest_rd_atomic", 16}, {"min_rnr_timer", 1}, {"ah_attr", {{"dgid", dgid}}}}}});
  if (!r["ok"].get<bool>()) return r;
  return call({{"op", "modify_qp"}, {"qpn", qpn},
               {"attr", {{"qp_state", "RTS"}, {"sq_psn", my_psn}, {"timeout", timeout}, {"retry_cnt", retry_cnt},
                         {"rnr_retry", 7}, {"max_rd_atomic", 16}}}});
}

std::vector<json> Verbs::wait(uint32_t cq, size_t n, int timeout_ms) {
  std::vector<json> out;
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (out.size() < n && std::chrono::steady_clock::now() < until) {
    json r = call({{"op", "poll_cq"}, {"cq", cq}, {"max", 64}});
    if (!r["ok"].get<bool>()) break;
    for (const json& wc : r["wc"]) out.push_back(wc);
    if (r["wc"].empty()) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return out;
}

json sge(const Buffer& b, uint64_t off, uint32_t len) {
  return {{"addr", b.iova() + off}, {"length", len}, {"lkey", b.lkey}};
}

}  // namespace isoroce::test
