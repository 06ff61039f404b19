/* Replays a stream recorded by interpose.c through this machine's glibc, in this (fresh)
 * process, and prints how far the heap (mallinfo2 arena + mmapped bytes) grows after the
 * marker allocation (MARKER_BYTES, which record_steps.py makes just before the steps).
 *
 *   gcc -O2 replay.c -o replay
 *   ./replay trace.bin [MIN_BYTES] [all|nolong|noshort] [LIFETIME]
 *
 * MIN_BYTES: skip allocations smaller than this (and their frees). nolong / noshort: after the
 * marker, skip the requests under 1 KiB that live at least / fewer than LIFETIME calls
 * (default 16384). The replayer's own tables are mmapped before the marker: they do not count
 * in the growth. */
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MARKER_BYTES 12345679ULL
#define SMALL 1024
#define HS (1u << 24)

#pragma pack(push, 1)
typedef struct { char op; uint64_t p; uint64_t n; } rec;
#pragma pack(pop)

static uint64_t *K; static void **V; static uint64_t *S;

static uint64_t slot(uint64_t k) {
    k ^= k >> 33; k *= 0xff51afd7ed558ccdULL; k ^= k >> 33;
    return k & (HS - 1);
}
static void put(uint64_t k, void *v, uint64_t s) {
    uint64_t i = slot(k);
    while (K[i] && K[i] != k) i = (i + 1) & (HS - 1);
    K[i] = k; V[i] = v; S[i] = s;
}
/* Removes k (a tombstone of 1 keeps the probe chains) and returns its value and size. */
static int take(uint64_t k, void **v, uint64_t *s) {
    for (uint64_t i = slot(k); K[i]; i = (i + 1) & (HS - 1))
        if (K[i] == k) { *v = V[i]; *s = S[i]; K[i] = 1; V[i] = NULL; return 1; }
    return 0;
}
static size_t extent(void) { struct mallinfo2 m = mallinfo2(); return m.arena + m.hblkhd; }

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: %s trace.bin [MIN_BYTES] [all|nolong|noshort] [LIFETIME]\n", argv[0]); return 2; }
    size_t min_bytes = argc > 2 ? strtoull(argv[2], 0, 10) : 0;
    const char *mode = argc > 3 ? argv[3] : "all";
    long lifetime_limit = argc > 4 ? atol(argv[4]) : 16384;
    FILE *f = fopen(argv[1], "rb");
    if (!f) { perror(argv[1]); return 1; }
    fseek(f, 0, SEEK_END); long bytes = ftell(f); fseek(f, 0, SEEK_SET);
    rec *r = malloc(bytes);
    if (fread(r, 1, bytes, f) != (size_t)bytes) { fprintf(stderr, "short read\n"); return 1; }
    fclose(f);
    long n = bytes / (long)sizeof(rec);
    K = calloc(HS, 8); V = calloc(HS, 8); S = calloc(HS, 8);
    long *life = malloc(sizeof(long) * n);
    /* First pass: each allocation's lifetime in records (-1: never freed). */
    for (long j = 0; j < n; j++) life[j] = -1;
    for (long j = 0; j < n; j++) {
        void *unused; uint64_t at;
        if (r[j].op == 'f') { if (take(r[j].p, &unused, &at)) life[at] = j - (long)at; }
        else put(r[j].p, NULL, (uint64_t)j);
    }
    memset(K, 0, HS * 8); memset(V, 0, HS * 8); memset(S, 0, HS * 8);
    int marked = 0; size_t base = 0, peak = 0; long skipped = 0;
    for (long i = 0; i < n; i++) {
        if (r[i].op == 'f') { void *p; uint64_t s; if (take(r[i].p, &p, &s)) free(p); continue; }
        if (r[i].n == MARKER_BYTES) { base = peak = extent(); marked = 1; continue; }
        if (r[i].n < min_bytes) { skipped++; continue; }
        if (marked && r[i].n < SMALL) {
            long lf = life[i] < 0 ? (1L << 40) : life[i];
            if ((!strcmp(mode, "nolong") && lf >= lifetime_limit)
                    || (!strcmp(mode, "noshort") && lf < lifetime_limit)) { skipped++; continue; }
        }
        void *p = NULL;
        if (r[i].op == 'a') { if (posix_memalign(&p, 64, r[i].n)) p = NULL; }
        else p = malloc(r[i].n ? r[i].n : 1);
        put(r[i].p, p, r[i].n);
        if (marked) { size_t e = extent(); if (e > peak) peak = e; }
    }
    if (!marked) { fprintf(stderr, "no marker allocation of %llu bytes in the trace\n", MARKER_BYTES); return 1; }
    printf("%ld records, %ld skipped; heap growth after the marker: peak %.1f MiB\n",
           n, skipped, (peak - base) / 1048576.0);
    return 0;
}
