// workload::Flow on two engines joined by a wire: the flow generator sets its
// QPs up through FlowVerbs, posts with `depth` outstanding, checks every byte
// and reports; on_wire attributes retransmissions and NAKs; application ids.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <deque>

#include "tests/workload/probe_drivers.h"
#include "transport/wire/opcode.h"
#include "workload/app_id.h"
#include "workload/flow.h"
#include "workload/pattern.h"

namespace isoroce::workload::testing {
namespace {

constexpr Picos kUs = 1'000'000;

// A host that posts at once and polls its CQs when the loop asks.
class PairHost final : public FlowHost {
 public:
  PairHost(Wire& w, uint32_t i, uint64_t* next_region)
      : e_(w.engine(static_cast<int>(i))), index_(i), verbs_(e_), next_region_(next_region) {
    pd_ = e_.alloc_pd().value();
  }
  uint32_t index() const override { return index_; }
  const wire::IpAddr& ip() const override { return e_.config().ip; }
  transport::PdHandle pd() const override { return pd_; }
  FlowVerbs& verbs() override { return verbs_; }
  std::optional<SetupError> alloc_region(uint64_t len, uint32_t access, Region* out) override {
    const uint64_t size = (std::max<uint64_t>(len, 64) + 4095) / 4096 * 4096;
    auto* p = static_cast<uint8_t*>(std::aligned_alloc(4096, size));
    std::memset(p, 0, size);
    out->mem = std::shared_ptr<uint8_t>(p, [](uint8_t* q) { std::free(q); });
    out->len = size;
    out->iova = (*next_region_)++ << 36;
    auto keys = e_.reg_mr(pd_, p, size, out->iova, access);
    if (!keys.ok()) return SetupError{"host", "reg_mr failed"};
    out->lkey = keys.value().lkey;
    out->rkey = keys.value().rkey;
    return std::nullopt;
  }
  void bind_cq(transport::CqHandle cq, Flow* flow, int side) override { cqs_.push_back({cq, flow, side}); }
  void app_post(Picos, Flow* flow, uint32_t q) override { posts_.emplace_back(flow, q); }
  void request_service(Picos) override {}
  void collect_events() override {}

  size_t poll(Picos now) {
    size_t n = 0;
    for (const auto& b : cqs_) {
      ibv_wc wc[16];
      for (int k; (k = e_.poll_cq(b.cq, wc)) > 0;)
        for (int i = 0; i < k; ++i, ++n) b.flow->on_completion(now, b.side, wc[i]);
    }
    for (; !posts_.empty(); ++n) {
      auto [flow, q] = posts_.front();
      posts_.pop_front();
      flow->post(now, q);
    }
    return n;
  }

 private:
  struct Binding {
    transport::CqHandle cq;
    Flow* flow;
    int side;
  };
  transport::Engine& e_;
  uint32_t index_;
  EngineVerbs verbs_;
  uint64_t* next_region_;
  transport::PdHandle pd_ = 0;
  std::vector<Binding> cqs_;
  std::deque<std::pair<Flow*, uint32_t>> posts_;
};

struct PairRun final : FlowDriver {
  PairRun() : wire([](int, Picos d) { return d + 2 * kUs; }), a(wire, 0, &next_region), b(wire, 1, &next_region) {}
  void schedule_receives(Picos at, Flow& f) override { receives.emplace_back(at, &f); }
  void bind_qp(uint32_t host, uint32_t qpn, const QpRef& ref) override { qps.push_back({host, qpn, ref}); }
  void flow_finished(Flow&) override { ++finished; }

  FlowReport go(const FlowConfig& cfg, Picos until = 100'000 * kUs) {
    FlowPlace place{&a, {&b}, 42, 1024, 7};
    Flow flow(*this, 0, cfg, place);
    auto e = flow.setup();
    EXPECT_FALSE(e) << e->to_string();
    Picos now = 0;
    flow.start(now);
    size_t started = 0;  // receives started
    while (!flow.finished() && now <= until) {
      size_t work = wire.service(now) + a.poll(now) + b.poll(now);
      for (; started < receives.size() && receives[started].first <= now; ++started, ++work)
        receives[started].second->start_receives(now);
      if (work) continue;
      now = wire.next_time();
      if (started < receives.size()) now = std::min(now, receives[started].first);
      if (now == sched::kNever) break;
    }
    const FlowReport clean = flow.report(now);
    last_wire = [&] {  // what a retransmitted request and a NAK do to the counters
      const QpRef toward{0, 0, false}, back{0, 0, true};
      flow.on_wire(toward, WireSeen{wire::op::kRcWriteOnly, 5, std::nullopt, 0, 100});
      flow.on_wire(toward, WireSeen{wire::op::kRcWriteOnly, 5, std::nullopt, 0, 100});
      flow.on_wire(back, WireSeen{wire::op::kRcAck, 6, uint8_t{0x60}, 0, 60});  // NAK: PSN sequence error
      flow.on_wire(back, WireSeen{wire::op::kRcAck, 6, uint8_t{0x21}, 0, 60});  // RNR NAK
      flow.on_wire(back, WireSeen{wire::op::kRcAck, 6, uint8_t{0x00}, 0, 60});  // ACK
      return flow.report(now);
    }();
    return clean;
  }

  uint64_t next_region = 1;
  Wire wire;
  PairHost a, b;
  std::vector<std::pair<Picos, Flow*>> receives;
  struct Bound {
    uint32_t host, qpn;
    QpRef ref;
  };
  std::vector<Bound> qps;
  int finished = 0;
  FlowReport last_wire;
};

TEST(Flow, WritesCompleteWithEveryByteChecked) {
  FlowConfig f;
  f.name = "w";
  f.src = "a";
  f.dst = {"b"};
  f.verb = Verb::kWrite;
  f.size = 5000;  // five packets at MTU 1024
  f.count = 40;
  f.depth = 4;
  PairRun run;
  const FlowReport r = run.go(f);
  EXPECT_TRUE(r.finished);
  EXPECT_EQ(run.finished, 1);
  EXPECT_EQ(r.messages, 40u);
  EXPECT_EQ(r.integrity_checked, 40u);
  EXPECT_TRUE(r.integrity_ok) << r.first_failure;
  EXPECT_EQ(r.errors, 0u);
  EXPECT_GT(r.lat.p50_us, 4.0);  // two microseconds each way
  ASSERT_EQ(run.qps.size(), 2u);  // its QP on each host, told to the driver
  EXPECT_TRUE(run.qps[0].ref.requester);
  EXPECT_FALSE(run.qps[1].ref.requester);
}

TEST(Flow, SendsAreCheckedAtTheReceiverAndReceivesCanStartLate) {
  FlowConfig f;
  f.name = "s";
  f.src = "a";
  f.dst = {"b"};
  f.verb = Verb::kSendImm;
  f.size = 300;
  f.count = 25;
  f.depth = 2;
  f.post_recv_delay = 5 * kUs;
  PairRun run;
  // The receives are the driver's to start, 5 us after the flow starts; the
  // first sends meet no receive (RNR NAK) and go again.
  const FlowReport r = run.go(f);
  ASSERT_EQ(run.receives.size(), 1u);
  EXPECT_EQ(run.receives[0].first, 5 * kUs);
  EXPECT_TRUE(r.finished);
  EXPECT_EQ(r.messages, 25u);
  EXPECT_EQ(r.delivered, 25u);
  EXPECT_EQ(r.integrity_checked, 25u);
  EXPECT_TRUE(r.integrity_ok) << r.first_failure;
}

TEST(Flow, WireFramesCountRetransmissionsAndNaks) {
  FlowConfig f;
  f.name = "w";
  f.src = "a";
  f.dst = {"b"};
  f.size = 64;
  f.count = 1;
  PairRun run;
  const FlowReport r = run.go(f);
  EXPECT_EQ(r.retransmits, 0u);
  EXPECT_EQ(run.last_wire.retransmits, 1u);  // the same PSN twice
  EXPECT_EQ(run.last_wire.naks, 1u);
  EXPECT_EQ(run.last_wire.rnr_naks, 1u);
}

TEST(FlowAppId, FlowsOfOneApplicationShareTheFirstOnesId) {
  std::vector<FlowConfig> flows(4);
  flows[1].app = "x";
  flows[3].app = "x";
  EXPECT_EQ(flow_app_id(flows, 0), 0x8000'0000u);
  EXPECT_EQ(flow_app_id(flows, 1), 1u);
  EXPECT_EQ(flow_app_id(flows, 3), 1u);
  EXPECT_EQ(flow_app_id(flows, 2), 0x8000'0002u);
  EXPECT_NE(flow_app_id(flows, 2), kReferenceApp);
}

TEST(Pattern, EveryMessageDiffersAndCarriesItsId) {
  uint8_t a[100], b[100];
  fill_pattern(a, sizeof a, 1, 7);
  fill_pattern(b, sizeof b, 1, 8);
  EXPECT_TRUE(check_pattern(a, sizeof a, 1, 7));
  EXPECT_FALSE(check_pattern(a, sizeof a, 1, 8));
  EXPECT_FALSE(check_pattern(a, sizeof a, 2, 7));
  EXPECT_EQ(pattern_id(a), 7u);
  EXPECT_EQ(pattern_id(b), 8u);
}

}  // namespace
}  // namespace isoroce::workload::testing
