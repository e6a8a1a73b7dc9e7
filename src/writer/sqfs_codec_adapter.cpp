#include "writer/sqfs_codec_adapter.h"

namespace sqar {

SqfsCodecAdapter::SqfsCodecAdapter(const CodecConfig& cfg) : cfg_(cfg), codec_(make_codec(cfg)) {
  view_.base.base.destroy = &SqfsCodecAdapter::destroy;
  view_.base.get_configuration = &SqfsCodecAdapter::get_configuration;
  view_.base.write_options = &SqfsCodecAdapter::write_options;
  view_.base.read_options = &SqfsCodecAdapter::read_options;
  view_.base.do_block = &SqfsCodecAdapter::do_block;
  view_.owner = this;
}

sqfs_s32 SqfsCodecAdapter::do_block(sqfs_compressor_t* cmp, const sqfs_u8* in, sqfs_u32 size, sqfs_u8* out,
                                    sqfs_u32 outsize) {
  auto* self = reinterpret_cast<View*>(cmp)->owner;
  // 0 tells libsquashfs to store the block uncompressed.
  return sqfs_s32(self->codec_->compress(in, size, out, outsize));
}

void SqfsCodecAdapter::get_configuration(const sqfs_compressor_t* cmp, sqfs_compressor_config_t* cfg) {
  const auto* self = reinterpret_cast<const View*>(cmp)->owner;
  *cfg = sqfs_compressor_config_t{};
  cfg->id = sqfs_u16(self->cfg_.id);
  cfg->block_size = self->cfg_.block_size;
  cfg->level = sqfs_u32(resolved_level(self->cfg_));
}

}  // namespace sqar
