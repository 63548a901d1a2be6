/* SPDX-License-Identifier: MIT */
/*
 * devmodel.c - the device model: given when an op of n bytes arrives, decide
 * when a disk of the configured kind would have finished it.  queue_depth
 * servers overlap their positioning latency; transfers share one bandwidth
 * channel (docs/DEVICE-MODEL.md gives the formula and what the profiles
 * stand for).  It only computes times: it must never sleep, do I/O or look at
 * a clock, so the same code serves the local backend in real time and the mem
 * backend in virtual time.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "tier/store.h"

struct tier_devmodel {
	struct tier_devmodel_params p;
	pthread_mutex_t lock;
	uint64_t channel_free;   /* ns: when the shared transfer channel frees */
	uint64_t *server_free;   /* queue_depth entries; NULL when unlimited */
};

static const struct {
	const char *name;
	struct tier_devmodel_params p;
} profiles[] = {
	{ "hdd", { .read_latency_us = 5000, .write_latency_us = 5000,
		   .bandwidth = 150000000, .queue_depth = 16 } },
	{ "ssd", { .read_latency_us = 100, .write_latency_us = 100,
		   .bandwidth = 500000000, .queue_depth = 32 } },
	{ "none", { 0 } },
};

int tier_devmodel_profile(const char *name, struct tier_devmodel_params *out)
{
	if (!name || !out)
		return -EINVAL;
	for (size_t i = 0; i < sizeof(profiles) / sizeof(profiles[0]); i++) {
		if (strcmp(name, profiles[i].name) == 0) {
			*out = profiles[i].p;
			return 0;
		}
	}
	return -EINVAL;
}

int tier_devmodel_create(const struct tier_devmodel_params *p,
			 struct tier_devmodel **out)
{
	struct tier_devmodel *dm = NULL;
	int ret;

	if (!out)
		return -EINVAL;
	*out = NULL;
	dm = calloc(1, sizeof(*dm));
	if (!dm) {
		ret = -ENOMEM;
		goto out;
	}
	if (p)
		dm->p = *p;
	if (dm->p.queue_depth) {
		dm->server_free = calloc(dm->p.queue_depth, sizeof(uint64_t));
		if (!dm->server_free) {
			ret = -ENOMEM;
			goto out;
		}
	}
	ret = -pthread_mutex_init(&dm->lock, NULL);
	if (ret)
		goto out;
	*out = dm;
	dm = NULL;
out:
	if (dm) {
		free(dm->server_free);
		free(dm);
	}
	return ret;
}

void tier_devmodel_destroy(struct tier_devmodel *dm)
{
	if (!dm)
		return;
	pthread_mutex_destroy(&dm->lock);
	free(dm->server_free);
	free(dm);
}

bool tier_devmodel_is_null(const struct tier_devmodel *dm)
{
	return !dm || (dm->p.read_latency_us == 0 && dm->p.write_latency_us == 0 &&
		       dm->p.bandwidth == 0 && dm->p.queue_depth == 0);
}

/* bytes * 1e9 / bandwidth without overflow, rounded up to whole ns. */
static uint64_t xfer_ns(uint64_t bytes, uint64_t bandwidth)
{
	unsigned __int128 v = (unsigned __int128)bytes * 1000000000u;

	return (uint64_t)((v + bandwidth - 1) / bandwidth);
}

uint64_t tier_devmodel_schedule(struct tier_devmodel *dm, uint64_t arrive_ns,
				bool is_write, uint64_t bytes)
{
	uint64_t lat_ns, start, done;
	uint64_t *server = NULL;

	if (tier_devmodel_is_null(dm))
		return arrive_ns;
	lat_ns = 1000ull * (is_write ? dm->p.write_latency_us : dm->p.read_latency_us);

	pthread_mutex_lock(&dm->lock);
	start = arrive_ns;
	if (dm->server_free) {
		/* The server that frees first takes the op. */
		server = &dm->server_free[0];
		for (uint32_t i = 1; i < dm->p.queue_depth; i++)
			if (dm->server_free[i] < *server)
				server = &dm->server_free[i];
		if (*server > start)
			start = *server;
	}
	done = start + lat_ns;
	if (dm->p.bandwidth && bytes) {
		if (dm->channel_free > done)
			done = dm->channel_free;
		done += xfer_ns(bytes, dm->p.bandwidth);
		dm->channel_free = done;
	}
	if (server)
		*server = done;
	pthread_mutex_unlock(&dm->lock);
	return done;
}
