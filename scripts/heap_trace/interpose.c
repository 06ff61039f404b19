/* LD_PRELOAD interposer: records every malloc/calloc/realloc/posix_memalign/aligned_alloc/
 * memalign/free of a process to the binary file named by $MTRACE_FILE, one packed record per
 * call: op ('m' malloc-like, 'a' aligned, 'f' free), pointer (u64), size (u64). realloc is
 * recorded as the free of the old pointer and an allocation of the new one.
 *
 * Used to find what makes glibc's heap grow past the live bytes (issue 12, the resident set):
 *   gcc -O2 -shared -fPIC interpose.c -o interpose.so -ldl
 *   MTRACE_FILE=trace.bin LD_PRELOAD=$PWD/interpose.so python record_steps.py resnet50 train
 * then replay.c replays the stream through this machine's glibc in a fresh process. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int fd = -1;
static __thread int inside = 0;
static void *(*real_malloc)(size_t);
static void (*real_free)(void *);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);
static int (*real_posix_memalign)(void **, size_t, size_t);
static void *(*real_aligned_alloc)(size_t, size_t);
static void *(*real_memalign)(size_t, size_t);

/* dlsym itself allocates: serve those calls from a static buffer until the real calls exist. */
static char early[1 << 16];
static size_t early_used = 0;

static int enabled(void) {
    static int on = -1;
    if (on < 0) on = getenv("MTRACE_FILE") != NULL;
    return on;
}

static void record(char op, void *p, size_t n) {
    if (inside || !enabled()) return;
    inside = 1;
    if (fd < 0) fd = open(getenv("MTRACE_FILE"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
        struct __attribute__((packed)) { char op; uint64_t p; uint64_t n; } r = {op, (uint64_t)p, (uint64_t)n};
        if (write(fd, &r, sizeof r) < 0) { /* nothing to do: the trace is best effort */ }
    }
    inside = 0;
}

static void init(void) {
    real_malloc = dlsym(RTLD_NEXT, "malloc");
    real_free = dlsym(RTLD_NEXT, "free");
    real_calloc = dlsym(RTLD_NEXT, "calloc");
    real_realloc = dlsym(RTLD_NEXT, "realloc");
    real_posix_memalign = dlsym(RTLD_NEXT, "posix_memalign");
    real_aligned_alloc = dlsym(RTLD_NEXT, "aligned_alloc");
    real_memalign = dlsym(RTLD_NEXT, "memalign");
}

static int is_early(void *p) { return (char *)p >= early && (char *)p < early + sizeof early; }

static void *early_alloc(size_t n) {
    if (early_used + n >= sizeof early) return NULL;
    void *p = early + early_used;
    early_used += (n + 15) & ~(size_t)15;
    return p;
}

void *malloc(size_t n) {
    if (!real_malloc) { void *p = early_alloc(n); if (p) return p; init(); }
    void *p = real_malloc(n);
    record('m', p, n);
    return p;
}

void free(void *p) {
    if (!p || is_early(p)) return;
    if (!real_free) init();
    record('f', p, 0);
    real_free(p);
}

void *calloc(size_t a, size_t b) {
    if (!real_calloc) { void *p = early_alloc(a * b); if (p) { memset(p, 0, a * b); return p; } init(); }
    void *p = real_calloc(a, b);
    record('m', p, a * b);
    return p;
}

void *realloc(void *q, size_t n) {
    if (!real_realloc) init();
    if (is_early(q)) { void *p = real_malloc(n); memcpy(p, q, n); record('m', p, n); return p; }
    void *p = real_realloc(q, n);
    if (q) record('f', q, 0);
    record('m', p, n);
    return p;
}

int posix_memalign(void **pp, size_t align, size_t n) {
    if (!real_posix_memalign) init();
    int rc = real_posix_memalign(pp, align, n);
    if (!rc) record('a', *pp, n);
    return rc;
}

void *aligned_alloc(size_t align, size_t n) {
    if (!real_aligned_alloc) init();
    void *p = real_aligned_alloc(align, n);
    record('a', p, n);
    return p;
}

void *memalign(size_t align, size_t n) {
    if (!real_memalign) init();
    void *p = real_memalign(align, n);
    record('a', p, n);
    return p;
}
