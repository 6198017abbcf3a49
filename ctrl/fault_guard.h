// Memory the daemon maps from a client's own file (reg_mr "file" pieces:
// a MAP_SHARED file, /dev/shm object or memfd the application registered) can
// be truncated by the client at any time; the daemon's next access to a page
// past the new end would raise SIGBUS and kill it. The guard is a SIGBUS
// handler: a fault inside a guarded range replaces that whole range with
// anonymous zero pages (the accesses then go nowhere, the MR's contents are
// lost, as the client asked for by truncating) and the faulting access runs
// again; any other SIGBUS takes its previous disposition. Wayland compositors
// protect client shm pools the same way.
#pragma once

#include <cstddef>
#include <cstdint>

namespace isoroce::ctrl::fault_guard {

// Installs the handler (once; later calls do nothing). Call before other
// threads start, so they never see the default disposition mid-way.
void install();

// Guards [addr, addr + len) (page-aligned); a slot id, or -1 when all slots
// are taken (then the caller must refuse the mapping).
int add(void* addr, size_t len);
// Stops guarding a slot (before the range is unmapped); whether it faulted.
bool remove(int slot);
// Faults absorbed since start (all slots).
uint64_t faults();

}  // namespace isoroce::ctrl::fault_guard
