/* codecspeed: one-core compression speed of a codec on a sample, in independent blocks.
 *
 * SquashFS compresses every data block alone, so the bench's "compute limit" must use the
 * speed of block-by-block compression at the image's block size, not of one long stream
 * (the zstd CLI's window spans blocks and is faster on text). Built on the fly by run.py.
 *
 * Usage: codecspeed zstd|gzip LEVEL BLOCK_SIZE FILE
 * Prints: "bytes N cpu_seconds S mb_per_s R" (R in MiB/s of input per CPU second).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>
#include <zstd.h>

static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char** argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: codecspeed zstd|gzip LEVEL BLOCK_SIZE FILE\n");
    return 2;
  }
  const char* codec = argv[1];
  int level = atoi(argv[2]);
  size_t block = strtoul(argv[3], NULL, 10);
  FILE* f = fopen(argv[4], "rb");
  if (!f || block == 0) {
    perror(argv[4]);
    return 1;
  }
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char* in = malloc(len > 0 ? len : 1);
  if (len > 0 && fread(in, 1, len, f) != (size_t)len) {
    perror(argv[4]);
    return 1;
  }
  fclose(f);
  size_t cap = block * 2 + 1024;
  unsigned char* out = malloc(cap);
  ZSTD_CCtx* zc = ZSTD_createCCtx();
  double t0 = cpu_now();
  for (long off = 0; off < len; off += block) {
    size_t n = (size_t)(len - off) < block ? (size_t)(len - off) : block;
    if (!strcmp(codec, "zstd")) {
      size_t r = ZSTD_compressCCtx(zc, out, cap, in + off, n, level);
      if (ZSTD_isError(r)) return 1;
    } else {
      uLongf dst = cap;
      if (compress2(out, &dst, in + off, n, level) != Z_OK) return 1;
    }
  }
  double cpu = cpu_now() - t0;
  printf("bytes %ld cpu_seconds %.6f mb_per_s %.3f\n", len, cpu, cpu > 0 ? len / cpu / 1048576.0 : 0.0);
  ZSTD_freeCCtx(zc);
  free(in);
  free(out);
  return 0;
}
