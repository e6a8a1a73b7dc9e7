/* gzipspeed: zlib, libdeflate and ISA-L igzip levels on SquashFS-like blocks, one core.
 *
 * Picks the libdeflate level behind each `sqar create -c gzip -l N` (docs/architecture.md): the
 * files named on stdin (one path a line) are cut as an image cuts them, full blocks alone and the
 * tails packed together into fragment blocks, and each block is stored compressed only when
 * that is smaller, as in an image. Prints one line per codec and level: stored bytes, ratio and
 * MiB/s of input per CPU second.
 *
 * "libdeflate A+B" keeps, per block, the smaller of libdeflate's output at levels A and B (two
 * passes): what a level costs when no single libdeflate level stays within zlib's size.
 *
 * Build: cc -O2 bench/gzipspeed.c -o gzipspeed -lz -ldeflate [-DWITH_ISAL -lisal]
 * Usage: find DIR -type f | gzipspeed BLOCK_SIZE [SPEC...]
 *   SPEC: zlib:N, deflate:N, deflate:A+B or igzip:N; without any, every level of each.
 */
#include <libdeflate.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>
#ifdef WITH_ISAL
#include <isa-l/igzip_lib.h>
#endif

static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

struct block {
  const unsigned char* data;
  size_t len;
};

static struct block* blocks;
static size_t nblocks, cap_blocks, total_in;

static void add_block(const unsigned char* p, size_t n) {
  if (nblocks == cap_blocks) {
    cap_blocks = cap_blocks ? cap_blocks * 2 : 1024;
    blocks = realloc(blocks, cap_blocks * sizeof *blocks);
  }
  blocks[nblocks].data = p;
  blocks[nblocks++].len = n;
  total_in += n;
}

static unsigned char* slurp(const char* path, size_t* len) {
  FILE* f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char* p = malloc(n > 0 ? (size_t)n : 1);
  *len = n > 0 && fread(p, 1, (size_t)n, f) == (size_t)n ? (size_t)n : 0;
  fclose(f);
  return p;
}

enum kind { ZLIB, DEFLATE, ISAL };

static size_t compress_one(enum kind k, int level, void* state, const struct block* b, unsigned char* out, size_t cap) {
  if (k == ZLIB) {
    uLongf n = cap;
    return compress2(out, &n, b->data, b->len, level) == Z_OK ? n : 0;
  }
  if (k == DEFLATE) return libdeflate_zlib_compress(state, b->data, b->len, out, cap);
#ifdef WITH_ISAL
  // stateless_init clears the level buffer: keep the one run() allocated for the level.
  struct isal_zstream* s = state;
  unsigned char* level_buf = s->level_buf;
  uint32_t level_buf_size = s->level_buf_size;
  isal_deflate_stateless_init(s);
  s->level_buf = level_buf;
  s->level_buf_size = level_buf_size;
  s->level = (unsigned)level;
  s->gzip_flag = IGZIP_ZLIB;
  s->next_in = (unsigned char*)b->data;
  s->avail_in = (unsigned)b->len;
  s->next_out = out;
  s->avail_out = (unsigned)cap;
  return isal_deflate_stateless(s) == COMP_OK ? s->total_out : 0;
#else
  return 0;
#endif
}

static void run2(int level, int level2, size_t block_size) {
  unsigned char* out = malloc(block_size * 2 + 1024);
  struct libdeflate_compressor* a = libdeflate_alloc_compressor(level);
  struct libdeflate_compressor* b = libdeflate_alloc_compressor(level2);
  size_t stored = 0, from_b = 0;
  double t0 = cpu_now();
  for (size_t i = 0; i < nblocks; ++i) {
    size_t cap = blocks[i].len - 1;
    size_t n = compress_one(DEFLATE, level, a, &blocks[i], out, cap);
    size_t m = compress_one(DEFLATE, level2, b, &blocks[i], out, n ? n - 1 : cap);
    if (m) from_b++;
    n = m ? m : n;
    stored += n ? n : blocks[i].len;
  }
  double cpu = cpu_now() - t0;
  printf("libdeflate %d+%d stored %12zu  ratio %.4f  MiB/s %7.1f  (%zu of %zu blocks from %d)\n", level, level2, stored,
         (double)stored / total_in, total_in / cpu / 1048576.0, from_b, nblocks, level2);
  fflush(stdout);
  libdeflate_free_compressor(a);
  libdeflate_free_compressor(b);
  free(out);
}

static void run(enum kind k, int level, size_t block_size) {
  static const char* names[] = {"zlib", "libdeflate", "igzip"};
  unsigned char* out = malloc(block_size * 2 + 1024);
  void* state = NULL;
  if (k == DEFLATE) state = libdeflate_alloc_compressor(level);
#ifdef WITH_ISAL
  static const size_t lvl_buf[] = {ISAL_DEF_LVL0_DEFAULT, ISAL_DEF_LVL1_DEFAULT, ISAL_DEF_LVL2_DEFAULT,
                                   ISAL_DEF_LVL3_DEFAULT};
  struct isal_zstream zs;
  if (k == ISAL) {
    isal_deflate_stateless_init(&zs);
    zs.level_buf = malloc(lvl_buf[level]);
    zs.level_buf_size = (unsigned)lvl_buf[level];
    state = &zs;
  }
#endif
  size_t stored = 0;
  double t0 = cpu_now();
  for (size_t i = 0; i < nblocks; ++i) {
    size_t n = compress_one(k, level, state, &blocks[i], out, blocks[i].len - 1);
    stored += n && n < blocks[i].len ? n : blocks[i].len;
  }
  double cpu = cpu_now() - t0;
  printf("%-10s %2d  stored %12zu  ratio %.4f  MiB/s %7.1f\n", names[k], level, stored, (double)stored / total_in,
         total_in / cpu / 1048576.0);
  fflush(stdout);
  if (k == DEFLATE) libdeflate_free_compressor(state);
  free(out);
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: find DIR -type f | gzipspeed BLOCK_SIZE [SPEC...]\n");
    return 2;
  }
  size_t bs = strtoul(argv[1], NULL, 10);
  unsigned char* tails = malloc(bs);
  size_t tail_len = 0;
  char path[4096];
  while (fgets(path, sizeof path, stdin)) {
    path[strcspn(path, "\n")] = 0;
    size_t len;
    unsigned char* p = slurp(path, &len);
    if (!p) continue;
    size_t off = 0;
    for (; off + bs <= len; off += bs) add_block(p + off, bs);
    for (size_t rest = len - off; rest > 0;) {  // tails fill fragment blocks
      size_t take = rest < bs - tail_len ? rest : bs - tail_len;
      memcpy(tails + tail_len, p + off, take);
      tail_len += take, off += take, rest -= take;
      if (tail_len == bs) {
        add_block(tails, bs);
        tails = malloc(bs);
        tail_len = 0;
      }
    }
  }
  if (tail_len) add_block(tails, tail_len);
  printf("input %zu bytes in %zu blocks of %zu\n", total_in, nblocks, bs);
  for (int i = 2; i < argc; ++i) {
    int a = 0, b = 0;
    if (sscanf(argv[i], "zlib:%d", &a) == 1)
      run(ZLIB, a, bs);
    else if (sscanf(argv[i], "deflate:%d+%d", &a, &b) == 2)
      run2(a, b, bs);
    else if (sscanf(argv[i], "deflate:%d", &a) == 1)
      run(DEFLATE, a, bs);
#ifdef WITH_ISAL
    else if (sscanf(argv[i], "igzip:%d", &a) == 1)
      run(ISAL, a, bs);
#endif
    else
      fprintf(stderr, "unknown spec %s\n", argv[i]);
  }
  if (argc > 2) return 0;
  for (int l = 1; l <= 9; ++l) run(ZLIB, l, bs);
  for (int l = 1; l <= 12; ++l) run(DEFLATE, l, bs);
#ifdef WITH_ISAL
  for (int l = 0; l <= 3; ++l) run(ISAL, l, bs);
#endif
  return 0;
}
