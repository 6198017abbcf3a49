#include "dataplane/dpdk/link_kind.h"

#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cstring>

namespace isoroce::dataplane {
namespace {

// The string of nested attribute `type` within [p, p + len), "" if none.
std::string nested_string(const uint8_t* p, size_t len, uint16_t type) {
  while (len >= sizeof(rtattr)) {
    const auto* a = reinterpret_cast<const rtattr*>(p);
    if (a->rta_len < sizeof(rtattr) || a->rta_len > len) break;
    if (a->rta_type == type) {
      const char* s = static_cast<const char*>(RTA_DATA(a));
      return std::string(s, strnlen(s, RTA_PAYLOAD(a)));
    }
    const size_t step = RTA_ALIGN(a->rta_len);
    if (step >= len) break;
    p += step;
    len -= step;
  }
  return "";
}

}  // namespace

std::string link_kind(uint32_t if_index) {
  if (if_index == 0) return "";
  const int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
  if (fd < 0) return "";
  struct {
    nlmsghdr nh;
    ifinfomsg ifi;
  } req{};
  req.nh.nlmsg_len = sizeof req;
  req.nh.nlmsg_type = RTM_GETLINK;
  req.nh.nlmsg_flags = NLM_F_REQUEST;
  req.nh.nlmsg_seq = 1;
  req.ifi.ifi_family = AF_UNSPEC;
  req.ifi.ifi_index = static_cast<int>(if_index);
  std::string kind;
  alignas(nlmsghdr) static thread_local std::array<uint8_t, 32768> buf;
  if (send(fd, &req, sizeof req, 0) == static_cast<ssize_t>(sizeof req)) {
    const ssize_t n = recv(fd, buf.data(), buf.size(), 0);
    const auto* nh = reinterpret_cast<const nlmsghdr*>(buf.data());
    if (n >= static_cast<ssize_t>(sizeof(nlmsghdr)) && NLMSG_OK(nh, static_cast<size_t>(n)) &&
        nh->nlmsg_type == RTM_NEWLINK && nh->nlmsg_len >= NLMSG_LENGTH(sizeof(ifinfomsg))) {
      const auto* attrs = reinterpret_cast<const uint8_t*>(NLMSG_DATA(nh)) + NLMSG_ALIGN(sizeof(ifinfomsg));
      size_t len = nh->nlmsg_len - NLMSG_LENGTH(sizeof(ifinfomsg));
      const uint8_t* p = attrs;
      while (len >= sizeof(rtattr)) {
        const auto* a = reinterpret_cast<const rtattr*>(p);
        if (a->rta_len < sizeof(rtattr) || a->rta_len > len) break;
        if ((a->rta_type & NLA_TYPE_MASK) == IFLA_LINKINFO) {
          kind = nested_string(static_cast<const uint8_t*>(RTA_DATA(a)), RTA_PAYLOAD(a), IFLA_INFO_KIND);
          break;
        }
        const size_t step = RTA_ALIGN(a->rta_len);
        if (step >= len) break;
        p += step;
        len -= step;
      }
    }
  }
  close(fd);
  return kind;
}

bool delivers_other_addresses(uint32_t if_index, std::string* why) {
  const std::string kind = link_kind(if_index);
  for (const char* k : {"macvlan", "macvtap", "ipvlan", "ipvtap"}) {
    if (kind == k) {
      *why = "a " + kind + " interface receives only frames to its own address";
      return false;
    }
  }
  char name[IF_NAMESIZE] = {};
  struct stat st {};
  if (if_indextoname(if_index, name) != nullptr &&
      (stat(("/sys/class/net/" + std::string(name) + "/wireless").c_str(), &st) == 0 ||
       stat(("/sys/class/net/" + std::string(name) + "/phy80211").c_str(), &st) == 0)) {
    *why = "a Wi-Fi interface: its access point forwards only the station's own address";
    return false;
  }
  return true;
}

}  // namespace isoroce::dataplane
