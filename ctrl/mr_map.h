// Registered memory mapped from a client's descriptors (reg_mr): one sealed
// memfd, or "pieces" mapped back to back (memfds and the client's own files;
// docs/control-protocol.md). The daemon reads and writes the pages in place.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace isoroce::ctrl {

struct Mapping {
  void* base = nullptr;     // the mmap of the pages
  size_t len = 0;
  uint8_t* addr = nullptr;  // the registered bytes in the daemon
  uint64_t iova = 0;        // what the client's SGEs call them
  uint64_t length = 0;
  std::vector<int> guards;  // fault_guard slots of its file pieces
  size_t maps = 0;          // mmaps it took (one per piece): ClientLimits::max_mappings
};

// Maps the request's memory (length bytes at offset, access flags) into *out;
// 0, or an errno and *error. The descriptors stay the caller's.
int map_mr_memory(const nlohmann::json& req, const std::vector<int>& fds, uint64_t length, uint64_t offset,
                  uint32_t access, Mapping* out, std::string* error);

// Unmaps; true if a file piece faulted (the client shrank the file) meanwhile.
bool release_mapping(Mapping& m);

}  // namespace isoroce::ctrl
