#include "tools/ctl/live_run.h"

#include <arpa/inet.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <deque>
#include <functional>
#include <thread>

#include "ctrl/client.h"
#include "ctrl/wire_json.h"
#include "dataplane/sim/event_queue.h"
#include "dataplane/sim/simulator.h"
#include "workload/flow.h"
#include "workload/flow_host.h"

namespace isoroce::tools {
namespace {

using nlohmann::json;
using sim::Picos;
using workload::Flow;
using workload::Region;

// What the flows see of the run: their delayed receives, their QPs, the end.
struct World final : workload::FlowDriver {
  explicit World(const sim::Scenario& s) : scenario(s) {}
  void schedule_receives(Picos at, Flow& flow) override {
    events.push(at, sim::EventKind::kFlowRecvStart, flow.index());
  }
  void bind_qp(uint32_t, uint32_t, const workload::QpRef&) override {}  // no frames to attribute
  void flow_finished(Flow&) override { --unfinished; }

  sim::Scenario scenario;
  sim::EventQueue events;
  std::vector<workload::FlowHost*> flow_hosts;
  std::vector<std::unique_ptr<Flow>> flows;
  uint64_t next_region = 1;
  size_t unfinished = 0;
};

template <typename T>
verbs::Result<T> handle_of(const json& r, const char* key) {
  if (!r.value("ok", false)) return verbs::Result<T>::error(r.value("errno", EIO));
  return static_cast<T>(r[key].get<uint64_t>());
}
int rc_of(const json& r) { return r.value("ok", false) ? 0 : r.value("errno", EIO); }

json sg_json(std::span<const transport::Sge> sg) {
  json a = json::array();
  for (const auto& s : sg) a.push_back({{"addr", s.addr}, {"length", s.length}, {"lkey", s.lkey}});
  return a;
}

// The verbs a flow calls, as control-socket requests.
class RemoteVerbs final : public workload::FlowVerbs {
 public:
  explicit RemoteVerbs(ctrl::Client& c) : c_(c) {}
  verbs::Result<transport::CqHandle> create_cq(int cqe) override {
    return handle_of<transport::CqHandle>(c_.call({{"op", "create_cq"}, {"cqe", cqe}}), "cq");
  }
  verbs::Result<transport::SrqHandle> create_srq(transport::PdHandle pd, const ibv_srq_attr& a) override {
    return handle_of<transport::SrqHandle>(
        c_.call({{"op", "create_srq"}, {"pd", pd}, {"max_wr", a.max_wr}, {"max_sge", a.max_sge}, {"srq_limit", a.srq_limit}}),
        "srq");
  }
  verbs::Result<transport::AhHandle> create_ah(transport::PdHandle pd, const transport::AhAttr& a) override {
    return handle_of<transport::AhHandle>(
        c_.call({{"op", "create_ah"}, {"pd", pd}, {"dgid", ctrl::gid_text(a.dgid)}, {"traffic_class", a.traffic_class},
                 {"hop_limit", a.hop_limit}, {"flow_label", a.flow_label}, {"sl", a.sl}}),
        "ah");
  }
  verbs::Result<wire::Qpn> create_qp(const transport::QpCreate& c) override {
    json req = {{"op", "create_qp"}, {"pd", c.pd}, {"send_cq", c.send_cq}, {"recv_cq", c.recv_cq},
                {"type", c.init.qp_type == IBV_QPT_UD ? "ud" : "rc"}, {"max_send_wr", c.init.cap.max_send_wr},
                {"max_recv_wr", c.init.cap.max_recv_wr}, {"max_send_sge", c.init.cap.max_send_sge},
                {"max_recv_sge", c.init.cap.max_recv_sge}, {"max_inline_data", c.init.cap.max_inline_data},
                {"sq_sig_all", c.init.sq_sig_all}};
    if (c.use_srq) req["srq"] = c.srq;
    json r = c_.call(req);
    if (!r.value("ok", false)) return verbs::Result<wire::Qpn>::error(r.value("errno", EIO));
    return wire::Qpn(r["qpn"].get<uint32_t>());
  }
  int modify_qp(wire::Qpn qpn, const ibv_qp_attr& a, uint32_t mask) override {
    json attr = json::object();
    const json all = ctrl::qp_attr_to_json(a);
    const std::pair<uint32_t, const char*> fields[] = {
        {IBV_QP_STATE, "qp_state"}, {IBV_QP_PKEY_INDEX, "pkey_index"}, {IBV_QP_PORT, "port_num"},
        {IBV_QP_ACCESS_FLAGS, "qp_access_flags"}, {IBV_QP_QKEY, "qkey"}, {IBV_QP_PATH_MTU, "path_mtu"},
        {IBV_QP_DEST_QPN, "dest_qp_num"}, {IBV_QP_RQ_PSN, "rq_psn"}, {IBV_QP_SQ_PSN, "sq_psn"},
        {IBV_QP_MAX_DEST_RD_ATOMIC, "max_dest_rd_atomic"}, {IBV_QP_MAX_QP_RD_ATOMIC, "max_rd_atomic"},
        {IBV_QP_MIN_RNR_TIMER, "min_rnr_timer"}, {IBV_QP_TIMEOUT, "timeout"}, {IBV_QP_RETRY_CNT, "retry_cnt"},
        {IBV_QP_RNR_RETRY, "rnr_retry"}, {IBV_QP_AV, "ah_attr"}};
    for (const auto& [bit, name] : fields)
      if (mask & bit) attr[name] = all[name];
    if (mask & IBV_QP_CUR_STATE) attr["cur_qp_state"] = ctrl::state_name(a.cur_qp_state);
    return rc_of(c_.call({{"op", "modify_qp"}, {"qpn", qpn.value()}, {"attr", attr}}));
  }
  int post_send(Picos, wire::Qpn qpn, const transport::SendWr& w) override {
    static const char* const kOps[] = {"write", "write_imm", "send", "send_imm", "read", "cmp_swap", "fetch_add"};
    if (static_cast<unsigned>(w.opcode) >= std::size(kOps)) return EOPNOTSUPP;
    json wr = {{"wr_id", w.wr_id}, {"opcode", kOps[w.opcode]}, {"send_flags", w.send_flags},
               {"sg", sg_json(w.sg_list)}, {"imm_data", ntohl(w.imm_data)}, {"remote_addr", w.remote_addr},
               {"rkey", w.rkey}, {"compare_add", w.compare_add}, {"swap", w.swap}};
    if (w.ah) wr.update({{"ah", w.ah}, {"remote_qpn", w.remote_qpn}, {"remote_qkey", w.remote_qkey}});
    return rc_of(c_.call({{"op", "post_send"}, {"qpn", qpn.value()}, {"wr", wr}}));
  }
  int post_recv(wire::Qpn qpn, const transport::RecvWr& w) override {
    return rc_of(c_.call({{"op", "post_recv"}, {"qpn", qpn.value()},
                          {"wr", {{"wr_id", w.wr_id}, {"sg", sg_json(w.sg_list)}}}}));
  }
  int post_srq_recv(transport::SrqHandle srq, const transport::RecvWr& w) override {
    return rc_of(c_.call({{"op", "post_srq_recv"}, {"srq", srq}, {"wr", {{"wr_id", w.wr_id}, {"sg", sg_json(w.sg_list)}}}}));
  }
  int set_qp_rate(Picos, wire::Qpn qpn, uint64_t bps) override {
    return rc_of(c_.call({{"op", "set_rate"}, {"qpn", qpn.value()}, {"bps", bps}}));
  }
  int set_qp_class(Picos, wire::Qpn qpn, sched::FlowClass cls, uint32_t, uint32_t) override {
    // The daemon groups a client's QPs into one application itself.
    return rc_of(c_.call({{"op", "set_class"}, {"qpn", qpn.value()}, {"class", std::string(sched::to_string(cls))}}));
  }
  int set_qp_tenant(Picos, wire::Qpn qpn, const std::string& tenant, uint32_t weight) override {
    return rc_of(c_.call({{"op", "set_tenant"}, {"qpn", qpn.value()}, {"tenant", tenant}, {"weight", weight}}));
  }

 private:
  ctrl::Client& c_;
};

// One device of a daemon, as the flows see a host.
class LiveHost final : public workload::FlowHost {
 public:
  LiveHost(World& w, uint32_t index, sim::HostConfig& cfg) : w_(w), index_(index), cfg_(cfg) {}

  std::string init() {
    std::string err;
    client_ = ctrl::Client::connect(cfg_.socket, &err);
    if (!client_) return err;
    json r = client_->call({{"op", "open"}, {"device", cfg_.device}});
    if (!r.value("ok", false)) return r.value("error", std::string("open failed"));
    const json& d = r["device"];
    if (!ctrl::parse_gid(d["gid"][0].get<std::string>(), &cfg_.ip)) return "the daemon's GID is not an address";
    cfg_.ip_text = d["ip"].get<std::string>();
    cfg_.mtu = d["active_mtu"].get<uint32_t>();
    r = client_->call({{"op", "alloc_pd"}});
    if (!r.value("ok", false)) return r.value("error", std::string("alloc_pd failed"));
    pd_ = r["pd"].get<uint32_t>();
    verbs_ = std::make_unique<RemoteVerbs>(*client_);
    return "";
  }

  uint32_t index() const override { return index_; }
  const wire::IpAddr& ip() const override { return cfg_.ip; }
  transport::PdHandle pd() const override { return pd_; }
  workload::FlowVerbs& verbs() override { return *verbs_; }

  std::optional<workload::SetupError> alloc_region(uint64_t len, uint32_t access, Region* out) override {
    const std::string key = "host[" + std::to_string(index_) + "]";
    const uint64_t size = (std::max<uint64_t>(len, 64) + 4095) / 4096 * 4096;
    const int fd = memfd_create("isoroce-ctl-run", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0 || ftruncate(fd, static_cast<off_t>(size)) != 0) {
      if (fd >= 0) close(fd);
      return sim::ScenarioError{key, std::string("memfd: ") + std::strerror(errno)};
    }
    void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      close(fd);
      return sim::ScenarioError{key, std::string("mmap: ") + std::strerror(errno)};
    }
    out->mem = std::shared_ptr<uint8_t>(static_cast<uint8_t*>(p), [size, fd](uint8_t* q) {
      munmap(q, size);
      close(fd);
    });
    out->len = size;
    out->iova = w_.next_region++ << 36;
    const int fds[] = {fd};
    json r = client_->call({{"op", "reg_mr"}, {"pd", pd_}, {"offset", 0}, {"length", size}, {"iova", out->iova},
                            {"access", access}},
                           fds);
    if (!r.value("ok", false)) return sim::ScenarioError{key, r.value("error", std::string("reg_mr failed"))};
    out->lkey = r["lkey"].get<uint32_t>();
    out->rkey = r["rkey"].get<uint32_t>();
    return std::nullopt;
  }
  void bind_cq(transport::CqHandle cq, Flow* flow, int side) override { cqs_.push_back({cq, flow, side}); }
  void app_post(Picos, Flow* flow, uint32_t q) override { posts_.push_back({flow, q}); }
  void request_service(Picos) override {}
  void collect_events() override {}

  // Polls every CQ once and posts what the flows asked for; how much happened.
  // Each completion is stamped when its poll returned, each post when it is
  // made (a pass over several CQs takes several round trips).
  size_t poll(const std::function<Picos()>& clock) {
    size_t n = 0;
    for (const Binding& b : cqs_) {
      json r = client_->call({{"op", "poll_cq"}, {"cq", b.cq}, {"max", 64}});
      if (!r.value("ok", false)) continue;
      const Picos now = clock();
      for (const json& j : r["wc"]) {
        ibv_wc wc{};
        wc.wr_id = j["wr_id"].get<uint64_t>();
        wc.status = static_cast<ibv_wc_status>(j["status"].get<int>());
        wc.opcode = static_cast<ibv_wc_opcode>(j["opcode"].get<int>());
        wc.byte_len = j["byte_len"].get<uint32_t>();
        wc.imm_data = htonl(j["imm_data"].get<uint32_t>());
        wc.qp_num = j["qp_num"].get<uint32_t>();
        wc.src_qp = j["src_qp"].get<uint32_t>();
        wc.wc_flags = j["wc_flags"].get<unsigned>();
        wc.sl = j["sl"].get<uint8_t>();
        wc.pkey_index = j["pkey_index"].get<uint16_t>();
        b.flow->on_completion(now, b.side, wc);
        ++n;
      }
    }
    while (!posts_.empty()) {
      auto [flow, q] = posts_.front();
      posts_.pop_front();
      flow->post(clock(), q);
      ++n;
    }
    return n;
  }

 private:
  struct Binding {
    transport::CqHandle cq;
    Flow* flow;
    int side;
  };
  World& w_;
  uint32_t index_;
  sim::HostConfig& cfg_;
  std::unique_ptr<ctrl::Client> client_;
  std::unique_ptr<RemoteVerbs> verbs_;
  transport::PdHandle pd_ = 0;
  std::vector<Binding> cqs_;
  std::deque<std::pair<Flow*, uint32_t>> posts_;
};

}  // namespace

std::optional<sim::SimReport> run_live(sim::Scenario scenario, std::string* error) {
  if (scenario.hosts.empty() || !scenario.hosts[0].live()) {
    *error = "every [[host]] must name a daemon: socket = \"/run/isoroce/isoroced.sock\", device = \"isoroce0\"";
    return std::nullopt;
  }
  auto w = std::make_unique<World>(scenario);
  std::vector<std::unique_ptr<LiveHost>> hosts;
  for (size_t i = 0; i < w->scenario.hosts.size(); ++i) {
    hosts.push_back(std::make_unique<LiveHost>(*w, static_cast<uint32_t>(i), w->scenario.hosts[i]));
    if (std::string e = hosts.back()->init(); !e.empty()) {
      *error = "host[" + std::to_string(i) + "] (" + w->scenario.hosts[i].name + "): " + e;
      return std::nullopt;
    }
    w->flow_hosts.push_back(hosts.back().get());
  }
  // With the addresses and MTUs known, the whole scenario is checked as the
  // simulator checks it.
  if (auto e = sim::validate(w->scenario)) {
    *error = e->key + ": " + e->message;
    return std::nullopt;
  }
  for (size_t f = 0; f < w->scenario.flows.size(); ++f) {
    const auto index = static_cast<uint32_t>(f);
    w->flows.push_back(
        std::make_unique<Flow>(*w, index, w->scenario.flows[f], sim::flow_place(w->scenario, index, w->flow_hosts)));
    if (auto e = w->flows.back()->setup()) {
      *error = e->key + ": " + e->message;
      return std::nullopt;
    }
  }
  w->unfinished = w->flows.size();
  for (size_t f = 0; f < w->flows.size(); ++f)
    w->events.push(w->scenario.flows[f].start, sim::EventKind::kFlowStart, static_cast<uint32_t>(f));

  const auto t0 = std::chrono::steady_clock::now();
  const std::function<Picos()> now_picos = [&] {
    return static_cast<Picos>(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count()) * 1000;
  };
  Picos now = 0;
  while (w->unfinished > 0 && (now = now_picos()) < w->scenario.duration) {
    size_t work = 0;
    while (!w->events.empty() && w->events.next_time() <= now) {
      const auto ev = w->events.pop();
      if (ev.kind == sim::EventKind::kFlowStart) w->flows[ev.a]->start(now);
      if (ev.kind == sim::EventKind::kFlowRecvStart) w->flows[ev.a]->start_receives(now);
      ++work;
    }
    for (auto& h : hosts) work += h->poll(now_picos);
    if (work == 0) std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
  now = now_picos();
  sim::SimReport report;
  report.seed = w->scenario.seed;
  for (const auto& f : w->flows) report.flows.push_back(f->report(now));
  for (const auto& h : w->scenario.hosts) {
    sim::HostReport hr;
    hr.name = h.name;
    report.hosts.push_back(hr);
  }
  report.virtual_us = static_cast<double>(now) / 1e6;
  report.wall_ms = static_cast<double>(now) / 1e9;
  report.all_finished = w->unfinished == 0;
  // Flows go before the hosts (their memory) and the hosts' connections close
  // last: the daemons reclaim every QP and MR.
  w->flows.clear();
  hosts.clear();
  return report;
}

}  // namespace isoroce::tools
