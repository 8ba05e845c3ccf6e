// LD_PRELOAD shim that counts malloc, calloc and realloc calls (operator new
// included: libstdc++ allocates through malloc) and writes the count to
// $ALLOC_COUNT_OUT when the process exits normally. A deterministic measure
// of a server's allocations per request, where timings on a shared machine
// are noisy: bench/allocs_per_request.sh runs a server under it twice, with
// and without load, and divides the difference by the requests served.
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
// dlsym may calloc before calloc is resolved: serve that from here.
static char g_boot[4096];
static size_t g_boot_used;

void* malloc(size_t n) {
  if (!real_malloc) real_malloc = (void* (*)(size_t))dlsym(RTLD_NEXT, "malloc");
  atomic_fetch_add_explicit(&g_allocs, 1, memory_order_relaxed);
  return real_malloc(n);
}

void* calloc(size_t a, size_t b) {
  if (!real_calloc) {
    const size_t n = (a * b + 15) & ~(size_t)15;
    if (g_boot_used + n > sizeof g_boot) return NULL;
    void* p = g_boot + g_boot_used;
    g_boot_used += n;
    memset(p, 0, a * b);
    real_calloc = (void* (*)(size_t, size_t))dlsym(RTLD_NEXT, "calloc");
    return p;
  }
  atomic_fetch_add_explicit(&g_allocs, 1, memory_order_relaxed);
  return real_calloc(a, b);
}

void* realloc(void* p, size_t n) {
  if (!real_realloc) real_realloc = (void* (*)(void*, size_t))dlsym(RTLD_NEXT, "realloc");
  atomic_fetch_add_explicit(&g_allocs, 1, memory_order_relaxed);
  return real_realloc(p, n);
}

void free(void* p) {
  if ((char*)p >= g_boot && (char*)p < g_boot + sizeof g_boot) return;
  if (!real_free) real_free = (void (*)(void*))dlsym(RTLD_NEXT, "free");
  real_free(p);
}

__attribute__((destructor)) static void Report(void) {
  const char* path = getenv("ALLOC_COUNT_OUT");
  if (path == NULL) return;
  FILE* f = fopen(path, "w");
  if (f == NULL) return;
  fprintf(f, "%ld\n", atomic_load(&g_allocs));
  fclose(f);
}
