// Users and groups given by name, as mksquashfs -force-uid, tar --owner and mount's uid= take
// them beside numbers.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace sqar {

// The id of a user (group: false) or group name in this machine's databases (NSS); nullopt
// when there is no such name.
std::optional<uint32_t> owner_id_by_name(const std::string& name, bool group);

}  // namespace sqar
