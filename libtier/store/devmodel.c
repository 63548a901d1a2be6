/* SPDX-License-Identifier: MIT */
/*
 * devmodel.c - the device model: given when an op of n bytes arrives, decide
 * when a disk of the configured kind would have finished it.  queue_depth
 * servers overlap their positioning latency; transfers share one bandwidth
 * channel; an optional write-ahead journal acknowledges writes at its own
 * speed while it has room and writes them back on the servers, placed lazily
 * when the next op arrives (docs/DEVICE-MODEL.md gives the formula and what
 * the profiles stand for).  It only computes times: it must never sleep, do I/O or look at
 * a clock, so the same code serves the local backend in real time and the mem
 * backend in virtual time.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "tier/store.h"

/*
 * One journal entry, in journal order (a ring).  The first `jstarted` entries
 * from the head have had their write-back placed on a server; pdone is then
 * the time the journal may trim through this entry: the latest write-back
 * completion of it and of every entry before it (a journal is trimmed in
 * order, like FileJournal::committed_thru).
 */
struct jent {
	uint64_t bytes;    /* the write's bytes: what the write-back transfers */
	uint64_t charge;   /* journal space it takes */
	uint64_t ready;    /* ns: in the journal (acknowledged); write-back may start */
	uint64_t pdone;    /* ns: trimmable from here (valid once started) */
};

struct tier_devmodel {
	struct tier_devmodel_params p;
	pthread_mutex_t lock;
	uint64_t channel_free;   /* ns: when the shared transfer channel frees */
	uint64_t *server_free;   /* queue_depth entries; NULL when unlimited */
	/* journal (p.journal_bytes > 0) */
	struct jent *jq;         /* ring of jcap entries, jlen of them from jhead */
	size_t jcap, jhead, jlen, jstarted;
	uint64_t jused;          /* sum of the queued entries' charge */
	uint64_t jadmit;         /* ns: when the last write entered the journal */
	uint64_t jchan_free;     /* ns: when the journal's channel frees */
	uint64_t jpdone;         /* ns: latest write-back completion placed so far */
};

/* Journal space of an entry: the data in 4 KiB blocks plus one for the
 * entry's header, transaction and footer (FileJournal aligns entries). */
#define JOURNAL_BLOCK 4096u
#define JOURNAL_RING_MIN 256u

static const struct {
	const char *name;
	struct tier_devmodel_params p;
} profiles[] = {
	{ "hdd", { .read_latency_us = 5000, .write_latency_us = 5000,
		   .bandwidth = 150000000, .queue_depth = 16 } },
	{ "hdd-journal", { .read_latency_us = 5000, .write_latency_us = 5000,
			   .bandwidth = 150000000, .queue_depth = 16,
			   .journal_bytes = 1ull << 30, .journal_latency_us = 150,
			   .journal_bandwidth = 500000000 } },
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
	free(dm->jq);
	free(dm);
}

bool tier_devmodel_is_null(const struct tier_devmodel *dm)
{
	return !dm || (dm->p.read_latency_us == 0 && dm->p.write_latency_us == 0 &&
		       dm->p.bandwidth == 0 && dm->p.queue_depth == 0 &&
		       dm->p.journal_bytes == 0);
}

/* bytes * 1e9 / bandwidth without overflow, rounded up to whole ns. */
static uint64_t xfer_ns(uint64_t bytes, uint64_t bandwidth)
{
	unsigned __int128 v = (unsigned __int128)bytes * 1000000000u;

	return (uint64_t)((v + bandwidth - 1) / bandwidth);
}

/* The server that frees first (NULL when the queue depth is unlimited). */
static uint64_t *first_free_server(struct tier_devmodel *dm)
{
	uint64_t *server;

	if (!dm->server_free)
		return NULL;
	server = &dm->server_free[0];
	for (uint32_t i = 1; i < dm->p.queue_depth; i++)
		if (dm->server_free[i] < *server)
			server = &dm->server_free[i];
	return server;
}

/* Serve an op that starts on `server` at `start`: position, then transfer on
 * the shared channel.  Returns when it is done; the server is busy until then. */
static uint64_t serve(struct tier_devmodel *dm, uint64_t *server, uint64_t start,
		      uint64_t lat_ns, uint64_t bytes)
{
	uint64_t done = start + lat_ns;

	if (dm->p.bandwidth && bytes) {
		if (dm->channel_free > done)
			done = dm->channel_free;
		done += xfer_ns(bytes, dm->p.bandwidth);
		dm->channel_free = done;
	}
	if (server)
		*server = done;
	return done;
}

static struct jent *jq_at(struct tier_devmodel *dm, size_t i)
{
	return &dm->jq[(dm->jhead + i) % dm->jcap];
}

/*
 * Place the write-back of the oldest entry not yet started on the server that
 * frees first, unless it would start after `until` (then leave it for a later
 * call: an op arriving before then takes the server first).  force places it
 * whatever its start.  Returns false when nothing was placed.
 */
static bool drain_one(struct tier_devmodel *dm, uint64_t until, bool force)
{
	struct jent *e;
	uint64_t *server, start, done;

	if (dm->jstarted == dm->jlen)
		return false;
	e = jq_at(dm, dm->jstarted);
	server = first_free_server(dm);
	start = e->ready;
	if (server && *server > start)
		start = *server;
	if (!force && start > until)
		return false;
	done = serve(dm, server, start, 1000ull * dm->p.write_latency_us, e->bytes);
	if (done > dm->jpdone)
		dm->jpdone = done;
	e->pdone = dm->jpdone;
	dm->jstarted++;
	return true;
}

/* Trim the journal through every entry whose write-back (and every earlier
 * one's) is done by t. */
static void journal_trim(struct tier_devmodel *dm, uint64_t t)
{
	while (dm->jstarted) {
		struct jent *e = jq_at(dm, 0);

		if (e->pdone > t)
			break;
		dm->jused -= e->charge;
		dm->jhead = (dm->jhead + 1) % dm->jcap;
		dm->jlen--;
		dm->jstarted--;
	}
}

/* Room for one more entry in the ring; false if it cannot grow. */
static bool jq_room(struct tier_devmodel *dm)
{
	struct jent *q;
	size_t cap;

	if (dm->jlen < dm->jcap)
		return true;
	cap = dm->jcap ? dm->jcap * 2 : JOURNAL_RING_MIN;
	q = malloc(cap * sizeof(*q));
	if (!q)
		return false;
	for (size_t i = 0; i < dm->jlen; i++)
		q[i] = *jq_at(dm, i);
	free(dm->jq);
	dm->jq = q;
	dm->jcap = cap;
	dm->jhead = 0;
	return true;
}

/* A write with a journal: returns when it is acknowledged. */
static uint64_t journal_write(struct tier_devmodel *dm, uint64_t arrive_ns, uint64_t bytes)
{
	uint64_t charge = (bytes + JOURNAL_BLOCK - 1) / JOURNAL_BLOCK * JOURNAL_BLOCK + JOURNAL_BLOCK;
	uint64_t t = arrive_ns > dm->jadmit ? arrive_ns : dm->jadmit;   /* the journal is a log */
	uint64_t ack;
	struct jent *e;

	journal_trim(dm, t);
	/* Full (or no memory for the entry): wait until the oldest entry is
	 * written back, placing its write-back now if it was still waiting. */
	while (dm->jlen && (dm->jused + charge > dm->p.journal_bytes || !jq_room(dm))) {
		if (!dm->jstarted)
			drain_one(dm, 0, true);
		if (jq_at(dm, 0)->pdone > t)
			t = jq_at(dm, 0)->pdone;
		journal_trim(dm, t);
	}
	if (!jq_room(dm)) {
		/* No memory for even one entry: write through to the servers. */
		uint64_t *server = first_free_server(dm);

		if (server && *server > t)
			t = *server;
		return serve(dm, server, t, 1000ull * dm->p.write_latency_us, bytes);
	}
	dm->jadmit = t;
	ack = t + 1000ull * dm->p.journal_latency_us;
	if (dm->p.journal_bandwidth && bytes) {
		if (dm->jchan_free > ack)
			ack = dm->jchan_free;
		ack += xfer_ns(bytes, dm->p.journal_bandwidth);
		dm->jchan_free = ack;
	}
	e = jq_at(dm, dm->jlen);
	*e = (struct jent){ .bytes = bytes, .charge = charge, .ready = ack };
	dm->jlen++;
	dm->jused += charge;
	return ack;
}

uint64_t tier_devmodel_schedule(struct tier_devmodel *dm, uint64_t arrive_ns,
				bool is_write, uint64_t bytes)
{
	uint64_t lat_ns, start, done;
	uint64_t *server;

	if (tier_devmodel_is_null(dm))
		return arrive_ns;
	lat_ns = 1000ull * (is_write ? dm->p.write_latency_us : dm->p.read_latency_us);

	pthread_mutex_lock(&dm->lock);
	if (dm->p.journal_bytes) {
		/* The write-back takes every server that frees before this op. */
		while (drain_one(dm, arrive_ns, false))
			;
		if (is_write) {
			done = journal_write(dm, arrive_ns, bytes);
			pthread_mutex_unlock(&dm->lock);
			return done;
		}
	}
	start = arrive_ns;
	server = first_free_server(dm);
	if (server && *server > start)
		start = *server;
	done = serve(dm, server, start, lat_ns, bytes);
	pthread_mutex_unlock(&dm->lock);
	return done;
}
