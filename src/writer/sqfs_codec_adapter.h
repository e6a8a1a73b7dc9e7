// Lets libsquashfs's metadata writers compress with our Codec (libsquashfs in Debian has no lzo,
// and one codec implementation for data and metadata keeps the image consistent).
#pragma once
#include <sqfs/compressor.h>

#include "codec/codec.h"

namespace sqar {

class SqfsCodecAdapter {
 public:
  explicit SqfsCodecAdapter(const CodecConfig& cfg);
  sqfs_compressor_t* get() { return &view_.base; }

 private:
  struct View {
    sqfs_compressor_t base;
    SqfsCodecAdapter* owner;
  };
  static sqfs_s32 do_block(sqfs_compressor_t* cmp, const sqfs_u8* in, sqfs_u32 size, sqfs_u8* out, sqfs_u32 outsize);
  static void get_configuration(const sqfs_compressor_t* cmp, sqfs_compressor_config_t* cfg);
  static int write_options(sqfs_compressor_t*, sqfs_file_t*) { return 0; }  // written by the image writer
  static int read_options(sqfs_compressor_t*, sqfs_file_t*) { return 0; }
  static void destroy(sqfs_object_t*) {}

  CodecConfig cfg_;
  std::unique_ptr<Codec> codec_;
  View view_{};
};

}  // namespace sqar
