/* SPDX-License-Identifier: MIT */
/*
 * tests/fuzz/fuzz_main.c - the regression driver linked into every fuzz
 * target when it is built without libFuzzer (gcc + ASan/UBSan in CI).  It
 * feeds each file named on the command line, and every regular file of each
 * directory named there (in name order), once through
 * LLVMFuzzerTestOneInput.  It decides nothing about the input; it must never
 * hide a failure: an unreadable corpus or an empty one is an error, and a
 * target that misbehaves aborts through the sanitizers.
 */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static int run_file(const char *path)
{
	uint8_t *buf = NULL;
	FILE *f = fopen(path, "rb");
	long len;
	int rc = -EIO;

	if (!f)
		goto out;
	if (fseek(f, 0, SEEK_END) < 0 || (len = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) < 0)
		goto out;
	/* a distinct allocation of exactly len bytes, so ASan sees overreads */
	buf = malloc(len ? (size_t)len : 1);
	if (!buf || fread(buf, 1, (size_t)len, f) != (size_t)len)
		goto out;
	LLVMFuzzerTestOneInput(buf, (size_t)len);
	rc = 0;
out:
	if (rc < 0)
		fprintf(stderr, "fuzz: cannot read %s\n", path);
	free(buf);
	if (f)
		fclose(f);
	return rc;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

/* Returns the number of inputs run, or -1. */
static int run_path(const char *path)
{
	struct dirent **ents = NULL;
	struct stat st;
	int n, ran = 0;

	if (stat(path, &st) < 0) {
		fprintf(stderr, "fuzz: %s: %s\n", path, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode))
		return run_file(path) < 0 ? -1 : 1;
	n = scandir(path, &ents, NULL, by_name);
	if (n < 0) {
		fprintf(stderr, "fuzz: %s: %s\n", path, strerror(errno));
		return -1;
	}
	for (int i = 0; i < n; i++) {
		char p[4096];
		struct stat fst;

		snprintf(p, sizeof(p), "%s/%s", path, ents[i]->d_name);
		if (ents[i]->d_name[0] != '.' && stat(p, &fst) == 0 && S_ISREG(fst.st_mode)) {
			if (ran >= 0 && run_file(p) < 0)
				ran = -1;
			else if (ran >= 0)
				ran++;
		}
		free(ents[i]);
	}
	free(ents);
	return ran;
}

int main(int argc, char **argv)
{
	int total = 0;

	if (LLVMFuzzerInitialize)
		LLVMFuzzerInitialize(&argc, &argv);
	if (argc < 2) {
		fprintf(stderr, "usage: %s FILE|DIR...\n", argv[0]);
		return 2;
	}
	for (int i = 1; i < argc; i++) {
		int n = run_path(argv[i]);

		if (n < 0)
			return 1;
		total += n;
	}
	if (total == 0) {
		fprintf(stderr, "fuzz: no inputs found\n");
		return 1;
	}
	printf("fuzz: %d inputs ran cleanly\n", total);
	return 0;
}
