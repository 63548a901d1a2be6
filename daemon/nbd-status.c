/* SPDX-License-Identifier: MIT */
/*
 * daemon/nbd-status.c - NBD metadata contexts and NBD_CMD_BLOCK_STATUS.
 * Decides which contexts a client may list and select (only
 * "base:allocation", and only after structured replies), whether a
 * BLOCK_STATUS request may run (a context selected for this very export)
 * and how the engine's extents go on the wire (NBD_REPLY_TYPE_BLOCK_STATUS,
 * HOLE|ZERO for ranges in neither pool).  The answer comes from
 * tier_image_block_status, which reports a hole only where it is sure; this
 * file never makes one up.  Malformed option data gets NBD_REP_ERR_INVALID
 * and the haggling goes on.
 */
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "daemon/nbd-internal.h"

#define BASE_ALLOCATION "base:allocation"
#define META_ID_ALLOCATION 1u       /* our id for base:allocation */
#define NBD_STATE_HOLE 1u
#define NBD_STATE_ZERO 2u

static uint32_t rd32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return be32toh(v);
}

static int reply_context(struct nbd_conn *c, uint32_t opt, uint32_t id)
{
	uint8_t buf[4 + sizeof(BASE_ALLOCATION) - 1];
	uint32_t be = htobe32(id);

	memcpy(buf, &be, 4);
	memcpy(buf + 4, BASE_ALLOCATION, sizeof(BASE_ALLOCATION) - 1);
	return nbd__opt_reply(c, opt, NBD_REP_META_CONTEXT, buf, sizeof(buf));
}

static int invalid(struct nbd_conn *c, uint32_t opt, const char *why)
{
	return nbd__opt_reply(c, opt, NBD_REP_ERR_INVALID, why, strlen(why)) < 0 ? -1 : 1;
}

/*
 * NBD_OPT_LIST_META_CONTEXT / NBD_OPT_SET_META_CONTEXT: u32 name length,
 * name, u32 number of queries, then each query as u32 length + string.
 * 1 handled, -1 the connection is closing.
 */
int nbd__opt_meta_context(struct nbd_conn *c, uint32_t opt, const uint8_t *d, uint32_t len)
{
	char name[NBD_MAX_STRING + 1];
	bool set = opt == NBD_OPT_SET_META_CONTEXT, want = false;
	struct nbd_export *x;
	uint32_t namelen, nq, pos;

	if (set) {              /* SET replaces what was selected, even when it fails */
		c->meta_exp = NULL;
		c->meta_alloc = false;
	}
	if (!c->structured)
		return invalid(c, opt, "negotiate NBD_OPT_STRUCTURED_REPLY first");
	if (len < 8)
		return invalid(c, opt, "meta context request too short");
	namelen = rd32(d);
	if (namelen > NBD_MAX_STRING || namelen > len - 8)
		return invalid(c, opt, "bad export name length");
	if (memchr(d + 4, 0, namelen))
		return invalid(c, opt, "NUL in the export name");
	memcpy(name, d + 4, namelen);
	name[namelen] = 0;
	pos = 4 + namelen;
	nq = rd32(d + pos);
	pos += 4;
	/* check every query's framing before answering anything */
	for (uint32_t i = 0, p = pos; i < nq; i++) {
		uint32_t ql;

		if (len - p < 4)
			return invalid(c, opt, "query count past the data");
		ql = rd32(d + p);
		if (ql > NBD_MAX_STRING || ql > len - p - 4)
			return invalid(c, opt, "bad query length");
		p += 4 + ql;
		if (i + 1 == nq && p != len)
			return invalid(c, opt, "data after the last query");
	}
	if (nq == 0 && pos != len)
		return invalid(c, opt, "data after the query count");
	x = nbd__find_export(c->s, name);
	if (!x) {
		static const char m[] = "no such export";

		return nbd__opt_reply(c, opt, NBD_REP_ERR_UNKNOWN, m, sizeof(m) - 1) < 0 ? -1 : 1;
	}
	if (!set && nq == 0)
		want = true;    /* LIST with no query: everything we have */
	for (uint32_t i = 0; i < nq; i++) {
		uint32_t ql = rd32(d + pos);
		const char *q = (const char *)d + pos + 4;

		pos += 4 + ql;
		if (ql == sizeof(BASE_ALLOCATION) - 1 && !memcmp(q, BASE_ALLOCATION, ql))
			want = true;
		else if (!set && ql == 5 && !memcmp(q, "base:", 5))
			want = true;    /* LIST of a namespace: its every context */
	}
	if (want && reply_context(c, opt, set ? META_ID_ALLOCATION : 0) < 0)
		return -1;
	if (set && want) {
		c->meta_exp = x;
		c->meta_alloc = true;
	}
	return nbd__opt_reply(c, opt, NBD_REP_ACK, NULL, 0) < 0 ? -1 : 1;
}

bool nbd__status_allowed(const struct nbd_conn *c)
{
	return c->structured && c->meta_alloc && c->meta_exp == c->exp;
}

/*
 * The payload's room, taken on the I/O thread before the request crosses to
 * the engine: the callback writes into it and touches nothing of the server
 * (its buffer pool belongs to the I/O thread).  bs_add merges neighbours of
 * the same state, so an object gives at most two extents.
 */
#define STATUS_MAX_EXTENTS (2u * TIER_BLOCK_STATUS_MAX_OBJS)

static uint32_t status_room(const struct nbd_req *r)
{
	return 4 + 8 * ((r->flags & NBD_CMD_FLAG_REQ_ONE) ? 1 : STATUS_MAX_EXTENTS);
}

/* On the engine's thread: the answer goes back the way READs do. */
static void status_back(struct nbd_req *r, int result)
{
	if (r->c->s->xt)
		nbd__xt_done(r, result);
	else
		nbd__req_finish(r, result);
}

/* On the engine's thread: r->buf and r->count are the request's own. */
static void status_done(void *arg, int result, const struct tier_extent *ext, size_t n)
{
	struct nbd_req *r = arg;
	size_t max = (status_room(r) - 4) / 8;
	uint32_t *p = r->buf;

	if (result < 0 || n == 0) {
		status_back(r, result == -ENOMEM ? -ENOMEM : -EIO);
		return;
	}
	if (n > max)
		n = max;     /* REQ_ONE: the first; otherwise never more than the room */
	*p++ = htobe32(META_ID_ALLOCATION);
	for (size_t i = 0; i < n; i++) {
		uint32_t f = 0;

		if (ext[i].flags & TIER_EXTENT_HOLE)
			f |= NBD_STATE_HOLE;
		if (ext[i].flags & TIER_EXTENT_ZERO)
			f |= NBD_STATE_ZERO;
		/* the engine's range lies within the request: it fits 32 bits */
		*p++ = htobe32((uint32_t)ext[i].len);
		*p++ = htobe32(f);
	}
	r->count = (uint32_t)(4 + 8 * n);   /* from here on: the payload's length */
	status_back(r, 0);
}

/* On the engine's thread (directly, or from the I/O thread's hand-off). */
void nbd__status_engine(struct nbd_req *r)
{
	int rc = tier_image_block_status(r->c->exp->img, r->offset, r->count, status_done, r);

	if (rc < 0)
		status_back(r, rc == -ENOMEM ? -ENOMEM : -EINVAL);
}

/* Called where req_submit is (the NBD server's thread). */
void nbd__status_submit(struct nbd_req *r)
{
	struct nbd_conn *c = r->c;

	r->buf = nbd__buf_get(c->s, status_room(r), &r->buf_class);
	if (!r->buf) {
		nbd__req_reply(r, NBD_ENOMEM);
		return;
	}
	c->engine_pending++;      /* given back by nbd__req_finish */
	if (c->s->xt)
		nbd__xt_submit(r);    /* asked on the engine's thread */
	else
		nbd__status_engine(r);
}

void nbd__status_reply_hdr(struct nbd_req *r)
{
	struct nbd_structured_reply *h = &r->hdr.sr.h;

	h->magic = htobe32(NBD_STRUCTURED_REPLY_MAGIC);
	h->flags = htobe16(NBD_REPLY_FLAG_DONE);
	h->type = htobe16(NBD_REPLY_TYPE_BLOCK_STATUS);
	h->cookie = r->cookie;
	h->length = htobe32(r->count);
	r->hdr_len = sizeof(*h);
	r->send_data = true;
}
