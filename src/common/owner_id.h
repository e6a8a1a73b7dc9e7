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

// The owner an entry stored with owner id `id` gets when extracted. chown(2) reads 2^32-1
// ((uid_t)-1) as "leave the owner as it is", so an image or tar naming it would leave the
// file the extractor's: as root, with its set-uid bit, a set-uid root program. The kernel's
// squashfs driver shows that id as the overflow id (/proc/sys/fs/overflowuid or
// overflowgid, 65534 unless set otherwise); extract and extract --tar give the same.
uint32_t extracted_owner_id(uint32_t id, bool group);

}  // namespace sqar
