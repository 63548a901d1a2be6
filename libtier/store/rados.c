/* SPDX-License-Identifier: MIT */
/*
 * libtier/store/rados.c - the store seam over librados: one pool (and
 * optionally a namespace) of a Ceph cluster per store.  It decides how an op
 * maps onto one atomic RADOS compound op: data, the `tier.meta` record and the
 * `tier.version` guard xattr are always written together, guards are
 * compare-xattr steps of the same op, and a failed guard changes nothing.  It
 * must never touch engine state: the librados callback only records the
 * result into the op and hands it to tier__store_complete(); listing runs on a
 * helper thread so the caller's thread never waits on the cluster.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rados/librados.h>

#include "tier/rados.h"
#include "tier/store.h"
#include "rados_internal.h"
#include "store_internal.h"

/*
 * `tier.meta`: a little-endian record, the same idea as the local backend's
 *   le16 format (1) | le16 reserved (0) | le32 meta_len | le64 version | meta
 * `tier.version`: the version as decimal text, absent for version 0, so that a
 * compare-xattr step can guard on it (a missing xattr compares as "").
 */
#define XATTR_META     "tier.meta"
#define XATTR_VERSION  "tier.version"
#define META_FORMAT    1
#define META_HDR       16
#define FREE_CTX_MAX   256

struct tier_rados {
	rados_t cluster;
	char client_name[96];
};

struct rados_be;

/* Per-op state that must live until the librados completion fires. */
struct rctx {
	struct rctx *next_free;
	struct rados_be *be;
	struct tier_store_op *op;
	rados_completion_t comp;
	rados_write_op_t wop;
	rados_read_op_t rop;
	size_t bytes_read;
	int prval, prval_x;
	uint64_t size;
	time_t mtime;
	rados_xattrs_iter_t xattrs;
};

struct rados_be {
	rados_ioctx_t io;
	pthread_mutex_t lock;           /* free list and lister queue */
	struct rctx *free;
	size_t nfree;
	/* the lister thread, started with the first LIST */
	pthread_cond_t cond;
	pthread_t lister;
	bool lister_started, stop;
	struct tier_store_op *lq_head, *lq_tail;
};

rados_t tier__rados_cluster(const struct tier_rados *r)
{
	return r->cluster;
}

const char *tier__rados_client_name(const struct tier_rados *r)
{
	return r->client_name;
}

static void put_le16(uint8_t *p, uint16_t v) { p[0] = v & 0xff; p[1] = v >> 8; }

static void put_le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put_le64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static uint64_t get_le64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/* ---- per-op contexts ---- */

static struct rctx *ctx_get(struct rados_be *be, struct tier_store_op *op)
{
	struct rctx *x;

	pthread_mutex_lock(&be->lock);
	x = be->free;
	if (x) {
		be->free = x->next_free;
		be->nfree--;
	}
	pthread_mutex_unlock(&be->lock);
	if (!x)
		x = malloc(sizeof(*x));
	if (!x)
		return NULL;
	memset(x, 0, sizeof(*x));
	x->be = be;
	x->op = op;
	return x;
}

static void ctx_put(struct rctx *x)
{
	struct rados_be *be = x->be;

	if (x->wop)
		rados_release_write_op(x->wop);
	if (x->rop)
		rados_release_read_op(x->rop);
	if (x->comp)
		rados_aio_release(x->comp);
	if (x->xattrs)
		rados_getxattrs_end(x->xattrs);
	pthread_mutex_lock(&be->lock);
	if (be->nfree < FREE_CTX_MAX) {
		x->next_free = be->free;
		be->free = x;
		be->nfree++;
		x = NULL;
	}
	pthread_mutex_unlock(&be->lock);
	free(x);
}

/* ---- completion (a librados thread) ---- */

/* STAT: version and meta from the `tier.meta` record among the xattrs. */
static int parse_stat(struct rctx *x)
{
	struct tier_store_op *op = x->op;
	const char *name, *val;
	size_t len;

	op->obj_size = x->size;
	op->obj_mtime_ns = (uint64_t)x->mtime * 1000000000ull;
	while (rados_getxattrs_next(x->xattrs, &name, &val, &len) == 0 && name) {
		const uint8_t *p = (const uint8_t *)val;
		uint32_t mlen;

		if (strcmp(name, XATTR_META) != 0)
			continue;
		if (len < META_HDR || p[0] != META_FORMAT || p[1] != 0)
			return -EIO;
		mlen = get_le32(p + 4);
		if (mlen > TIER_META_MAX || len != META_HDR + (size_t)mlen)
			return -EIO;
		op->obj_version = get_le64(p + 8);
		op->meta_len_out = mlen;
		if (op->meta_buf && mlen) {
			if (mlen > op->meta_cap)
				return -ERANGE;
			memcpy(op->meta_buf, p + META_HDR, mlen);
		}
	}
	return 0;
}

static int finish_result(struct rctx *x, int rc)
{
	struct tier_store_op *op = x->op;

	if (rc == -ENOENT && (op->flags & TIER_STORE_F_GUARD))
		return -ECANCELED;      /* a guard on an absent object fails */
	if (rc < 0)
		return rc;
	switch (op->opcode) {
	case TIER_STORE_READ:
		if (x->prval < 0)
			return x->prval;
		if (x->bytes_read < op->len)   /* past EOF reads as zeros */
			memset((char *)op->buf + x->bytes_read, 0, op->len - x->bytes_read);
		return (int)op->len;
	case TIER_STORE_WRITE:
		return (int)op->len;
	case TIER_STORE_STAT:
		if (x->prval < 0)
			return x->prval;
		return x->prval_x < 0 ? x->prval_x : parse_stat(x);
	default:
		return 0;
	}
}

static void on_complete(rados_completion_t c, void *arg)
{
	struct rctx *x = arg;
	struct tier_store_op *op = x->op;
	int rc = finish_result(x, rados_aio_get_return_value(c));

	ctx_put(x);
	tier__store_complete(op, rc);
}

/* ---- building compound ops ---- */

static void add_guard_write(rados_write_op_t w, const struct tier_store_op *op, char *vbuf)
{
	if (op->flags & TIER_STORE_F_GUARD) {
		size_t n = 0;

		if (op->expect_version)
			n = (size_t)snprintf(vbuf, 24, "%" PRIu64, op->expect_version);
		rados_write_op_cmpxattr(w, XATTR_VERSION, LIBRADOS_CMPXATTR_OP_EQ, vbuf, n);
	}
	if (op->flags & TIER_STORE_F_EXCL)
		rados_write_op_create(w, LIBRADOS_CREATE_EXCLUSIVE, NULL);
}

/* Record + version xattr in the same op as the data (the atomicity DESIGN asks for). */
static int add_meta(rados_write_op_t w, const struct tier_store_op *op)
{
	uint8_t stackrec[META_HDR + 256], *rec = stackrec;
	char vbuf[24];

	if (op->meta_len > sizeof(stackrec) - META_HDR) {
		rec = malloc(META_HDR + (size_t)op->meta_len);
		if (!rec)
			return -ENOMEM;
	}
	put_le16(rec, META_FORMAT);
	put_le16(rec + 2, 0);
	put_le32(rec + 4, op->meta_len);
	put_le64(rec + 8, op->version);
	if (op->meta_len)
		memcpy(rec + META_HDR, op->meta, op->meta_len);
	/* librados copies the value into the op */
	rados_write_op_setxattr(w, XATTR_META, (const char *)rec, META_HDR + op->meta_len);
	if (op->version) {
		snprintf(vbuf, sizeof(vbuf), "%" PRIu64, op->version);
		rados_write_op_setxattr(w, XATTR_VERSION, vbuf, strlen(vbuf));
	} else {
		rados_write_op_rmxattr(w, XATTR_VERSION);
	}
	if (rec != stackrec)
		free(rec);
	return 0;
}

static int submit_write(void *bep, struct tier_store_op *op)
{
	static const char zero_byte[1];
	struct rados_be *be = bep;
	struct rctx *x = ctx_get(be, op);
	char vbuf[24];
	int rc;

	if (!x)
		return -ENOMEM;
	x->wop = rados_create_write_op();
	if (!x->wop) {
		rc = -ENOMEM;
		goto out;
	}
	add_guard_write(x->wop, op, vbuf);
	switch (op->opcode) {
	case TIER_STORE_WRITE:
		rados_write_op_write(x->wop, op->buf, op->len, op->off);
		break;
	case TIER_STORE_ZERO:
		/*
		 * RADOS ignores a zero past EOF and does not create the object;
		 * the contract (like the other backends) creates it and extends
		 * it to off+len, so the last byte is written as a zero.
		 */
		if (op->len > 1)
			rados_write_op_zero(x->wop, op->off, op->len - 1);
		rados_write_op_write(x->wop, zero_byte, 1, op->off + op->len - 1);
		break;
	case TIER_STORE_SETMETA:
		if ((op->flags & TIER_STORE_F_CREATE) && !(op->flags & TIER_STORE_F_EXCL))
			rados_write_op_create(x->wop, LIBRADOS_CREATE_IDEMPOTENT, NULL);
		else if (!(op->flags & TIER_STORE_F_CREATE))
			rados_write_op_assert_exists(x->wop);
		break;
	case TIER_STORE_REMOVE:
		rados_write_op_remove(x->wop);
		break;
	default:
		rc = -EINVAL;
		goto out;
	}
	if ((op->flags & TIER_STORE_F_META) && op->opcode != TIER_STORE_REMOVE) {
		rc = add_meta(x->wop, op);
		if (rc < 0)
			goto out;
	}
	rc = rados_aio_create_completion2(x, on_complete, &x->comp);
	if (rc < 0)
		goto out;
	rc = rados_aio_write_op_operate(x->wop, be->io, x->comp, op->oid, NULL, 0);
out:
	if (rc < 0)
		ctx_put(x);
	return rc < 0 ? rc : 0;
}

static int submit_read(void *bep, struct tier_store_op *op)
{
	struct rados_be *be = bep;
	struct rctx *x = NULL;
	char vbuf[24];
	int rc;

	/* "must be absent" makes no sense for a read; refuse rather than guess */
	if (op->flags & TIER_STORE_F_EXCL)
		return -EINVAL;
	x = ctx_get(be, op);
	if (!x)
		return -ENOMEM;
	x->rop = rados_create_read_op();
	if (!x->rop) {
		rc = -ENOMEM;
		goto out;
	}
	if (op->flags & TIER_STORE_F_GUARD) {
		size_t n = 0;

		if (op->expect_version)
			n = (size_t)snprintf(vbuf, sizeof(vbuf), "%" PRIu64, op->expect_version);
		rados_read_op_cmpxattr(x->rop, XATTR_VERSION, LIBRADOS_CMPXATTR_OP_EQ, vbuf, n);
	}
	if (op->opcode == TIER_STORE_READ) {
		rados_read_op_read(x->rop, op->off, op->len, op->buf, &x->bytes_read, &x->prval);
	} else {
		rados_read_op_stat(x->rop, &x->size, &x->mtime, &x->prval);
		rados_read_op_getxattrs(x->rop, &x->xattrs, &x->prval_x);
	}
	rc = rados_aio_create_completion2(x, on_complete, &x->comp);
	if (rc < 0)
		goto out;
	rc = rados_aio_read_op_operate(x->rop, be->io, x->comp, op->oid, 0);
out:
	if (rc < 0)
		ctx_put(x);
	return rc < 0 ? rc : 0;
}

/* ---- listing, on the lister thread ---- */

static int do_list(struct rados_be *be, struct tier_store_op *op)
{
	rados_list_ctx_t lc = NULL;
	const char *entry;
	size_t plen = strlen(op->prefix), n = 0, cap = 0;
	char **names = NULL, **nn;
	int rc;

	rc = rados_nobjects_list_open(be->io, &lc);
	if (rc < 0)
		return rc;
	while ((rc = rados_nobjects_list_next(lc, &entry, NULL, NULL)) == 0) {
		if (strncmp(entry, op->prefix, plen) != 0)
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 64;
			nn = realloc(names, cap * sizeof(*names));
			if (!nn) {
				rc = -ENOMEM;
				goto out;
			}
			names = nn;
		}
		names[n] = strdup(entry);
		if (!names[n]) {
			rc = -ENOMEM;
			goto out;
		}
		n++;
	}
	if (rc == -ENOENT)      /* end of the listing */
		rc = 0;
out:
	rados_nobjects_list_close(lc);
	if (rc < 0) {
		tier_store_list_free(names, n);
		return rc;
	}
	op->names = names;
	op->n_names = n;
	return n > INT32_MAX ? INT32_MAX : (int)n;
}

static void *lister_main(void *arg)
{
	struct rados_be *be = arg;
	struct tier_store_op *op;

	for (;;) {
		pthread_mutex_lock(&be->lock);
		while (!be->lq_head && !be->stop)
			pthread_cond_wait(&be->cond, &be->lock);
		op = be->lq_head;
		if (op) {
			be->lq_head = op->q_next;
			if (!be->lq_head)
				be->lq_tail = NULL;
		}
		pthread_mutex_unlock(&be->lock);
		if (!op)
			return NULL;
		tier__store_complete(op, do_list(be, op));
	}
}

static int submit_list(void *bep, struct tier_store_op *op)
{
	struct rados_be *be = bep;
	int rc = 0;

	pthread_mutex_lock(&be->lock);
	if (!be->lister_started) {
		rc = -pthread_create(&be->lister, NULL, lister_main, be);
		be->lister_started = rc == 0;
	}
	if (rc == 0) {
		op->q_next = NULL;
		if (be->lq_tail)
			be->lq_tail->q_next = op;
		else
			be->lq_head = op;
		be->lq_tail = op;
		pthread_cond_signal(&be->cond);
	}
	pthread_mutex_unlock(&be->lock);
	return rc;
}

/* ---- life cycle ---- */

static void rados_be_destroy(void *bep)
{
	struct rados_be *be = bep;
	struct rctx *x;

	if (!be)
		return;
	if (be->lister_started) {
		pthread_mutex_lock(&be->lock);
		be->stop = true;
		pthread_cond_signal(&be->cond);
		pthread_mutex_unlock(&be->lock);
		pthread_join(be->lister, NULL);
	}
	if (be->io) {
		rados_aio_flush(be->io);
		rados_ioctx_destroy(be->io);
	}
	while ((x = be->free)) {
		be->free = x->next_free;
		free(x);
	}
	pthread_cond_destroy(&be->cond);
	pthread_mutex_destroy(&be->lock);
	free(be);
}

static const struct tier_store_ops rados_store_ops = {
	.size = sizeof(struct tier_store_ops),
	.name = "rados",
	.read = submit_read,
	.write = submit_write,
	.zero = submit_write,
	.setmeta = submit_write,
	.remove = submit_write,
	.stat = submit_read,
	.list = submit_list,
	.destroy = rados_be_destroy,
};

int tier_store_rados_create(struct tier_rados *r, const char *pool, const char *ns,
			    struct tier_cq *cq, struct tier_store **out)
{
	struct rados_be *be = NULL;
	char name[256];
	int rc;

	*out = NULL;
	if (!r || !pool || !*pool || !cq)
		return -EINVAL;
	be = calloc(1, sizeof(*be));
	if (!be)
		return -ENOMEM;
	pthread_mutex_init(&be->lock, NULL);
	pthread_cond_init(&be->cond, NULL);
	rc = rados_ioctx_create(r->cluster, pool, &be->io);
	if (rc < 0) {
		be->io = NULL;
		goto out;
	}
	if (ns && *ns)
		rados_ioctx_set_namespace(be->io, ns);
	if (ns && *ns)
		snprintf(name, sizeof(name), "%s/%s", pool, ns);
	else
		snprintf(name, sizeof(name), "%s", pool);
	rc = tier_store_create(&rados_store_ops, be, name, cq, out);
out:
	if (rc < 0)
		rados_be_destroy(be);
	return rc;
}

/* ---- the cluster connection ---- */

static int conf_set_secs(rados_t c, const char *key, uint64_t ms)
{
	char v[32];

	snprintf(v, sizeof(v), "%" PRIu64, (ms + 999) / 1000);
	return rados_conf_set(c, key, v);
}

int tier_rados_connect(const struct tier_rados_opts *o, struct tier_rados **out,
		       char *err, size_t errlen)
{
	struct tier_rados *r = NULL;
	const char *id = o && o->client_name && *o->client_name ? o->client_name : "client.admin";
	char mon[512] = "(unknown)";
	uint64_t timeout_ms = o && o->op_timeout_ms ? o->op_timeout_ms : 0;
	int rc;

	*out = NULL;
	if (err && errlen)
		err[0] = '\0';
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	if (strchr(id, '.'))
		snprintf(r->client_name, sizeof(r->client_name), "%s", id);
	else
		snprintf(r->client_name, sizeof(r->client_name), "client.%s", id);
	rc = rados_create2(&r->cluster, "ceph", r->client_name, 0);
	if (rc < 0) {
		r->cluster = NULL;
		snprintf(err, errlen, "rados_create2(%s): %s", r->client_name, strerror(-rc));
		goto out;
	}
	/* the library never prints: errors come back through err */
	rados_conf_set(r->cluster, "log_to_stderr", "false");
	rados_conf_set(r->cluster, "err_to_stderr", "false");
	rc = rados_conf_read_file(r->cluster, o ? o->conf : NULL);
	if (rc < 0) {
		snprintf(err, errlen, "cannot read Ceph config %s: %s",
			 o && o->conf ? o->conf : "(default search path, $CEPH_CONF)",
			 strerror(-rc));
		goto out;
	}
	rados_conf_parse_env(r->cluster, NULL);
	if (o && o->keyring && *o->keyring) {
		rc = rados_conf_set(r->cluster, "keyring", o->keyring);
		if (rc < 0) {
			snprintf(err, errlen, "bad keyring path %s: %s", o->keyring, strerror(-rc));
			goto out;
		}
	}
	if (timeout_ms) {
		conf_set_secs(r->cluster, "rados_osd_op_timeout", timeout_ms);
		conf_set_secs(r->cluster, "rados_mon_op_timeout", timeout_ms);
		conf_set_secs(r->cluster, "client_mount_timeout", timeout_ms);
	} else {
		/* never hang for librados's default 300 s at start-up */
		rados_conf_set(r->cluster, "client_mount_timeout", "30");
	}
	rados_conf_get(r->cluster, "mon_host", mon, sizeof(mon));
	rc = rados_connect(r->cluster);
	if (rc < 0) {
		char kr[512] = "";

		rados_conf_get(r->cluster, "keyring", kr, sizeof(kr));
		snprintf(err, errlen,
			 "cannot connect to Ceph monitors %s as %s: %s (keyring %s)",
			 mon[0] ? mon : "(none configured)", r->client_name,
			 strerror(-rc), kr[0] ? kr : "(none)");
		goto out;
	}
	*out = r;
	r = NULL;
out:
	if (r) {
		if (r->cluster)
			rados_shutdown(r->cluster);
		free(r);
	}
	return rc < 0 ? rc : 0;
}

void tier_rados_disconnect(struct tier_rados *r)
{
	if (!r)
		return;
	rados_shutdown(r->cluster);
	free(r);
}
