/* SPDX-License-Identifier: MIT */
/*
 * tests/fuzz/fuzz_config.c - fuzz target for tierd's INI config loader
 * (daemon/config.c over libinih).  The input is the file's bytes, handed to
 * tierd_config_load() through a memfd so nothing touches the disk.  A loaded
 * config must satisfy the rules the loader promises (at least one listen
 * address, valid image names, tier parameters that pass tier_params_check,
 * sizes on the local backend); a refused one must come with a message
 * naming the file.  It must never write outside its own memfd.
 */
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "daemon/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_loaded(const struct tierd_config *c)
{
	char err[512];

	if (c->n_listen < 1 || c->n_listen > TIERD_MAX_LISTEN || c->n_images > TIERD_MAX_IMAGES)
		abort();
	for (size_t i = 0; i < c->n_listen; i++)
		if (!c->listen[i] || !c->listen[i][0])
			abort();
	if (tier_params_check(&c->tier, err, sizeof(err)) != 0)
		abort();
	if (c->backend != TIERD_BACKEND_LOCAL && c->backend != TIERD_BACKEND_RADOS)
		abort();
	for (size_t i = 0; i < c->n_images; i++) {
		const struct tierd_image_cfg *img = &c->images[i];
		size_t n = strlen(img->name);

		if (n == 0 || n > 64)
			abort();
		for (size_t k = 0; k < n; k++)
			if (!isalnum((unsigned char)img->name[k]) && !strchr("._-", img->name[k]))
				abort();
		if (c->backend == TIERD_BACKEND_LOCAL && (img->size == 0 || img->size % 512))
			abort();
		if (c->backend == TIERD_BACKEND_RADOS && (img->size || !img->rbd_image))
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tierd_config *c = NULL;
	char path[64], err[1024];
	int fd, rc;

	fd = memfd_create("fuzz-config", MFD_CLOEXEC);
	if (fd < 0)
		return 0;
	for (size_t off = 0; off < size;) {
		ssize_t n = write(fd, data + off, size - off);

		if (n <= 0)
			goto out;
		off += (size_t)n;
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	rc = tierd_config_load(path, &c, err, sizeof(err));
	if (rc == 0) {
		if (!c)
			abort();
		check_loaded(c);
		tierd_config_free(c);
	} else if (rc > 0 || c || strncmp(err, path, strlen(path)) != 0) {
		abort();
	}
out:
	close(fd);
	return 0;
}
