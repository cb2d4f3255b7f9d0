/*
 * mpi_rma_bench.c - MPI one-sided baseline for `hcomm perf -op put,get`:
 * every rank accesses the next rank's window (a ring), one access per rank
 * per iteration, completed at the target before the next (MPI_Win_flush
 * under a passive-target lock_all epoch), as hcomm's Put and Get return
 * only when the bytes are at the target or in the caller's buffer.
 *
 * Prints rows in the peer harness's CSV format:
 *   impl,op,ranks,bytes,usec,algbw_GBps,busbw_GBps
 * where usec is the mean over ranks of the per-rank average.
 *
 * Build: mpicc -O2 -o mpi_rma_bench mpi_rma_bench.c
 * Run:   mpirun -n 2 ./mpi_rma_bench [label] [maxbytes] [factor] [target_seconds]
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double run(MPI_Win win, char *buf, long n, int next, int get, long iters) {
    double t0 = MPI_Wtime();
    for (long i = 0; i < iters; i++) {
        if (get)
            MPI_Get(buf, (int)n, MPI_BYTE, next, 0, (int)n, MPI_BYTE, win);
        else
            MPI_Put(buf, (int)n, MPI_BYTE, next, 0, (int)n, MPI_BYTE, win);
        MPI_Win_flush(next, win);
    }
    return MPI_Wtime() - t0;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *label = argc > 1 ? argv[1] : "openmpi";
    long maxb = argc > 2 ? atol(argv[2]) : 16L << 20;
    long factor = argc > 3 ? atol(argv[3]) : 4;
    double target = argc > 4 ? atof(argv[4]) : 0.2;
    int next = (rank + 1) % size;

    char *base;
    MPI_Win win;
    MPI_Win_allocate(maxb, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
    char *buf = malloc(maxb);
    memset(buf, rank + 1, maxb);
    memset(base, 0, maxb);
    MPI_Win_lock_all(0, win);
    for (int get = 0; get <= 1; get++) {
        for (long n = 8; n <= maxb; n = n * factor > maxb && n < maxb ? maxb : n * factor) {
            /* warm-up, which estimates the cost of one access */
            long warm = n <= 65536 ? 20 : 4;
            MPI_Barrier(MPI_COMM_WORLD);
            double est = run(win, buf, n, next, get, warm) / warm, maxest;
            MPI_Allreduce(&est, &maxest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            long iters = (long)(target / (maxest > 0 ? maxest : 1e-9));
            if (iters < 3) iters = 3;
            if (iters > 20000) iters = 20000;
            MPI_Barrier(MPI_COMM_WORLD);
            double usec = run(win, buf, n, next, get, iters) * 1e6 / iters, sum;
            MPI_Reduce(&usec, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
            if (rank == 0) {
                double us = sum / size, bw = n / us / 1e3;
                printf("%s,%s,%d,%ld,%.3f,%.4f,%.4f\n", label, get ? "get" : "put", size, n, us, bw, bw);
                fflush(stdout);
            }
            if (n == maxb) break;
        }
    }
    MPI_Win_unlock_all(win);
    free(buf);
    MPI_Win_free(&win);
    MPI_Finalize();
    return 0;
}
