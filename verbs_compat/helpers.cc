// The libibverbs functions that touch no verbs object: rate conversions,
// sysfs helpers and the kernel-ABI struct copies (rdma-core's marshall.h).
// Defined here so that no libibverbs symbol resolves to the system library
// (tests/verbs_compat/symbols_test.cc compares each with the real one).
#include <fcntl.h>
#include <infiniband/sa.h>
#include <infiniband/verbs.h>
#include <rdma/ib_user_sa.h>
#include <rdma/ib_user_verbs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

// One row per rate: the enum, its multiple of 2.5 Gbit/s (-1: none) and its
// exact signalling rate in Mbit/s (IBTA vol.1 table "static rate").
struct RateRow {
  ibv_rate rate;
  int mult;
  int mbps;
};
constexpr RateRow kRates[] = {
    {IBV_RATE_2_5_GBPS, 1, 2500},       {IBV_RATE_5_GBPS, 2, 5000},
    {IBV_RATE_10_GBPS, 4, 10000},       {IBV_RATE_20_GBPS, 8, 20000},
    {IBV_RATE_30_GBPS, 12, 30000},      {IBV_RATE_40_GBPS, 16, 40000},
    {IBV_RATE_60_GBPS, 24, 60000},      {IBV_RATE_80_GBPS, 32, 80000},
    {IBV_RATE_120_GBPS, 48, 120000},    {IBV_RATE_14_GBPS, -1, 14062},
    {IBV_RATE_56_GBPS, -1, 56250},      {IBV_RATE_112_GBPS, -1, 112500},
    {IBV_RATE_168_GBPS, -1, 168750},    {IBV_RATE_25_GBPS, -1, 25781},
    {IBV_RATE_100_GBPS, -1, 103125},    {IBV_RATE_200_GBPS, -1, 206250},
    {IBV_RATE_300_GBPS, -1, 309375},    {IBV_RATE_28_GBPS, 11, 28125},
    {IBV_RATE_50_GBPS, 20, 53125},      {IBV_RATE_400_GBPS, 160, 425000},
    {IBV_RATE_600_GBPS, 240, 637500},   {IBV_RATE_800_GBPS, 320, 850000},
    {IBV_RATE_1200_GBPS, 480, 1275000},
};

void copy_ah_attr(ibv_ah_attr* dst, const ib_uverbs_ah_attr* src) {
  std::memcpy(dst->grh.dgid.raw, src->grh.dgid, sizeof dst->grh.dgid);
  dst->grh.flow_label = src->grh.flow_label;
  dst->grh.sgid_index = src->grh.sgid_index;
  dst->grh.hop_limit = src->grh.hop_limit;
  dst->grh.traffic_class = src->grh.traffic_class;
  dst->dlid = src->dlid;
  dst->sl = src->sl;
  dst->src_path_bits = src->src_path_bits;
  dst->static_rate = src->static_rate;
  dst->is_global = src->is_global;
  dst->port_num = src->port_num;
}

}  // namespace

extern "C" {

int ibv_rate_to_mult(ibv_rate rate) {
  for (const RateRow& r : kRates)
    if (r.rate == rate) return r.mult;
  return -1;
}

ibv_rate mult_to_ibv_rate(int mult) {
  for (const RateRow& r : kRates)
    if (r.mult == mult && mult > 0) return r.rate;
  return IBV_RATE_MAX;
}

int ibv_rate_to_mbps(ibv_rate rate) {
  for (const RateRow& r : kRates)
    if (r.rate == rate) return r.mbps;
  return -1;
}

ibv_rate mbps_to_ibv_rate(int mbps) {
  for (const RateRow& r : kRates)
    if (r.mbps == mbps) return r.rate;
  return IBV_RATE_MAX;
}

// $SYSFS_PATH without trailing slashes, else "/sys" (the string lives on).
const char* ibv_get_sysfs_path(void) {
  static const std::string path = [] {
    const char* env = std::getenv("SYSFS_PATH");
    std::string p = env && *env ? env : "/sys";
    while (p.size() > 1 && p.back() == '/') p.pop_back();
    return p;
  }();
  return path.c_str();
}

// dir/file into buf (NUL-terminated, one trailing newline removed): its
// length, or -1 (no file, empty, or longer than buf).
int ibv_read_sysfs_file(const char* dir, const char* file, char* buf,
                                                                size_t size) {
  const std::string path = std::string(dir) + "/" + file;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  const ssize_t len = read(fd, buf, size);
  close(fd);
  if (len <= 0) return -1;
  const size_t n = static_cast<size_t>(len);
  if (buf[n - 1] == '\n') {
    buf[n - 1] = '\0';
    return static_cast<int>(n - 1);
  }
  if (n == size) return -1;  // no room for the NUL: the file does not fit
  buf[n] = '\0';
  return static_cast<int>(n);
}

void ibv_copy_ah_attr_from_kern(ibv_ah_attr* dst, ib_uverbs_ah_attr* src) {
  copy_ah_attr(dst, src);
}

void ibv_copy_qp_attr_from_kern(ibv_qp_attr* dst, ib_uverbs_qp_attr* src) {
  dst->cur_qp_state = static_cast<ibv_qp_state>(src->cur_qp_state);
  dst->path_mtu = static_cast<ibv_mtu>(src->path_mtu);
  dst->path_mig_state = static_cast<ibv_mig_state>(src->path_mig_state);
  dst->qkey = src->qkey;
  dst->rq_psn = src->rq_psn;
  dst->sq_psn = src->sq_psn;
  dst->dest_qp_num = src->dest_qp_num;
  dst->qp_access_flags = static_cast<int>(src->qp_access_flags);
  dst->cap.max_send_wr = src->max_send_wr;
  dst->cap.max_recv_wr = src->max_recv_wr;
  dst->cap.max_send_sge = src->max_send_sge;
  dst->cap.max_recv_sge = src->max_recv_sge;
  dst->cap.max_inline_data = src->max_inline_data;
  copy_ah_attr(&dst->ah_attr, &src->ah_attr);
  copy_ah_attr(&dst->alt_ah_attr, &src->alt_ah_attr);
  dst->pkey_index = src->pkey_index;
  dst->alt_pkey_index = src->alt_pkey_index;
  dst->en_sqd_async_notify = src->en_sqd_async_notify;
  dst->sq_draining = src->sq_draining;
  dst->max_rd_atomic = src->max_rd_atomic;
  dst->max_dest_rd_atomic = src->max_dest_rd_atomic;
  dst->min_rnr_timer = src->min_rnr_timer;
  dst->port_num = src->port_num;
  dst->timeout = src->timeout;
  dst->retry_cnt = src->retry_cnt;
  dst->rnr_retry = src->rnr_retry;
  dst->alt_port_num = src->alt_port_num;
  dst->alt_timeout = src->alt_timeout;
}

void ibv_copy_path_rec_from_kern(ibv_sa_path_rec* dst,
                                                                          ib_user_path_rec* src) {
  std::memcpy(dst->dgid.raw, src->dgid, sizeof dst->dgid);
  std::memcpy(dst->sgid.raw, src->sgid, sizeof dst->sgid);
  dst->dlid = src->dlid;
  dst->slid = src->slid;
  dst->raw_traffic = static_cast<int>(src->raw_traffic);
  dst->flow_label = src->flow_label;
  dst->reversible = static_cast<int>(src->reversible);
  dst->mtu = static_cast<uint8_t>(src->mtu);
  dst->pkey = src->pkey;
  dst->hop_limit = src->hop_limit;
  dst->traffic_class = src->traffic_class;
  dst->numb_path = src->numb_path;
  dst->sl = src->sl;
  dst->mtu_selector = src->mtu_selector;
  dst->rate_selector = src->rate_selector;
  dst->rate = src->rate;
  dst->packet_life_time_selector = src->packet_life_time_selector;
  dst->packet_life_time = src->packet_life_time;
  dst->preference = src->preference;
}

void ibv_copy_path_rec_to_kern(ib_user_path_rec* dst,
                                                                        ibv_sa_path_rec* src) {
  std::memcpy(dst->dgid, src->dgid.raw, sizeof dst->dgid);
  std::memcpy(dst->sgid, src->sgid.raw, sizeof dst->sgid);
  dst->dlid = src->dlid;
  dst->slid = src->slid;
  dst->raw_traffic = static_cast<uint32_t>(src->raw_traffic);
  dst->flow_label = src->flow_label;
  dst->reversible = static_cast<uint32_t>(src->reversible);
  dst->mtu = src->mtu;
  dst->pkey = src->pkey;
  dst->hop_limit = src->hop_limit;
  dst->traffic_class = src->traffic_class;
  dst->numb_path = src->numb_path;
  dst->sl = src->sl;
  dst->mtu_selector = src->mtu_selector;
  dst->rate_selector = src->rate_selector;
  dst->rate = src->rate;
  dst->packet_life_time_selector = src->packet_life_time_selector;
  dst->packet_life_time = src->packet_life_time;
  dst->preference = src->preference;
}

}  // extern "C"
