// SQLCipher on the store workload, as its own process (libsqlcipher and libsqlite3 export the same
// symbols, so they cannot share one binary). Built and run by tools/bench/run:
//   gcc -O2 -DSQLITE_HAS_CODEC -I/usr/include/sqlcipher main.c ../Sources/CFloor/store_floor.c -lsqlcipher -lcrypto
// Prints: open_passphrase_ms open_rawkey_ms put_us get_us (medians), for ROWS rows of 1 KiB.
#include "../Sources/CFloor/include/store_floor.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int compare(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    if (argc < 4) return 2;
    const char *folder = argv[1];
    int rows = atoi(argv[2]);
    int full = atoi(argv[3]);
    char path[512];
    snprintf(path, sizeof path, "%s/sqlcipher.db", folder);
    unlink(path);
    const char *rawkey = "x'2DD29CA851E7B56E4697B0E1F08507293D761A05CE4D1B628663F411A8086D99'";
    store_floor *s = store_floor_open(path, full, rawkey);
    unsigned char value[1024], out[2048];
    char name[32];
    for (int i = 0; i < 1024; i++) value[i] = (unsigned char)(i * 31);
    double *samples = malloc(sizeof(double) * rows);
    for (int i = 0; i < rows; i++) {
        snprintf(name, sizeof name, "item-%d", i);
        double t0 = now_us();
        store_floor_put(s, name, value, sizeof value);
        samples[i] = now_us() - t0;
    }
    qsort(samples, rows, sizeof(double), compare);
    double put = samples[rows / 2];
    for (int i = 0; i < rows; i++) {
        snprintf(name, sizeof name, "item-%d", (i * 7919) % rows);
        double t0 = now_us();
        if (store_floor_get(s, name, out, sizeof out) != 1024) return 1;
        samples[i] = now_us() - t0;
    }
    qsort(samples, rows, sizeof(double), compare);
    double get = samples[rows / 2];
    store_floor_close(s);
    // Open cost: raw key, and a passphrase (PBKDF2 on every open).
    double opens[21];
    for (int i = 0; i < 21; i++) {
        double t0 = now_us();
        store_floor *o = store_floor_open(path, full, rawkey);
        store_floor_get(o, "item-1", out, sizeof out);
        opens[i] = now_us() - t0;
        store_floor_close(o);
    }
    qsort(opens, 21, sizeof(double), compare);
    char path2[512];
    snprintf(path2, sizeof path2, "%s/sqlcipher-pass.db", folder);
    unlink(path2);
    store_floor *p = store_floor_open(path2, full, "correct horse battery staple");
    store_floor_put(p, "item-1", value, sizeof value);
    store_floor_close(p);
    double passOpens[5];
    for (int i = 0; i < 5; i++) {
        double t0 = now_us();
        store_floor *o = store_floor_open(path2, full, "correct horse battery staple");
        store_floor_get(o, "item-1", out, sizeof out);
        passOpens[i] = now_us() - t0;
        store_floor_close(o);
    }
    qsort(passOpens, 5, sizeof(double), compare);
    printf("%.3f %.3f %.2f %.2f\n", passOpens[2] / 1000, opens[10] / 1000, put, get);
    return 0;
}
