// The [[tenant]] array of the configuration file (ctrl/tenants.h), apart so that
// only the configuration's readers include toml++.
#pragma once

#include <toml++/toml.h>

#include <optional>
#include <vector>

#include "ctrl/config.h"
#include "ctrl/tenants.h"

namespace isoroce::ctrl {

// The [[tenant]] tables of `t` into *out: an error names the setting.
std::optional<ConfigError> read_tenants(const toml::table& t, std::vector<TenantRule>* out);

}  // namespace isoroce::ctrl
