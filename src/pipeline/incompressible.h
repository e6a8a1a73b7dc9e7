// Cheap test for data that will not compress (random, already compressed): lets the
// pipeline store such blocks raw without spending the real codec's CPU on them.
// Writer-only: kept out of src/codec so the readers (sqarfs above all) do not link libm
// and its cold-start cost (see docs/architecture.md, "Cold start").
#pragma once
#include <cstddef>
#include <cstdint>

namespace sqar {

bool looks_incompressible(const uint8_t* data, size_t len);

}  // namespace sqar
