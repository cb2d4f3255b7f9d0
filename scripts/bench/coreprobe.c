// coreprobe: what the two CPUs of this machine do for each other, in one
// line per sample, to tell the slow and fast periods of large shm jobs
// apart (BENCHMARKS.md, "The two speeds of large shm jobs").
//
//   gcc -O2 -pthread -o /tmp/coreprobe scripts/bench/coreprobe.c
//   /tmp/coreprobe [samples] [seconds between samples] [pp]
//
// With a third argument "pp" a sample is the ping-pong alone (about 10 ms
// of two CPUs), cheap enough to log every few seconds beside other runs.
//
// Each sample, with two threads pinned to CPU 0 and CPU 1:
//   pp_min/pp_med  cache-line ping-pong round trip (ns): the least and the
//                  median of 200 batches of 500 round trips, each batch's
//                  mean; one line written by each side in turn
//   hand           GB/s of a producer/consumer ring like hcomm's shm
//                  rings (4 slots of 256 KiB, a stamp per slot): CPU 0
//                  copies 64 MiB from its source into the slots, CPU 1
//                  copies each slot into its 64 MiB destination
//   hand_nt        the same ring with the producer's stores into the slots
//                  non-temporal (around the caches), as hcomm's fused
//                  exchange may choose (storepick)
//   hand_same      the same ring with both threads on CPU 0 taking turns
//                  every slot (no line crosses between cores)
//   cpy1           one thread's memcpy of 64 MiB (GB/s, the bytes copied)
//   cpy2           both threads each copying 64 MiB at once (sum, GB/s)
//   steal          steal ticks of /proc/stat during the sample
// Every figure is the best of 3 tries but the ping-pong's.
#define _GNU_SOURCE
#include <immintrin.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BIG (64u << 20)
#define SLOT (256u << 10)
#define NSLOT 4

static double now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void pin(int cpu) {
	cpu_set_t s;
	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	pthread_setaffinity_np(pthread_self(), sizeof s, &s);
}

static long long steal(void) {
	FILE *f = fopen("/proc/stat", "r");
	long long v[8] = {0};
	if (!f) return -1;
	if (fscanf(f, "cpu %lld %lld %lld %lld %lld %lld %lld %lld", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]) != 8) v[7] = -1;
	fclose(f);
	return v[7];
}

/* ---- ping-pong ---- */
static _Alignas(128) _Atomic uint64_t ping;
static _Alignas(128) _Atomic uint64_t pong;
#define BATCH 500
#define NBATCH 200

static void *ponger(void *arg) {
	(void)arg;
	pin(1);
	for (uint64_t i = 1; i <= (uint64_t)BATCH * NBATCH + BATCH; i++) {
		while (atomic_load_explicit(&ping, memory_order_acquire) != i)
			;
		atomic_store_explicit(&pong, i, memory_order_release);
	}
	return NULL;
}

static int cmpd(const void *a, const void *b) {
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static void pingpong(double *mn, double *med) {
	static double b[NBATCH];
	pthread_t t;
	atomic_store(&ping, 0);
	atomic_store(&pong, 0);
	pin(0);
	pthread_create(&t, NULL, ponger, NULL);
	uint64_t i = 1;
	for (; i <= BATCH; i++) { /* warm-up batch */
		atomic_store_explicit(&ping, i, memory_order_release);
		while (atomic_load_explicit(&pong, memory_order_acquire) != i)
			;
	}
	for (int k = 0; k < NBATCH; k++) {
		double t0 = now();
		for (int j = 0; j < BATCH; j++, i++) {
			atomic_store_explicit(&ping, i, memory_order_release);
			while (atomic_load_explicit(&pong, memory_order_acquire) != i)
				;
		}
		b[k] = (now() - t0) / BATCH * 1e9;
	}
	pthread_join(t, NULL);
	qsort(b, NBATCH, sizeof b[0], cmpd);
	*mn = b[0];
	*med = b[NBATCH / 2];
}

/* ---- ring hand-off ---- */
__attribute__((target("avx2"))) static void ntcopy(char *d, const char *s, size_t n) {
	for (size_t i = 0; i < n; i += 64) {
		__m256i a = _mm256_loadu_si256((const void *)(s + i)), b = _mm256_loadu_si256((const void *)(s + i + 32));
		_mm256_stream_si256((void *)(d + i), a);
		_mm256_stream_si256((void *)(d + i + 32), b);
	}
	_mm_sfence();
}
static int nt;
static char *src, *dst, *ring, *src2, *dst2;
static _Alignas(128) _Atomic uint64_t head; /* slots filled */
static _Alignas(128) _Atomic uint64_t tail; /* slots emptied */

static void *consumer(void *arg) {
	int cpu = *(int *)arg;
	pin(cpu);
	uint64_t n = BIG / SLOT;
	for (uint64_t i = 0; i < n; i++) {
		while (atomic_load_explicit(&head, memory_order_acquire) <= i)
			if (cpu == 0) sched_yield();
		memcpy(dst + i * SLOT, ring + (i % NSLOT) * SLOT, SLOT);
		atomic_store_explicit(&tail, i + 1, memory_order_release);
	}
	return NULL;
}

static double handoff(int ccpu) {
	pthread_t t;
	atomic_store(&head, 0);
	atomic_store(&tail, 0);
	pin(0);
	double t0 = now();
	pthread_create(&t, NULL, consumer, &ccpu);
	uint64_t n = BIG / SLOT;
	for (uint64_t i = 0; i < n; i++) {
		while (i >= NSLOT && atomic_load_explicit(&tail, memory_order_acquire) <= i - NSLOT)
			if (ccpu == 0) sched_yield();
		if (nt)
			ntcopy(ring + (i % NSLOT) * SLOT, src + i * SLOT, SLOT);
		else
			memcpy(ring + (i % NSLOT) * SLOT, src + i * SLOT, SLOT);
		atomic_store_explicit(&head, i + 1, memory_order_release);
		if (ccpu == 0) sched_yield();
	}
	pthread_join(t, NULL);
	return BIG / (now() - t0) / 1e9;
}

/* ---- memcpy ---- */
static double cpy1(void) {
	pin(0);
	double t0 = now();
	memcpy(dst, src, BIG);
	return BIG / (now() - t0) / 1e9;
}

static void *cpyother(void *arg) {
	pin(1);
	memcpy(dst2, src2, BIG);
	*(double *)arg = now();
	return NULL;
}

static double cpy2(void) {
	pthread_t t;
	double t1;
	pin(0);
	double t0 = now();
	pthread_create(&t, NULL, cpyother, &t1);
	memcpy(dst, src, BIG);
	double t2 = now();
	pthread_join(t, NULL);
	if (t1 > t2) t2 = t1;
	return 2.0 * BIG / (t2 - t0) / 1e9;
}

static double best3(double (*f)(void)) {
	double b = 0;
	for (int i = 0; i < 3; i++) {
		double v = f();
		if (v > b) b = v;
	}
	return b;
}

static double hand_cross(void) { nt = 0; return handoff(1); }
static double hand_nt(void) { nt = 1; double v = handoff(1); nt = 0; return v; }
static double hand_same(void) { return handoff(0); }

int main(int argc, char **argv) {
	int samples = argc > 1 ? atoi(argv[1]) : 1;
	double gap = argc > 2 ? atof(argv[2]) : 0;
	int pponly = argc > 3 && strcmp(argv[3], "pp") == 0;
	if (pponly) goto run;
	src = aligned_alloc(4096, BIG);
	dst = aligned_alloc(4096, BIG);
	src2 = aligned_alloc(4096, BIG);
	dst2 = aligned_alloc(4096, BIG);
	ring = aligned_alloc(4096, SLOT * NSLOT);
	memset(src, 1, BIG);
	memset(dst, 2, BIG);
	memset(src2, 3, BIG);
	memset(dst2, 4, BIG);
	memset(ring, 5, SLOT * NSLOT);
run:
	printf("time pp_min_ns pp_med_ns hand_GBps hand_nt_GBps hand_same_GBps cpy1_GBps cpy2_GBps steal\n");
	for (int s = 0; s < samples; s++) {
		long long st0 = steal();
		double mn, med;
		pingpong(&mn, &med);
		double h = 0, hn = 0, hs = 0, c1 = 0, c2 = 0;
		if (!pponly) {
			h = best3(hand_cross);
			hn = best3(hand_nt);
			hs = best3(hand_same);
			c1 = best3(cpy1);
			c2 = best3(cpy2);
		}
		long long st1 = steal();
		time_t tt = time(NULL);
		char ts[32];
		strftime(ts, sizeof ts, "%H:%M:%S", gmtime(&tt));
		printf("%s %.0f %.0f %.2f %.2f %.2f %.2f %.2f %lld\n", ts, mn, med, h, hn, hs, c1, c2, st1 - st0);
		fflush(stdout);
		if (gap > 0 && s + 1 < samples) usleep((useconds_t)(gap * 1e6));
	}
	return 0;
}
