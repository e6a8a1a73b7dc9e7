/* randread: reads a mounted tree with real threads, the way several applications would.
 *
 * Python threads would serialise on the GIL between syscalls and hide how well a FUSE
 * driver serves concurrent requests, so run.py builds this on the fly with cc.
 *
 *   randread all THREADS LISTFILE          read every listed file to the end
 *                                          prints "files N bytes B seconds S"
 *   randread random THREADS SECONDS LISTFILE
 *                                          open the listed files, then 4 KiB preads of their
 *                                          4 KiB pages in a random order, each page once, for at
 *                                          most SECONDS; prints "reads N seconds S open_seconds O"
 *                                          (S excludes the opens, O is the time the opens took: a
 *                                          driver may start work at lookup that the reads then find done)
 * Each page is read once and readahead is switched off (POSIX_FADV_RANDOM) so every read misses
 * the page cache and reaches the driver: re-reading a page would measure the kernel's page cache,
 * which serves FUSE mounts and the kernel driver alike.
 * LISTFILE: one "SIZE<TAB>PATH" per line.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

typedef struct {
  char* path;
  long long size;
  int fd;
} Entry;

static Entry* entries;
static size_t nentries;
typedef struct {
  uint32_t entry;
  uint32_t page;
} Page;
static Page* pages; /* every 4 KiB page of the listed files, shuffled */
static size_t npages;
static atomic_size_t next_index;
static atomic_llong total_bytes;
static atomic_llong total_reads;
static atomic_int failed;
static double stop_at;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void load_list(const char* file) {
  FILE* f = fopen(file, "r");
  if (!f) {
    perror(file);
    exit(1);
  }
  size_t cap = 1024;
  entries = malloc(cap * sizeof *entries);
  char* line = NULL;
  size_t linecap = 0;
  ssize_t n;
  while ((n = getline(&line, &linecap, f)) > 0) {
    if (line[n - 1] == '\n') line[n - 1] = 0;
    char* tab = strchr(line, '\t');
    if (!tab) continue;
    *tab = 0;
    if (nentries == cap) entries = realloc(entries, (cap *= 2) * sizeof *entries);
    entries[nentries].size = atoll(line);
    entries[nentries].path = strdup(tab + 1);
    entries[nentries].fd = -1;
    nentries++;
  }
  free(line);
  fclose(f);
}

static void* read_all_worker(void* arg) {
  (void)arg;
  char* buf = malloc(1 << 17);
  for (;;) {
    size_t i = atomic_fetch_add(&next_index, 1);
    if (i >= nentries) break;
    int fd = open(entries[i].path, O_RDONLY | O_NOFOLLOW);
    if (fd < 0) {
      perror(entries[i].path);
      atomic_store(&failed, 1);
      continue;
    }
    ssize_t r;
    while ((r = read(fd, buf, 1 << 17)) > 0) atomic_fetch_add(&total_bytes, r);
    if (r < 0) {
      perror(entries[i].path);
      atomic_store(&failed, 1);
    }
    close(fd);
  }
  free(buf);
  return NULL;
}

static void* random_worker(void* arg) {
  (void)arg;
  char buf[4096];
  long long reads = 0;
  for (;;) {
    size_t i = atomic_fetch_add(&next_index, 1);
    if (i >= npages || (reads % 64 == 0 && now() >= stop_at)) break;
    const Entry* e = &entries[pages[i].entry];
    if (pread(e->fd, buf, sizeof buf, (off_t)pages[i].page * 4096) < 0) {
      perror(e->path);
      atomic_store(&failed, 1);
      break;
    }
    reads++;
  }
  atomic_fetch_add(&total_reads, reads);
  return NULL;
}

int main(int argc, char** argv) {
  if (argc < 4 || (strcmp(argv[1], "all") && strcmp(argv[1], "random")) || (!strcmp(argv[1], "random") && argc != 5)) {
    fprintf(stderr, "usage: randread all THREADS LISTFILE | randread random THREADS SECONDS LISTFILE\n");
    return 2;
  }
  int threads = atoi(argv[2]);
  if (threads < 1 || threads > 256) threads = 1;
  int random_mode = !strcmp(argv[1], "random");
  load_list(argv[random_mode ? 4 : 3]);
  pthread_t tid[256];
  double t0;
  if (!random_mode) {
    t0 = now();
    for (int t = 0; t < threads; t++) pthread_create(&tid[t], NULL, read_all_worker, NULL);
    for (int t = 0; t < threads; t++) pthread_join(tid[t], NULL);
    printf("files %zu bytes %lld seconds %.6f\n", nentries, (long long)total_bytes, now() - t0);
    return failed ? 1 : 0;
  }
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max; /* one descriptor per listed file */
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  size_t cap = 1024;
  pages = malloc(cap * sizeof *pages);
  const double open_t0 = now();
  for (size_t i = 0; i < nentries; i++) {
    entries[i].fd = open(entries[i].path, O_RDONLY | O_NOFOLLOW);
    if (entries[i].fd < 0) {
      perror(entries[i].path);
      return 1;
    }
    posix_fadvise(entries[i].fd, 0, 0, POSIX_FADV_RANDOM);
    for (long long p = 0; p * 4096 < entries[i].size && npages < (1u << 24); p++) {
      if (npages == cap) pages = realloc(pages, (cap *= 2) * sizeof *pages);
      pages[npages++] = (Page){(uint32_t)i, (uint32_t)p};
    }
  }
  const double open_seconds = now() - open_t0;
  if (npages == 0) {
    fprintf(stderr, "randread: no data to read\n");
    return 1;
  }
  uint64_t state = 0x9E3779B97F4A7C15ull; /* fixed seed: every reader gets the same order */
  for (size_t i = npages - 1; i > 0; i--) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    size_t j = (size_t)(state % (i + 1));
    Page tmp = pages[i];
    pages[i] = pages[j];
    pages[j] = tmp;
  }
  t0 = now();
  stop_at = t0 + atof(argv[3]);
  for (int t = 0; t < threads; t++) pthread_create(&tid[t], NULL, random_worker, NULL);
  for (int t = 0; t < threads; t++) pthread_join(tid[t], NULL);
  printf("reads %lld seconds %.6f open_seconds %.6f\n", (long long)total_reads, now() - t0, open_seconds);
  return failed ? 1 : 0;
}
