// LD_PRELOAD shim that counts heap allocations: malloc, calloc, realloc,
// posix_memalign, aligned_alloc and memalign (operator new, aligned or not,
// goes through these in libstdc++). The count is written to
// $ALLOC_COUNT_OUT when the process exits normally. A nearly deterministic
// measure of a server's allocations a request where timings on a shared
// machine are noisy: bench/host_ab.sh allocs runs a server under it
// twice, a short run and a loaded one, and divides the difference by the
// requests served between them. (valloc and pvalloc are not counted.)
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static atomic_long g_allocs;
static void* (*real_malloc)(size_t);
static void* (*real_calloc)(size_t, size_t);
static void* (*real_realloc)(void*, size_t);
static void (*real_free)(void*);
static int (*real_posix_memalign)(void**, size_t, size_t);
static void* (*real_aligned_alloc)(size_t, size_t);
static void* (*real_memalign)(size_t, size_t);

// Some libcs' dlsym calls calloc before calloc is resolved: only those calls
// (made while this thread resolves it) are served from here.
static char g_boot[4096];
static atomic_size_t g_boot_used;
static _Thread_local int t_resolving;

static int InBoot(const void* p) {
  return (const char*)p >= g_boot && (const char*)p < g_boot + sizeof g_boot;
}

static void* Resolve(const char* name) {
  t_resolving = 1;
  void* f = dlsym(RTLD_NEXT, name);
  t_resolving = 0;
  return f;
}

static void Count(void) { atomic_fetch_add_explicit(&g_allocs, 1, memory_order_relaxed); }

void* malloc(size_t n) {
  if (!real_malloc) real_malloc = (void* (*)(size_t))Resolve("malloc");
  Count();
  return real_malloc(n);
}

void* calloc(size_t a, size_t b) {
  if (!real_calloc) {
    if (t_resolving) {
      if (b != 0 && a > ((size_t)-1) / b) return NULL;
      const size_t n = (a * b + 15) & ~(size_t)15;
      const size_t at = atomic_fetch_add(&g_boot_used, n);
      if (at + n > sizeof g_boot) return NULL;
      return g_boot + at;  // static storage: already zero
    }
    real_calloc = (void* (*)(size_t, size_t))Resolve("calloc");
  }
  Count();
  return real_calloc(a, b);
}

void* realloc(void* p, size_t n) {
  if (InBoot(p)) {  // never handed to the real allocator: move it out
    void* q = malloc(n);
    if (q != NULL) {
      const size_t left = (size_t)(g_boot + sizeof g_boot - (char*)p);
      memcpy(q, p, n < left ? n : left);
    }
    return q;
  }
  if (!real_realloc) real_realloc = (void* (*)(void*, size_t))Resolve("realloc");
  Count();
  return real_realloc(p, n);
}

void free(void* p) {
  if (InBoot(p)) return;
  if (!real_free) real_free = (void (*)(void*))Resolve("free");
  real_free(p);
}

int posix_memalign(void** out, size_t align, size_t n) {
  if (!real_posix_memalign)
    real_posix_memalign = (int (*)(void**, size_t, size_t))Resolve("posix_memalign");
  Count();
  return real_posix_memalign(out, align, n);
}

void* aligned_alloc(size_t align, size_t n) {
  if (!real_aligned_alloc) real_aligned_alloc = (void* (*)(size_t, size_t))Resolve("aligned_alloc");
  Count();
  return real_aligned_alloc(align, n);
}

void* memalign(size_t align, size_t n) {
  if (!real_memalign) real_memalign = (void* (*)(size_t, size_t))Resolve("memalign");
  Count();
  return real_memalign(align, n);
}

__attribute__((destructor)) static void Report(void) {
  const char* path = getenv("ALLOC_COUNT_OUT");
  if (path == NULL) return;
  FILE* f = fopen(path, "w");
  if (f == NULL) return;
  fprintf(f, "%ld\n", atomic_load(&g_allocs));
  fclose(f);
}
