/* OpenMPI peer of `dseek bench allreduce`: MPI_Allreduce fp32 sum bandwidth per size,
 * one JSON line per size from rank 0, the same fields and the same timing rule:
 * in place, `warmup` untimed calls, then `iters` calls each after a barrier; a call's
 * time is the slowest rank's (one MPI_MAX reduce of the times at the end); the median.
 *   algbw = bytes / time,  busbw = algbw * 2(N-1)/N   (nccl-tests)
 *
 *   mpicc -O2 -o mpi_allreduce mpi_allreduce.c
 *   mpirun --allow-run-as-root --oversubscribe -np N ./mpi_allreduce --bytes 4096,1048576 [--iters K] [--warmup W]
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int by_value(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static double median(double* v, int n) {
  qsort(v, (size_t)n, sizeof *v, by_value);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char* sizes = "1048576";
  int iters = 20, warmup = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--bytes")) sizes = argv[i + 1];
    else if (!strcmp(argv[i], "--iters")) iters = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--warmup")) warmup = atoi(argv[i + 1]);
    else {
      if (rank == 0) fprintf(stderr, "mpi_allreduce: unknown argument %s\n", argv[i]);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
  }
  if (iters < 1) iters = 1;
  double* times = malloc(sizeof(double) * (size_t)iters);
  char* list = strdup(sizes);
  for (char* item = strtok(list, ","); item; item = strtok(NULL, ",")) {
    const size_t bytes = strtoull(item, NULL, 10);
    const size_t count = bytes / 4 ? bytes / 4 : 1;
    float* buf = malloc(count * sizeof(float));
    if (!buf) MPI_Abort(MPI_COMM_WORLD, 1);
    for (size_t i = 0; i < count; ++i) buf[i] = 1.0f; /* maps the pages before timing */
    for (int i = 0; i < warmup; ++i) MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    for (int i = 0; i < iters; ++i) {
      MPI_Barrier(MPI_COMM_WORLD);
      const double t0 = MPI_Wtime();
      MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      times[i] = MPI_Wtime() - t0;
    }
    MPI_Allreduce(MPI_IN_PLACE, times, iters, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0) {
      const double t = median(times, iters), real = (double)(count * sizeof(float));
      const double algbw = real / t / 1e9;
      printf("{\"bench\":\"allreduce\",\"impl\":\"openmpi\",\"ranks\":%d,\"bytes\":%zu,\"dtype\":\"f32\","
             "\"iters\":%d,\"time_us_median\":%.3f,\"algbw_gbps\":%.4f,\"busbw_gbps\":%.4f}\n",
             size, count * sizeof(float), iters, t * 1e6, algbw, algbw * 2.0 * (size - 1) / size);
      fflush(stdout);
    }
    free(buf);
  }
  free(list);
  free(times);
  MPI_Finalize();
  return 0;
}
