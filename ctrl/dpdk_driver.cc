#include "ctrl/dpdk_driver.h"

#include <cstdio>

namespace isoroce::ctrl {

std::string mac_text(const wire::MacAddr& m) {
  char buf[18];
  std::snprintf(buf, sizeof buf, "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5]);
  return buf;
}

dataplane::DeviceConfig lane_config(const dataplane::DeviceConfig& c, uint32_t base, unsigned k) {
  dataplane::DeviceConfig l = c;
  l.first_qpn = base + k;
  l.qpn_stride = c.lanes;
  return l;
}

}  // namespace isoroce::ctrl
