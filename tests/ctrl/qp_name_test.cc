// Naming a QP where QPNs repeat across devices: DEVICE/QPN (parse_qp_name), the
// "device" field of qp, set_rate, set_class, set_tenant and trace_start, the replies
// that name the QP as DEVICE/QPN, and the error that lists the candidates when a bare
// QPN is ambiguous.
#include <gtest/gtest.h>
#include <unistd.h>

#include <vector>

#include "ctrl/protocol.h"
#include "tests/ctrl/virtual_fabric.h"

namespace isoroce::ctrl::testing {
namespace {

TEST(QpName, Parses) {
  std::string dev = "x";
  uint32_t qpn = 0;
  ASSERT_TRUE(parse_qp_name("isoroce1/15", &dev, &qpn));
  EXPECT_EQ(dev, "isoroce1");
  EXPECT_EQ(qpn, 15u);
  ASSERT_TRUE(parse_qp_name("0x1f", &dev, &qpn));
  EXPECT_EQ(dev, "");
  EXPECT_EQ(qpn, 31u);
  for (const char* bad : {"", "/15", "isoroce0/", "isoroce0/x", "15x", "-1", "0x1000000", "a/b/"})
    EXPECT_FALSE(parse_qp_name(bad, &dev, &qpn)) << bad;
}

// A QP on `dev` (open, PD, CQ, QP) for client c; its QPN.
uint32_t make_qp(TestClient& c, const std::string& dev) {
  EXPECT_TRUE(c.call({{"op", "open"}, {"device", dev}})["ok"]);
  const uint32_t pd = c.call({{"op", "alloc_pd"}})["pd"];
  const uint32_t cq = c.call({{"op", "create_cq"}, {"cqe", 16}})["cq"];
  json r = c.call({{"op", "create_qp"}, {"pd", pd}, {"send_cq", cq}, {"recv_cq", cq}});
  EXPECT_TRUE(r["ok"]) << r.dump();
  return r["qpn"];
}

// Receive: two devices numbering QPs alike, one QP on each (the same QPN).
// Expect: the bare QPN is refused with both candidates; DEVICE picks each one.
TEST(QpName, AmbiguousQpnListsTheCandidates) {
  VirtualFabric f(2, "tassel", /*same_qpns=*/true);
  TestClient a(f, 1), b(f, 2);
  const uint32_t qa = make_qp(a, "isoroce0");
  const uint32_t qb = make_qp(b, "isoroce1");
  ASSERT_EQ(qa, qb);
  const std::string n = std::to_string(qa);

  json r = a.call({{"op", "qp"}, {"qpn", qa}});
  EXPECT_FALSE(r["ok"]);
  EXPECT_EQ(r["errno"], EINVAL);
  EXPECT_NE(r["error"].get<std::string>().find("QP " + n + " is ambiguous: 2 devices have one (isoroce0/" + n +
                                                 ", isoroce1/" + n + "); name one as DEVICE/QPN"),
            std::string::npos)
      << r.dump();
  for (const char* dev : {"isoroce0", "isoroce1"}) {
    r = a.call({{"op", "qp"}, {"qpn", qa}, {"device", dev}});
    ASSERT_TRUE(r["ok"]) << r.dump();
    EXPECT_EQ(r["qp"]["device"], dev);
  }
  r = a.call({{"op", "set_rate"}, {"qpn", qa}, {"bps", 1'000'000'000}});
  EXPECT_EQ(r["errno"], EINVAL) << r.dump();
  r = a.call({{"op", "set_rate"}, {"qpn", qa}, {"bps", 1'000'000'000}, {"device", "isoroce1"}});
  ASSERT_TRUE(r["ok"]) << r.dump();
  // The reply names the QP it changed with its device.
  EXPECT_EQ(r["qp"], "isoroce1/" + n) << r.dump();
  EXPECT_EQ(r["device"], "isoroce1") << r.dump();
  EXPECT_EQ(f.device(1).engine().qp_rate(wire::Qpn(qb)), 1'000'000'000u);
  EXPECT_EQ(f.device(0).engine().qp_rate(wire::Qpn(qa)), 0u);
  r = a.call({{"op", "set_class"}, {"qpn", qa}, {"class", "latency"}, {"device", "isoroce0"}});
  EXPECT_TRUE(r["ok"]) << r.dump();
  EXPECT_EQ(r["qp"], "isoroce0/" + n) << r.dump();
  r = a.call({{"op", "set_tenant"}, {"qpn", qa}, {"tenant", "t1"}});
  EXPECT_EQ(r["errno"], EINVAL) << r.dump();
  r = a.call({{"op", "set_tenant"}, {"qpn", qa}, {"tenant", "t1"}, {"device", "isoroce1"}});
  ASSERT_TRUE(r["ok"]) << r.dump();
  EXPECT_EQ(r["qp"], "isoroce1/" + n) << r.dump();
  EXPECT_EQ(r["enforced"], true) << r.dump();  // tassel applies tenants

  // The live trace's QP filter: a bare QPN two devices have is refused as above; with
  // its device, only that device is traced.
  std::vector<int> fds;
  r = a.call({{"op", "trace_start"}, {"seconds", 1}, {"qp", qa}}, {}, &fds);
  EXPECT_EQ(r["errno"], EINVAL) << r.dump();
  EXPECT_NE(r["error"].get<std::string>().find("is ambiguous"), std::string::npos) << r.dump();
  for (int fd : fds) close(fd);
  fds.clear();
  r = a.call({{"op", "trace_start"}, {"seconds", 1}, {"qp", qa}, {"device", "isoroce1"}}, {}, &fds);
  ASSERT_TRUE(r["ok"]) << r.dump();
  EXPECT_EQ(r["device"], "isoroce1") << r.dump();
  ASSERT_EQ(r["devices"].size(), 1u) << r.dump();
  EXPECT_EQ(r["devices"][0]["name"], "isoroce1") << r.dump();
  for (int fd : fds) close(fd);
  EXPECT_TRUE(a.call({{"op", "trace_stop"}})["ok"]);

  r = a.call({{"op", "qp"}, {"qpn", qa}, {"device", "isoroce7"}});
  EXPECT_EQ(r["errno"], ENODEV) << r.dump();
  r = a.call({{"op", "qp"}, {"qpn", qa + 1}, {"device", "isoroce0"}});
  EXPECT_EQ(r["errno"], ENOENT) << r.dump();
  r = a.call({{"op", "qp"}, {"qpn", qa + 1}});
  EXPECT_EQ(r["errno"], ENOENT) << r.dump();
}

// Receive: QPNs that only one device has. Expect: the bare QPN still names it.
TEST(QpName, UniqueQpnNeedsNoDevice) {
  VirtualFabric f(2, "fifo");
  TestClient a(f, 1);
  const uint32_t q = make_qp(a, "isoroce1");
  json r = a.call({{"op", "qp"}, {"qpn", q}});
  ASSERT_TRUE(r["ok"]) << r.dump();
  EXPECT_EQ(r["qp"]["device"], "isoroce1");
  // A bare QPN in the trace filter is narrowed to the device that has it.
  std::vector<int> fds;
  r = a.call({{"op", "trace_start"}, {"seconds", 1}, {"qp", q}}, {}, &fds);
  ASSERT_TRUE(r["ok"]) << r.dump();
  EXPECT_EQ(r["device"], "isoroce1") << r.dump();
  for (int fd : fds) close(fd);
  EXPECT_TRUE(a.call({{"op", "trace_stop"}})["ok"]);
}

}  // namespace
}  // namespace isoroce::ctrl::testing
