/* SPDX-License-Identifier: MIT */
/*
 * libtier/store/local_io.c - what one op of the local backend does to the
 * pool directory: one file per object (name percent-encoded), metadata and
 * version in the `user.tier.meta` xattr or, where the filesystem refuses user
 * xattrs or the record is too big for one, in a hidden sidecar file replaced
 * atomically.  It decides the order of an op's durable steps (pre_meta, data,
 * meta) so that a crash never leaves new data under old metadata, and holds
 * the object's stripe lock from guard check to last step.  It must never let
 * two ops on one object interleave their guard and their effect, and never
 * write anything once the crash simulation has tripped.
 */
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "tier/meta.h"
#include "tier/store.h"
#include "store_internal.h"
#include "local.h"

#define META_XATTR         "user.tier.meta"
/*
 * The record in the xattr or sidecar, little-endian:
 *   0 magic u32 "TIER"   4 format u16 (1)   6 header length u16 (28)
 *   8 version u64        16 mtime_ns u64 (CLOCK_REALTIME of the write)
 *   24 meta_len u32      28 meta bytes
 * Format 2, a record with pending ranges (below), adds after byte 28:
 *   28 nonce u64 (the store session that wrote it)
 *   36 fallback version u64   44 fallback meta_len u32 (~0: no fallback)
 *   48 npend u16   50 reserved u16 (0)   52 meta bytes, fallback meta
 *   bytes, then npend x { off u64, len u32, crc32c u32 }
 *
 * Pending ranges.  F_ORDERED asks that a meta never be durable before the
 * data it vouches for.  Syncing the data first costs an fdatasync per
 * write that adds an extent; instead the record lists the ranges such
 * writes put there since the object's data was last synced, each with the
 * CRC-32C of its bytes, and the meta from before the first of them (the
 * fallback, whose data was durable).  A store session that finds a record
 * written by another session (after a kill -9 or a power cut) checks the
 * ranges against the file: all match, the meta stands; any differs (a cut
 * lost some of that data), the fallback stands, or the object goes if
 * there was none.  Either way the record is rewritten without ranges and
 * made durable before anything else reads it (the create's syncfs already
 * made whatever the file holds durable).  To keep the check sound:
 *  - a synced record never lists ranges (a pre_meta or FUA write with
 *    ranges pending syncs the data and drops them first), so any record a
 *    cut brings back falls back no further than the object's last sync;
 *  - a write over a pending range syncs the data first and stores the
 *    record without the list before its own data (settle), so a listed
 *    range changes only under its own CRC;
 *  - a sync of the data drops the list; a FUA READ (the sync barrier)
 *    with ranges makes the rewritten record durable too, or a later
 *    overwrite could tear a range a durable record still lists;
 *  - at most PEND_MAX ranges, each at most PEND_LEN_MAX bytes, and the
 *    record within PEND_REC_MAX bytes (one xattr block): beyond that, the
 *    write syncs its data as before.
 * Valid bits only grow while an object's copy exists (the engine's rule),
 * so the fallback claims nothing the newer meta disowned.  The one record
 * that shrinks them, a partial eviction's (evict_ext.c), is a FUA SETMETA:
 * with ranges listed, do_setmeta syncs the data and drops the list first,
 * so no fallback from before it is left.  Keep that if either changes.
 */
#define META_MAGIC         0x52454954u
#define META_FORMAT        1u
#define META_FORMAT_PEND   2u
#define META_HDR           28u
#define META_HDR2          52u
#define PEND_MAX           32u
#define PEND_LEN_MAX       (256u << 10)
#define PEND_ENTRY         16u
#define PEND_REC_MAX       3072u
#define PEND_NO_FB         0xffffffffu
#define META_REC_MAX       (META_HDR2 + 2 * TIER_META_MAX + PEND_MAX * PEND_ENTRY)
#define META_REC_SMALL     1024u
/* encoded name + ".meta" behind a leading '.' must fit NAME_MAX */
#define ENC_MAX            (NAME_MAX - 6)

_Static_assert(META_HDR == 4 + 2 + 2 + 8 + 8 + 4, "tier.meta record header layout");

struct pend {
	uint64_t off;
	uint32_t len, crc;
};

struct meta_rec {
	bool present;
	uint64_t version, mtime_ns;
	uint32_t len;
	uint8_t buf[TIER_META_MAX];
	/* pending ranges (format 2); npend 0 otherwise */
	uint64_t nonce;
	bool fb_present;
	uint64_t fb_version;
	uint32_t fb_len;
	uint16_t npend;
	struct pend pend[PEND_MAX];
	uint8_t fb[TIER_META_MAX];
};

/* One op on one object, run by a worker under the object's stripe lock. */
struct opctx {
	struct local_be *L;
	struct tier_store_op *op;
	char enc[ENC_MAX + 1];
	int fd;                     /* -1: object absent */
	bool direct, created, meta_read;
	bool unlinked;              /* a REMOVE unlinked the file */
	bool nowait;                /* on the owner's thread: never block on the disk */
	bool would_block;           /* nowait and the data was not at hand */
	/*
	 * The stored record is an xattr without pending ranges, as this store
	 * last wrote or read it (kept with the cached descriptor): a write that
	 * neither syncs nor orders need not read it first, as it would only
	 * find that there is nothing to settle and no fallback to keep.
	 */
	bool rec_plain;
	/* the cached descriptor's deferred record (NULL: not cached; see "Deferred records") */
	struct tier__fdc_rec *drec;
	struct meta_rec m;
};

/* ---- little helpers ---- */

static void put_le(uint8_t *p, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le(const uint8_t *p, int n)
{
	uint64_t v = 0;

	for (int i = 0; i < n; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

static int neg_errno(void)
{
	return errno ? -errno : -EIO;
}

static int sync_fd(struct local_be *L, int fd, bool data_only)
{
	int rc = data_only ? fdatasync(fd) : fsync(fd);

	atomic_fetch_add(&L->syncs, 1);

	return rc < 0 ? neg_errno() : 0;
}

/* A create, unlink or rename in the pool directory has happened. */
static void ns_changed(struct local_be *L)
{
	atomic_fetch_add(&L->ns_gen, 1);
}

/*
 * Make every name change that happened before this call durable: one
 * directory fsync, skipped when an earlier one already covered them all.
 */
static int sync_names(struct local_be *L)
{
	uint_fast64_t g = atomic_load(&L->ns_gen), s = atomic_load(&L->ns_synced);
	int rc;

	if (s >= g)
		return 0;
	rc = sync_fd(L, L->dirfd, false);
	if (rc < 0)
		return rc;
	while (s < g && !atomic_compare_exchange_weak(&L->ns_synced, &s, g))
		;
	return 0;
}

static ssize_t read_full(int fd, void *buf, size_t len, off_t off, bool direct)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = pread(fd, (char *)buf + done, len - done, off + (off_t)done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return neg_errno();
		if (n == 0)
			break;
		done += (size_t)n;
		/* O_DIRECT returns short only at EOF; the next offset may be unaligned */
		if (direct && (size_t)n % LOCAL_ALIGN)
			break;
	}
	return (ssize_t)done;
}

static int write_full(int fd, const void *buf, size_t len, off_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = pwrite(fd, (const char *)buf + done, len - done, off + (off_t)done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return neg_errno();
		done += (size_t)n;
	}
	return 0;
}

/* ---- object names: percent-encoding, so any oid is one safe file name ---- */

static bool raw_ok(unsigned char c, size_t pos)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || c == '-' || c == '_' || (c == '.' && pos > 0);
}

static int enc_name(const char *oid, char *out, size_t cap)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n = 0;

	for (size_t i = 0; oid[i]; i++) {
		unsigned char c = (unsigned char)oid[i];

		if (raw_ok(c, i)) {
			if (n + 1 >= cap)
				return -ENAMETOOLONG;
			out[n++] = (char)c;
		} else {
			if (n + 3 >= cap)
				return -ENAMETOOLONG;
			out[n++] = '%';
			out[n++] = hex[c >> 4];
			out[n++] = hex[c & 15];
		}
	}
	out[n] = '\0';
	return 0;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Only canonical encodings decode, so two files never name one object. */
static int dec_name(const char *name, char *out, size_t cap)
{
	size_t n = 0;

	if (name[0] == '\0' || name[0] == '.')
		return -EINVAL;
	for (size_t i = 0; name[i]; i++) {
		unsigned char c = (unsigned char)name[i];

		if (c == '%') {
			int h = hexval(name[i + 1]);
			int l = h < 0 ? -1 : hexval(name[i + 2]);

			if (l < 0)
				return -EINVAL;
			c = (unsigned char)(h << 4 | l);
			if (c == 0 || raw_ok(c, n))
				return -EINVAL;
			i += 2;
		} else if (!raw_ok(c, n)) {
			return -EINVAL;
		}
		if (n + 1 >= cap)
			return -EINVAL;
		out[n++] = (char)c;
	}
	out[n] = '\0';
	return 0;
}

static void side_name(const char *enc, char *out)
{
	snprintf(out, NAME_MAX + 1, ".%s.meta", enc);
}

static void tmp_name(const char *enc, char *out)
{
	snprintf(out, NAME_MAX + 1, ".%s.tmp", enc);
}

/* ---- crash simulation ---- */

/* Before each durable step: 0 to go ahead, -EIO once the budget is spent. */
static int step(struct local_be *L)
{
	int rc = 0;

	if (atomic_load(&L->dead))
		return -EIO;
	if (!L->crash_after)
		return 0;
	pthread_mutex_lock(&L->crash_lock);
	if (L->steps >= L->crash_after) {
		atomic_store(&L->dead, true);
		rc = -EIO;
	} else if (++L->steps == L->crash_after) {
		/* this step still happens; nothing after it does */
		atomic_store(&L->dead, true);
	}
	pthread_mutex_unlock(&L->crash_lock);
	return rc;
}

/* ---- metadata record: xattr first, sidecar as fallback ---- */

static int meta_parse(const uint8_t *rec, size_t n, struct meta_rec *m)
{
	uint32_t hdr, len, fmt, fbl = 0, np = 0;
	size_t need;

	if (n < META_HDR || get_le(rec, 4) != META_MAGIC)
		return -EIO;
	fmt = (uint32_t)get_le(rec + 4, 2);
	hdr = (uint32_t)get_le(rec + 6, 2);
	len = (uint32_t)get_le(rec + 24, 4);
	if ((fmt != META_FORMAT && fmt != META_FORMAT_PEND) || len > TIER_META_MAX)
		return -EIO;
	if (fmt == META_FORMAT_PEND) {
		if (hdr < META_HDR2 || n < META_HDR2)
			return -EIO;
		fbl = (uint32_t)get_le(rec + 44, 4);
		np = (uint32_t)get_le(rec + 48, 2);
		if ((fbl != PEND_NO_FB && fbl > TIER_META_MAX) || np == 0 || np > PEND_MAX)
			return -EIO;
		need = (size_t)hdr + len + (fbl == PEND_NO_FB ? 0 : fbl) + (size_t)np * PEND_ENTRY;
	} else {
		if (hdr < META_HDR)
			return -EIO;
		need = (size_t)hdr + len;
	}
	if (need != n)
		return -EIO;
	m->present = true;
	m->version = get_le(rec + 8, 8);
	m->mtime_ns = get_le(rec + 16, 8);
	m->len = len;
	memcpy(m->buf, rec + hdr, len);
	m->npend = (uint16_t)np;
	m->fb_present = false;
	if (fmt == META_FORMAT_PEND) {
		const uint8_t *p = rec + hdr + len;

		m->nonce = get_le(rec + 28, 8);
		m->fb_present = fbl != PEND_NO_FB;
		m->fb_version = get_le(rec + 36, 8);
		m->fb_len = m->fb_present ? fbl : 0;
		memcpy(m->fb, p, m->fb_len);
		p += m->fb_len;
		for (uint32_t i = 0; i < np; i++, p += PEND_ENTRY) {
			m->pend[i].off = get_le(p, 8);
			m->pend[i].len = (uint32_t)get_le(p + 8, 4);
			m->pend[i].crc = (uint32_t)get_le(p + 12, 4);
			if (!m->pend[i].len || m->pend[i].len > PEND_LEN_MAX)
				return -EIO;
		}
	}
	return 0;
}

/* The record for meta (version, len bytes) with m's pending ranges, if any. */
static size_t meta_encode(uint8_t *rec, const struct meta_rec *m, uint64_t nonce,
			  uint64_t version, uint64_t mtime_ns, const void *meta, uint32_t len)
{
	bool pend = m->npend > 0;
	uint32_t hdr = pend ? META_HDR2 : META_HDR;
	uint8_t *p;

	put_le(rec, META_MAGIC, 4);
	put_le(rec + 4, pend ? META_FORMAT_PEND : META_FORMAT, 2);
	put_le(rec + 6, hdr, 2);
	put_le(rec + 8, version, 8);
	put_le(rec + 16, mtime_ns ? mtime_ns : tier__realtime_ns(), 8);
	put_le(rec + 24, len, 4);
	if (!pend) {
		if (len)
			memcpy(rec + META_HDR, meta, len);
		return META_HDR + len;
	}
	put_le(rec + 28, nonce, 8);
	put_le(rec + 36, m->fb_present ? m->fb_version : 0, 8);
	put_le(rec + 44, m->fb_present ? m->fb_len : PEND_NO_FB, 4);
	put_le(rec + 48, m->npend, 2);
	put_le(rec + 50, 0, 2);
	p = rec + META_HDR2;
	if (len)
		memmove(p, meta, len);
	p += len;
	if (m->fb_present && m->fb_len) {
		memcpy(p, m->fb, m->fb_len);
		p += m->fb_len;
	}
	for (unsigned i = 0; i < m->npend; i++, p += PEND_ENTRY) {
		put_le(p, m->pend[i].off, 8);
		put_le(p + 8, m->pend[i].len, 4);
		put_le(p + 12, m->pend[i].crc, 4);
	}
	return (size_t)(p - rec);
}

/* Bytes of the record with one more pending range and a meta of len bytes. */
static size_t pend_rec_size(const struct meta_rec *m, uint32_t len)
{
	uint32_t fb = m->npend ? (m->fb_present ? m->fb_len : 0) : (m->present ? m->len : 0);

	return META_HDR2 + len + fb + (size_t)(m->npend + 1) * PEND_ENTRY;
}

static bool pend_overlap(const struct meta_rec *m, uint64_t off, uint64_t len)
{
	for (unsigned i = 0; i < m->npend; i++)
		if (off < m->pend[i].off + m->pend[i].len && m->pend[i].off < off + len)
			return true;
	return false;
}

/* The data is durable (synced): nothing is pending any more. */
static void pend_clear(struct meta_rec *m)
{
	m->npend = 0;
	m->fb_present = false;
	m->fb_len = 0;
}

/* A range was written under m's current meta: list it, first saving that meta as the fallback. */
static void pend_add(struct meta_rec *m, uint64_t off, uint32_t len, uint32_t crc)
{
	if (m->npend == 0) {
		m->fb_present = m->present;
		m->fb_version = m->version;
		m->fb_len = m->present ? m->len : 0;
		memcpy(m->fb, m->buf, m->fb_len);
	}
	m->pend[m->npend].off = off;
	m->pend[m->npend].len = len;
	m->pend[m->npend].crc = crc;
	m->npend++;
}

static uint32_t crc_zeros(uint64_t len)
{
	static const uint8_t zeros[4096];
	uint32_t crc = 0;

	for (; len; len -= len < sizeof(zeros) ? len : sizeof(zeros))
		crc = tier_crc32c(crc, zeros, len < sizeof(zeros) ? len : sizeof(zeros));
	return crc;
}

static bool xattr_unsupported(int err)
{
	return err == ENOTSUP || err == EOPNOTSUPP;
}

/*
 * Readers prefer the xattr, so a stale sidecar next to an xattr is harmless;
 * a sidecar alone is the record.  Objects are created only after their old
 * sidecar is unlinked (obj_create), so a sidecar never outlives its object
 * into a new one.
 */
static int meta_load(struct opctx *c)
{
	struct local_be *L = c->L;
	uint8_t rec[META_REC_MAX];
	char side[NAME_MAX + 1];
	ssize_t n;
	int sfd;

	memset(&c->m, 0, offsetof(struct meta_rec, buf));
	c->m.npend = 0;
	c->m.fb_present = false;
	c->m.fb_len = 0;
	c->meta_read = true;
	c->rec_plain = false;
	if (!atomic_load(&L->sidecar_only)) {
		/*
		 * The kernel allocates the size asked for: try what a record
		 * without many pending ranges takes before the largest one.
		 */
		n = fgetxattr(c->fd, META_XATTR, rec, META_REC_SMALL);
		if (n < 0 && errno == ERANGE)
			n = fgetxattr(c->fd, META_XATTR, rec, sizeof(rec));
		if (n >= 0) {
			int rc = meta_parse(rec, (size_t)n, &c->m);

			c->rec_plain = rc == 0 && !c->m.npend;
			return rc;
		}
		if (xattr_unsupported(errno))
			atomic_store(&L->sidecar_only, true);
		else if (errno == ERANGE)
			return -EIO;
		else if (errno != ENODATA)
			return neg_errno();
	}
	side_name(c->enc, side);
	sfd = openat(L->dirfd, side, O_RDONLY | O_CLOEXEC);
	if (sfd < 0)
		return errno == ENOENT ? 0 : neg_errno();
	n = read_full(sfd, rec, sizeof(rec), 0, false);
	close(sfd);
	if (n < 0)
		return (int)n;
	return meta_parse(rec, (size_t)n, &c->m);
}

/* write tmp + fsync + rename: a reader sees the old record or the new one */
static int sidecar_write(struct opctx *c, const uint8_t *rec, size_t n, bool durable)
{
	struct local_be *L = c->L;
	char tmp[NAME_MAX + 1], side[NAME_MAX + 1];
	int tfd, rc;

	tmp_name(c->enc, tmp);
	side_name(c->enc, side);
	tfd = openat(L->dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (tfd < 0)
		return neg_errno();
	rc = write_full(tfd, rec, n, 0);
	if (rc == 0)
		rc = sync_fd(L, tfd, false);
	close(tfd);
	if (rc == 0 && renameat(L->dirfd, tmp, L->dirfd, side) < 0)
		rc = neg_errno();
	ns_changed(L);   /* the temp name, and the rename if it happened */
	if (rc < 0) {
		unlinkat(L->dirfd, tmp, 0);
		return rc;
	}
	return durable ? sync_names(L) : 0;
}

/* After a successful put, c->m describes the record now stored. */
static void meta_note(struct opctx *c, uint64_t version, uint64_t mtime_ns, const void *meta,
		      uint32_t len)
{
	c->m.present = true;
	c->m.version = version;
	c->m.mtime_ns = mtime_ns;
	if (meta != c->m.buf && len)
		memcpy(c->m.buf, meta, len);
	c->m.len = len;
	c->meta_read = true;
}

/*
 * Store meta as the object's record, with c->m's pending ranges (none:
 * a format 1 record).  mtime_ns 0 means now.  durable: fsync it.
 */
static int meta_put(struct opctx *c, uint64_t version, const void *meta, uint32_t len,
		    bool durable, uint64_t mtime_ns)
{
	struct local_be *L = c->L;
	uint8_t rec[META_REC_MAX];
	size_t n;
	bool spill = false;
	int rc;

	assert(!(durable && c->m.npend));   /* a synced record never lists ranges */
	if (!mtime_ns)
		mtime_ns = tier__realtime_ns();
	n = meta_encode(rec, &c->m, L->nonce, version, mtime_ns, meta, len);
	c->meta_read = false;
	c->rec_plain = false;
	if (!atomic_load(&L->sidecar_only)) {
		if (fsetxattr(c->fd, META_XATTR, rec, n, 0) == 0) {
			c->rec_plain = !c->m.npend;
			if (c->drec)
				tier__fdc_rec_clear(L->fdc, c->drec);   /* superseded */
			meta_note(c, version, mtime_ns, meta, len);
			return durable ? sync_fd(c->L, c->fd, false) : 0;
		}
		if (xattr_unsupported(errno))
			atomic_store(&L->sidecar_only, true);
		else if (errno == E2BIG || errno == ENOSPC || errno == ERANGE)
			spill = true;   /* record too big for this fs's xattrs */
		else
			return neg_errno();
	}
	rc = sidecar_write(c, rec, n, durable);
	if (rc < 0)
		return rc;
	/* the sidecar is the record now: a deferred xattr stored later would hide it */
	if (c->drec)
		tier__fdc_rec_clear(L->fdc, c->drec);
	if (!spill) {
		meta_note(c, version, mtime_ns, meta, len);
		return 0;
	}
	/* the sidecar is durable; now retire the xattr readers would prefer */
	if (fremovexattr(c->fd, META_XATTR) < 0 && errno != ENODATA)
		return neg_errno();
	meta_note(c, version, mtime_ns, meta, len);
	return durable ? sync_fd(c->L, c->fd, false) : 0;
}

/* Do the pending ranges of c->m hold the bytes their CRCs name? */
static int pend_verify(struct opctx *c, bool *ok)
{
	uint8_t *buf = malloc(PEND_LEN_MAX);
	int fd, rc = 0;

	*ok = true;
	if (!buf)
		return -ENOMEM;
	fd = openat(c->L->dirfd, c->enc, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		free(buf);
		return neg_errno();
	}
	for (unsigned i = 0; i < c->m.npend && *ok; i++) {
		const struct pend *r = &c->m.pend[i];
		ssize_t n = read_full(fd, buf, r->len, (off_t)r->off, false);

		if (n < 0) {
			rc = (int)n;
			break;
		}
		memset(buf + n, 0, r->len - (size_t)n);   /* past the end reads as zeros */
		*ok = tier_crc32c(0, buf, r->len) == r->crc;
	}
	close(fd);
	free(buf);
	return rc;
}

/*
 * A record with pending ranges from another store session: settle it
 * (see "Pending ranges" at the top).  The create's syncfs made the file's
 * bytes durable, so a verified meta can be stored without ranges at once.
 */
static int settle_foreign(struct opctx *c)
{
	struct local_be *L = c->L;
	char side[NAME_MAX + 1];
	bool ok;
	int rc = pend_verify(c, &ok);

	if (rc < 0)
		return rc;
	if (ok) {
		atomic_fetch_add(&L->pend_kept, 1);
	} else {
		atomic_fetch_add(&L->pend_dropped, 1);
		if (!c->m.fb_present) {
			/* nothing of this copy was ever durable: base has the object */
			if ((rc = step(L)) < 0)
				return rc;
			if (unlinkat(L->dirfd, c->enc, 0) < 0)
				return neg_errno();
			side_name(c->enc, side);
			rc = unlinkat(L->dirfd, side, 0) < 0 && errno != ENOENT ? neg_errno() : 0;
			ns_changed(L);
			if (rc == 0)
				rc = sync_names(L);
			tier__fdc_forget(L->fdc, c->enc, c->fd);   /* unlinked: drop every cached descriptor */
			c->fd = -1;
			c->drec = NULL;   /* it lived in the entry just freed */
			memset(&c->m, 0, offsetof(struct meta_rec, buf));
			pend_clear(&c->m);
			return rc;
		}
		c->m.version = c->m.fb_version;
		c->m.len = c->m.fb_len;
		memcpy(c->m.buf, c->m.fb, c->m.fb_len);
	}
	pend_clear(&c->m);
	if ((rc = step(L)) < 0)
		return rc;
	return meta_put(c, c->m.version, c->m.buf, c->m.len, true, c->m.mtime_ns);
}

/* The object's record, settled if another session left ranges pending. */
static int meta_get(struct opctx *c)
{
	int rc = meta_load(c);

	if (rc < 0 || !c->m.npend || c->m.nonce == c->L->nonce)
		return rc;
	return settle_foreign(c);
}

/*
 * Deferred records.  A write with F_LAZY_META (the engine's overwrite of
 * extents the record already calls valid and dirty: only the version and
 * mtime change) whose object has a cached descriptor and a stored record
 * without pending ranges (rec_plain) leaves its record in memory with the
 * descriptor (local_fd.c) instead of an fsetxattr.  What keeps that sound:
 *  - every op that reads or relies on the stored record stores the
 *    deferred one first (rec_flush_for: guards, STAT, SETMETA, REMOVE, FUA
 *    and F_ORDERED ops, pre_meta), so each sees exactly the record it
 *    would have seen; SCAN does the same by name; a plain READ and a data
 *    write without meta do not touch the record, and a write that stores
 *    its own record supersedes the deferred one (meta_put);
 *  - the descriptor cache stores it before it closes the descriptor
 *    (eviction, destroy), and keeps an entry whose record it cannot store;
 *  - what a kill -9 can leave instead is the record before the deferred
 *    writes: the same valid and dirty extents and dirty flag (the engine's
 *    claim), an older version and mtime.  A rebuild adopts any version;
 *    the data is in the page cache.  A power cut could already revert the
 *    xattr to any value since its last sync, and a sync barrier stores
 *    the deferred record before its fsync.
 */
static bool rec_flush_for(const struct tier_store_op *op)
{
	uint32_t f = op->flags;

	if (op->opcode == TIER_STORE_READ)
		return f & TIER_STORE_F_FUA;
	if (op->opcode == TIER_STORE_WRITE || op->opcode == TIER_STORE_ZERO)
		return (f & (TIER_STORE_F_FUA | TIER_STORE_F_ORDERED | TIER_STORE_F_GUARD |
			     TIER_STORE_F_EXCL)) || op->pre_meta;
	return true;   /* SETMETA, REMOVE, STAT */
}

/* Store the descriptor's deferred record, if any (a durable step of its own). */
static int rec_flush(struct opctx *c)
{
	int rc;

	if (!c->drec || !c->drec->len)
		return 0;
	if ((rc = step(c->L)) < 0)
		return rc;
	if (fsetxattr(c->fd, META_XATTR, c->drec->buf, c->drec->len, 0) < 0)
		return neg_errno();
	tier__fdc_rec_clear(c->L->fdc, c->drec);
	atomic_fetch_add(&c->L->meta_stored_late, 1);
	return 0;
}

int tier__local_rec_writeback(void *arg, int fd, const uint8_t *rec, uint32_t len)
{
	struct local_be *L = arg;
	int rc;

	/* crash simulation: a dead process stores nothing (what a kill -9 leaves) */
	if ((rc = step(L)) < 0)
		return atomic_load(&L->dead) ? 0 : rc;
	if (fsetxattr(fd, META_XATTR, rec, len, 0) < 0)
		return neg_errno();
	atomic_fetch_add(&L->meta_stored_late, 1);
	return 0;
}

/*
 * A lazy write's record, left with the descriptor: a format 1 record (no
 * ranges are pending: rec_plain) of the op's version and meta, now's mtime.
 */
static int rec_defer(struct opctx *c)
{
	const struct tier_store_op *op = c->op;
	struct tier__fdc_rec *d = c->drec;
	uint32_t n = META_HDR + op->meta_len;
	int rc;

	assert(!c->m.npend);
	if ((rc = tier__fdc_rec_reserve(d, n)) < 0)
		return rc;
	meta_encode(d->buf, &c->m, c->L->nonce, op->version, tier__realtime_ns(), op->meta,
		    op->meta_len);
	tier__fdc_rec_set(c->L->fdc, d, n);
	atomic_fetch_add(&c->L->meta_deferred, 1);
	return 0;
}

/* ---- object files ---- */

static int open_flags(struct local_be *L, bool direct)
{
	int fl = O_RDWR | O_CLOEXEC;

	if (direct && atomic_load(&L->direct_ok))
		fl |= O_DIRECT;
	return fl;
}

static int obj_openat(struct opctx *c, int extra, mode_t mode)
{
	struct local_be *L = c->L;
	int fl = open_flags(L, c->direct) | extra;
	int fd;

	for (;;) {
		fd = openat(L->dirfd, c->enc, fl, mode);
		if (fd < 0 && errno == EINVAL && (fl & O_DIRECT)) {
			/* tmpfs and friends: fall back to buffered for good */
			atomic_store(&L->direct_ok, false);
			fl &= ~O_DIRECT;
			continue;
		}
		/* out of descriptors: give back an idle cached one and retry */
		if (fd < 0 && (errno == EMFILE || errno == ENFILE) && tier__fdc_shrink(L->fdc))
			continue;
		break;
	}
	return fd < 0 ? neg_errno() : fd;
}

/*
 * rec_plain is kept with the descriptor only while one descriptor per file
 * is cached (direct_io caches a second, O_DIRECT one) and records are xattrs.
 */
static bool rec_tag_ok(struct local_be *L)
{
	return !L->direct_io && !atomic_load(&L->sidecar_only);
}

/* The object's descriptor: cached, or opened (c->fd = -1 when absent). */
static int obj_open(struct opctx *c)
{
	uint8_t tag;
	int fd = tier__fdc_get_rec(c->L->fdc, c->enc, c->direct, &tag, &c->drec);

	c->rec_plain = tag && rec_tag_ok(c->L);
	if (fd < 0)
		fd = obj_openat(c, 0, 0);
	if (fd == -ENOENT)
		return 0;
	if (fd < 0)
		return fd;
	c->fd = fd;
	return 0;
}

/* The op is over: keep the descriptor for the next op, unless it was unlinked. */
static void obj_release(struct opctx *c)
{
	/*
	 * A REMOVE forgets the descriptors once it unlinked the file; one that
	 * failed before (its record could not be stored, a guard, a crash
	 * step) puts the descriptor back with the deferred record it may
	 * still hold: forgetting it would drop that record and leave the
	 * file with an older version, which every later guard refuses.
	 */
	if (c->op->opcode == TIER_STORE_REMOVE && (c->unlinked || c->fd < 0))
		tier__fdc_forget(c->L->fdc, c->enc, c->fd);
	else if (c->fd >= 0)
		tier__fdc_put_tag(c->L->fdc, c->enc, c->direct, c->fd,
				  c->rec_plain && rec_tag_ok(c->L));
	c->fd = -1;
}

static int obj_create(struct opctx *c)
{
	char side[NAME_MAX + 1];
	int fd;

	if (c->fd >= 0)
		return 0;
	/* a sidecar left by a removed object must not become this one's meta */
	side_name(c->enc, side);
	if (unlinkat(c->L->dirfd, side, 0) == 0)
		ns_changed(c->L);
	else if (errno != ENOENT)
		return neg_errno();
	fd = obj_openat(c, O_CREAT | O_EXCL, 0600);
	if (fd < 0)
		return fd;
	ns_changed(c->L);
	c->fd = fd;
	c->created = true;
	return 0;
}

/* ---- the ops ---- */

static int guard(struct opctx *c)
{
	const struct tier_store_op *op = c->op;
	int rc;

	if (op->flags & TIER_STORE_F_EXCL)
		return c->fd >= 0 ? -EEXIST : 0;
	if (!(op->flags & TIER_STORE_F_GUARD))
		return 0;
	if (c->fd < 0)
		return -ECANCELED;
	rc = meta_get(c);
	if (rc < 0)
		return rc;
	return c->m.version == op->expect_version ? 0 : -ECANCELED;
}

/*
 * A read on the owner's thread: from the page cache only (RWF_NOWAIT), or
 * plainly where the pool is in memory (tmpfs refuses RWF_NOWAIT).  Anything
 * short of the whole range sets would_block: a worker runs the op instead.
 */
static ssize_t read_nowait(struct opctx *c, void *buf, size_t len, off_t off)
{
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	ssize_t n;

	if (c->L->mem_fs)
		return read_full(c->fd, buf, len, off, false);
	n = preadv2(c->fd, &iov, 1, off, RWF_NOWAIT);
	if (n < 0 && errno == EINTR)
		n = 0;
	if (n < 0 && errno != EAGAIN && errno != EOPNOTSUPP)
		return neg_errno();
	if (n < 0 || (size_t)n < len) {
		c->would_block = true;
		return -EAGAIN;
	}
	return n;
}

static int do_read(struct opctx *c)
{
	struct tier_store_op *op = c->op;
	bool fua = op->flags & TIER_STORE_F_FUA;
	ssize_t n;
	int rc;

	/* a barrier must know whether ranges are pending (meta_get may also settle a foreign record) */
	if (fua && c->fd >= 0 && !c->meta_read && (rc = meta_get(c)) < 0)
		return rc;
	if (c->fd < 0)
		return -ENOENT;
	if (c->nowait)
		n = read_nowait(c, op->buf, op->len, (off_t)op->off);
	else
		n = read_full(c->fd, op->buf, op->len, (off_t)op->off, c->direct);
	if (n < 0)
		return (int)n;
	memset((char *)op->buf + n, 0, op->len - (size_t)n);
	/*
	 * READ with F_FUA is the engine's barrier for earlier unsynced writes:
	 * fsync (the xattr too), then the names (a new file's entry, a sidecar
	 * rename) so that the object is found again after a power cut.
	 */
	if (fua) {
		/*
		 * Pending ranges: data first, then the record without them, and
		 * that record durable (fsync below): a durable record that still
		 * listed them could later be torn under by an overwrite.
		 */
		if (c->m.npend) {
			if ((rc = sync_fd(c->L, c->fd, true)) < 0)
				return rc;
			pend_clear(&c->m);
			if ((rc = step(c->L)) < 0 ||
			    (rc = meta_put(c, c->m.version, c->m.buf, c->m.len, false,
					   c->m.mtime_ns)) < 0)
				return rc;
		}
		rc = sync_fd(c->L, c->fd, false);
		if (rc == 0)
			rc = sync_names(c->L);
		if (rc < 0)
			return rc;
	}
	return (int)op->len;
}

static int zero_range(int fd, uint64_t off, uint64_t len)
{
	static const uint8_t zeros[65536];
	struct stat st;
	uint64_t end = off + len, size;
	int rc;

	if (fstat(fd, &st) < 0)
		return neg_errno();
	size = (uint64_t)st.st_size;
	if (off < size) {
		uint64_t pe = end < size ? end : size;

		if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			      (off_t)off, (off_t)(pe - off)) < 0) {
			if (errno != EOPNOTSUPP && errno != ENOSYS)
				return neg_errno();
			for (uint64_t o = off; o < pe; o += sizeof(zeros)) {
				uint64_t n = pe - o < sizeof(zeros) ? pe - o : sizeof(zeros);

				rc = write_full(fd, zeros, n, (off_t)o);
				if (rc < 0)
					return rc;
			}
		}
	}
	if (end > size && ftruncate(fd, (off_t)end) < 0)
		return neg_errno();
	return 0;
}

/*
 * WRITE and ZERO.  Order: pre_meta (always durable: it is what a power cut
 * must find if the data moved), data (durable before the meta with FUA or
 * F_ORDERED), meta.  A crash between steps leaves the old state, pre_meta
 * with some of the data, or everything: never new data under the old meta,
 * and with F_ORDERED never the new meta without the new data.
 */
static int do_write(struct opctx *c)
{
	struct tier_store_op *op = c->op;
	struct local_be *L = c->L;
	bool fua = op->flags & TIER_STORE_F_FUA, meta = op->flags & TIER_STORE_F_META;
	bool ordered = fua || (meta && (op->flags & TIER_STORE_F_ORDERED));
	bool lazy = false;
	bool plain = c->rec_plain && !op->pre_meta && !ordered;
	int rc;

	/* plain: c->m as zeroed stands for the stored record (rec_plain above) */
	if (meta && !plain && (rc = rec_flush(c)) < 0)
		return rc;
	if (meta && c->fd >= 0 && !c->meta_read && !plain && (rc = meta_get(c)) < 0)
		return rc;
	/*
	 * Settle: a pending range must not change under its CRC.  Data first,
	 * then the record without ranges, before this write's data: a process
	 * that dies after the data would otherwise leave a range that fails
	 * its check and takes acknowledged writes with it.
	 */
	if (meta && pend_overlap(&c->m, op->off, op->len)) {
		if ((rc = sync_fd(c->L, c->fd, true)) < 0)
			return rc;
		pend_clear(&c->m);
		if ((rc = step(L)) < 0 ||
		    (rc = meta_put(c, c->m.version, c->m.buf, c->m.len, false, c->m.mtime_ns)) < 0)
			return rc;
		atomic_fetch_add(&L->pend_settles, 1);
	}
	/*
	 * A synced record never lists ranges: the pre_meta is fsynced, and a
	 * fallback older than it could bring back a clean mark over bytes it
	 * has since let the client change.  So sync the data and drop the list.
	 */
	if (meta && op->pre_meta && c->m.npend) {
		if ((rc = sync_fd(L, c->fd, true)) < 0)
			return rc;
		pend_clear(&c->m);
	}
	/* F_ORDERED without FUA: list the range instead of syncing (see the top) */
	if (ordered && !fua && !L->ordered_sync && !atomic_load(&L->sidecar_only) &&
	    op->len <= PEND_LEN_MAX &&
	    c->m.npend < PEND_MAX && pend_rec_size(&c->m, op->meta_len) <= PEND_REC_MAX)
		lazy = true, ordered = false;
	if (meta && op->pre_meta) {
		if ((rc = step(L)) < 0 || (rc = obj_create(c)) < 0)
			return rc;
		rc = meta_put(c, op->version, op->pre_meta, op->pre_meta_len, true, 0);
		if (rc < 0 || (fua && (rc = sync_names(L)) < 0))
			return rc;
	}
	if ((rc = step(L)) < 0 || (rc = obj_create(c)) < 0)
		return rc;
	if (op->opcode == TIER_STORE_WRITE)
		rc = write_full(c->fd, op->buf, op->len, (off_t)op->off);
	else
		rc = zero_range(c->fd, op->off, op->len);
	if (rc == 0 && ordered) {
		rc = sync_fd(c->L, c->fd, true);
		pend_clear(&c->m);
	}
	if (rc < 0)
		return rc;
	if (lazy) {
		pend_add(&c->m, op->off, (uint32_t)op->len,
			 op->opcode == TIER_STORE_WRITE ? tier_crc32c(0, op->buf, op->len)
							: crc_zeros(op->len));
		atomic_fetch_add(&L->pend_writes, 1);
	}
	if (meta && plain && (op->flags & TIER_STORE_F_LAZY_META) && c->drec && !lazy &&
	    !c->m.npend) {
		/* only the version moves: left with the descriptor (see "Deferred records") */
		if ((rc = rec_defer(c)) < 0)
			return rc;
	} else if (meta) {
		if ((rc = step(L)) < 0)
			return rc;
		rc = meta_put(c, op->version, op->meta, op->meta_len, fua, 0);
		if (rc < 0)
			return rc;
	}
	if (fua && (rc = sync_names(c->L)) < 0)
		return rc;
	return op->opcode == TIER_STORE_WRITE ? (int)op->len : 0;
}

static int do_setmeta(struct opctx *c)
{
	struct tier_store_op *op = c->op;
	bool fua = op->flags & TIER_STORE_F_FUA;
	int rc;

	if (c->fd < 0 && !(op->flags & TIER_STORE_F_CREATE))
		return -ENOENT;
	/* the record's pending ranges carry over (meta_get may settle a foreign one) */
	if (c->fd >= 0 && !c->meta_read && (rc = meta_get(c)) < 0)
		return rc;
	if (c->fd < 0 && !(op->flags & TIER_STORE_F_CREATE))
		return -ENOENT;
	if ((rc = step(c->L)) < 0 || (rc = obj_create(c)) < 0)
		return rc;
	/* F_ORDERED: the data this meta vouches for (a flush's "clean") first; FUA: a synced record lists no ranges */
	if ((op->flags & TIER_STORE_F_ORDERED) || (fua && c->m.npend)) {
		if ((rc = sync_fd(c->L, c->fd, true)) < 0)
			return rc;
		pend_clear(&c->m);
	}
	rc = meta_put(c, op->version, op->meta, op->meta_len, fua, 0);
	if (rc == 0 && fua)
		rc = sync_names(c->L);
	return rc;
}

static int do_remove(struct opctx *c)
{
	char side[NAME_MAX + 1];
	int rc;

	if (c->fd < 0) {
		/* a FUA remove is a barrier for earlier name changes, even of nothing */
		if (c->op->flags & TIER_STORE_F_FUA) {
			rc = sync_names(c->L);
			if (rc < 0)
				return rc;
		}
		return -ENOENT;
	}
	if ((rc = step(c->L)) < 0)
		return rc;
	if (unlinkat(c->L->dirfd, c->enc, 0) < 0)
		return neg_errno();
	c->unlinked = true;
	side_name(c->enc, side);
	rc = unlinkat(c->L->dirfd, side, 0) < 0 && errno != ENOENT ? neg_errno() : 0;
	ns_changed(c->L);   /* after both: a barrier that saw it covers both */
	if (rc < 0)
		return rc;
	if (c->op->flags & TIER_STORE_F_FUA)
		return sync_names(c->L);
	return 0;
}

static int do_stat(struct opctx *c)
{
	struct tier_store_op *op = c->op;
	struct stat st;
	uint64_t mt;
	int rc;

	if (c->fd < 0)
		return -ENOENT;
	if (fstat(c->fd, &st) < 0)
		return neg_errno();
	if (!c->meta_read && (rc = meta_get(c)) < 0)
		return rc;
	if (c->fd < 0)
		return -ENOENT;   /* a foreign record's ranges failed and nothing older stood */
	mt = (uint64_t)st.st_mtim.tv_sec * 1000000000ull + (uint64_t)st.st_mtim.tv_nsec;
	op->obj_size = (uint64_t)st.st_size;
	op->obj_version = c->m.version;
	/* SETMETA leaves the file's mtime alone; the record keeps its own */
	op->obj_mtime_ns = c->m.mtime_ns > mt ? c->m.mtime_ns : mt;
	op->meta_len_out = c->m.len;
	if (op->meta_buf && c->m.len) {
		if (c->m.len > op->meta_cap)
			return -ERANGE;
		memcpy(op->meta_buf, c->m.buf, c->m.len);
	}
	return 0;
}

/* A directory stream over the pool's directory, for LIST and SCAN. */
static int open_pool_dir(struct local_be *L, DIR **out)
{
	int dfd = openat(L->dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc;

	if (dfd < 0)
		return neg_errno();
	*out = fdopendir(dfd);
	if (!*out) {
		rc = neg_errno();
		close(dfd);
		return rc;
	}
	return 0;
}

static int do_list(struct local_be *L, struct tier_store_op *op)
{
	size_t plen = strlen(op->prefix), n = 0, cap = 0;
	char **names = NULL, oid[TIER_OID_MAX];
	struct dirent *de;
	DIR *d = NULL;
	int rc = 0;

	rc = open_pool_dir(L, &d);
	if (rc < 0)
		return rc;
	while ((de = readdir(d)) != NULL) {
		/* hidden names are sidecars, temp files and probes */
		if (de->d_name[0] == '.' || (de->d_type != DT_REG && de->d_type != DT_UNKNOWN))
			continue;
		if (dec_name(de->d_name, oid, sizeof(oid)) < 0 ||
		    strncmp(oid, op->prefix, plen) != 0)
			continue;
		if (n == cap) {
			char **nn = realloc(names, (cap ? cap * 2 : 64) * sizeof(*nn));

			if (!nn) {
				rc = -ENOMEM;
				goto out;
			}
			names = nn;
			cap = cap ? cap * 2 : 64;
		}
		names[n] = strdup(oid);
		if (!names[n]) {
			rc = -ENOMEM;
			goto out;
		}
		n++;
	}
	op->names = names;
	op->n_names = n;
	names = NULL;
	rc = (int)n;
out:
	if (names)
		tier_store_list_free(names, n);
	closedir(d);
	return rc;
}

/* A SCAN page being built: entries hold offsets into data until the end. */
struct scan_page {
	struct tier_store_entry *ents;
	size_t n, cap;
	char *data;
	size_t len, dcap;
};

static int page_add(struct scan_page *p, const char *name, const struct meta_rec *m, int result)
{
	size_t nl = strlen(name) + 1, ml = result == 0 ? m->len : 0;
	struct tier_store_entry *e;

	if (p->n == p->cap) {
		size_t nc = p->cap ? 2 * p->cap : 256;
		struct tier_store_entry *ne = realloc(p->ents, nc * sizeof(*ne));

		if (!ne)
			return -ENOMEM;
		p->ents = ne;
		p->cap = nc;
	}
	if (p->len + nl + ml > p->dcap) {
		size_t nc = p->dcap ? 2 * p->dcap : 16384;
		char *nd;

		while (nc < p->len + nl + ml)
			nc *= 2;
		if (!(nd = realloc(p->data, nc)))
			return -ENOMEM;
		p->data = nd;
		p->dcap = nc;
	}
	e = &p->ents[p->n++];
	memset(e, 0, sizeof(*e));
	e->name = (const char *)(uintptr_t)p->len;
	memcpy(p->data + p->len, name, nl);
	p->len += nl;
	e->result = result;
	if (result == 0) {
		e->version = m->version;
		e->meta_len = m->len;
		e->meta = (const void *)(uintptr_t)p->len;
		memcpy(p->data + p->len, m->buf, ml);
		p->len += ml;
	}
	return 0;
}

/* The page as one block: the entries, then their names and metas. */
static int page_finish(struct scan_page *p, struct tier_store_op *op)
{
	size_t eb = p->n * sizeof(*p->ents);
	char *blk = malloc(eb + p->len + 1);

	if (!blk)
		return -ENOMEM;
	if (eb)
		memcpy(blk, p->ents, eb);
	if (p->len)
		memcpy(blk + eb, p->data, p->len);
	op->entries = (struct tier_store_entry *)(void *)blk;
	for (size_t i = 0; i < p->n; i++) {
		struct tier_store_entry *e = &op->entries[i];

		e->name = blk + eb + (uintptr_t)e->name;
		e->meta = e->meta_len ? blk + eb + (uintptr_t)e->meta : NULL;
	}
	op->n_entries = p->n;
	return 0;
}

/*
 * getxattrat(2) (Linux 6.13): the record by name, without opening the file.
 * Older kernels say ENOSYS once and the scan opens each object instead.
 */
#ifndef SYS_getxattrat
#define SYS_getxattrat 464
#endif
struct scan_xattr_args {
	uint64_t value;
	uint32_t size, flags;
};

static ssize_t xattr_by_name(struct local_be *L, const char *enc, void *buf, size_t cap)
{
	struct scan_xattr_args a = { .value = (uint64_t)(uintptr_t)buf, .size = (uint32_t)cap };

	return syscall(SYS_getxattrat, L->dirfd, enc, AT_SYMLINK_NOFOLLOW, META_XATTR, &a,
		       sizeof(a));
}

/*
 * The fast way to what meta_get would read: the xattr by name.  True with
 * c->m filled when that is the whole answer (a record of this session, or
 * one without pending ranges); false leaves it to meta_get on the opened
 * file (no xattr: a sidecar or nothing; a foreign record to settle; any
 * error).  Called under the object's stripe lock, as meta_get is.
 */
static bool scan_fast(struct opctx *c)
{
	struct local_be *L = c->L;
	uint8_t rec[META_REC_SMALL];
	ssize_t n;

	if (atomic_load(&L->sidecar_only) || !atomic_load(&L->scan_xattrat))
		return false;
	n = xattr_by_name(L, c->enc, rec, sizeof(rec));
	if (n < 0) {
		if (errno == ENOSYS || errno == EINVAL)
			atomic_store(&L->scan_xattrat, false);
		return false;
	}
	memset(&c->m, 0, offsetof(struct meta_rec, buf));
	c->m.npend = 0;
	c->m.fb_present = false;
	c->m.fb_len = 0;
	if (meta_parse(rec, (size_t)n, &c->m) < 0)
		return false;
	return !c->m.npend || c->m.nonce == L->nonce;
}

/*
 * One object of a SCAN: exactly what do_stat reads of it (meta_get, so a
 * record another session left with pending ranges is settled here as a
 * STAT would), under its stripe lock.
 */
static struct tier_store_op scan_stat_op = { .opcode = TIER_STORE_STAT };   /* read only */

static int scan_one(struct local_be *L, const char *oid, struct scan_page *p)
{
	pthread_mutex_t *stripe = &L->stripes[tier__hash_str(oid) % LOCAL_STRIPES];
	struct opctx c;
	int rc;

	/* not the whole record buffer (8 KiB): meta_load and scan_fast set what they fill */
	memset(&c, 0, offsetof(struct opctx, m));
	memset(&c.m, 0, offsetof(struct meta_rec, buf));
	c.L = L;
	c.op = &scan_stat_op;   /* obj_release reads its opcode */
	c.fd = -1;
	rc = enc_name(oid, c.enc, sizeof(c.enc));
	if (rc < 0)
		return page_add(p, oid, &c.m, rc);
	pthread_mutex_lock(stripe);
	/* a record a write left with the descriptor is stored first: it is the object's */
	rc = tier__fdc_writeback_name(L->fdc, c.enc);
	if (rc < 0) {
		pthread_mutex_unlock(stripe);
		return page_add(p, oid, &c.m, rc);
	}
	if (scan_fast(&c)) {
		pthread_mutex_unlock(stripe);
		return page_add(p, oid, &c.m, 0);
	}
	rc = obj_open(&c);
	if (rc == 0)
		rc = c.fd < 0 ? -ENOENT : meta_get(&c);
	if (rc == 0 && c.fd < 0)
		rc = -ENOENT;   /* a foreign record's ranges failed and nothing older stood */
	obj_release(&c);
	pthread_mutex_unlock(stripe);
	return page_add(p, oid, &c.m, rc);
}

static int do_scan(struct local_be *L, struct tier_store_op *op)
{
	size_t plen = strlen(op->prefix);
	struct scan_page p = { 0 };
	char oid[TIER_OID_MAX];
	struct dirent *de;
	DIR *d = NULL;
	int rc = 0;

	rc = open_pool_dir(L, &d);
	if (rc < 0)
		return rc;
	/* offsets stay valid across opens here (tier__local_dir_offsets_stable) */
	if (op->cursor)
		seekdir(d, (long)op->cursor);
	op->cursor_out = 0;
	for (;;) {
		errno = 0;
		if (!(de = readdir(d))) {
			rc = errno ? -errno : 0;
			break;
		}
		if (de->d_name[0] == '.' || (de->d_type != DT_REG && de->d_type != DT_UNKNOWN))
			continue;
		/* the shards split the file names (cheaper than decoding them all) */
		if (op->nshards && tier__hash_str(de->d_name) % op->nshards != op->shard)
			continue;
		if (dec_name(de->d_name, oid, sizeof(oid)) < 0 ||
		    strncmp(oid, op->prefix, plen) != 0)
			continue;
		if ((rc = scan_one(L, oid, &p)) < 0)
			break;
		if (p.n == op->len) {
			long pos = telldir(d);

			if (pos <= 0) {
				rc = pos < 0 ? neg_errno() : -EIO;
				break;
			}
			op->cursor_out = (uint64_t)pos;
			break;
		}
	}
	if (rc == 0)
		rc = page_finish(&p, op);
	if (rc < 0)
		op->cursor_out = 0;
	free(p.ents);
	free(p.data);
	closedir(d);
	return rc < 0 ? rc : (int)op->n_entries;
}

static bool aligned(const struct tier_store_op *op)
{
	return (op->off % LOCAL_ALIGN) == 0 && (op->len % LOCAL_ALIGN) == 0 &&
	       ((uintptr_t)op->buf % LOCAL_ALIGN) == 0;
}

bool tier__local_inline_ok(const struct local_be *L, const struct tier_store_op *op)
{
	/*
	 * In memory (tmpfs) a sync never waits for a disk: a write with a
	 * pre_meta (a clean extent made dirty), FUA or F_ORDERED runs here too,
	 * its steps in the same order as on a worker.  On a disk they block.
	 */
	uint32_t syncs = TIER_STORE_F_FUA | TIER_STORE_F_ORDERED;

	if (!L->inline_io || (op->flags & (TIER_STORE_F_GUARD | TIER_STORE_F_EXCL)) ||
	    (!L->mem_fs && (op->pre_meta || (op->flags & syncs))))
		return false;
	/* a write cannot be made non-blocking on a disk: only in memory */
	return op->opcode == TIER_STORE_READ || (op->opcode == TIER_STORE_WRITE && L->mem_fs);
}

int tier__local_run_inline(struct local_be *L, struct tier_store_op *op, bool *ran)
{
	struct opctx c = { .L = L, .op = op, .fd = -1, .nowait = true };
	pthread_mutex_t *stripe;
	uint8_t tag;
	int rc;

	*ran = false;
	if (enc_name(op->oid, c.enc, sizeof(c.enc)) < 0)
		return 0;
	stripe = &L->stripes[tier__hash_str(op->oid) % LOCAL_STRIPES];
	if (pthread_mutex_trylock(stripe) != 0)
		return 0;            /* a worker has an op on this stripe: queue behind */
	c.fd = tier__fdc_get_rec(L->fdc, c.enc, false, &tag, &c.drec);
	c.rec_plain = tag && rec_tag_ok(L);
	if (c.fd < 0) {          /* opening is a directory lookup: a worker's job */
		pthread_mutex_unlock(stripe);
		return 0;
	}
	rc = rec_flush_for(op) ? rec_flush(&c) : 0;
	if (rc == 0)
		rc = op->opcode == TIER_STORE_READ ? do_read(&c) : do_write(&c);
	obj_release(&c);
	pthread_mutex_unlock(stripe);
	*ran = !c.would_block;
	return rc;
}

int tier__local_run(struct local_be *L, struct tier_store_op *op)
{
	struct opctx c = { .L = L, .op = op, .fd = -1 };
	pthread_mutex_t *stripe;
	int rc;

	if (op->opcode == TIER_STORE_LIST)
		return do_list(L, op);
	if (op->opcode == TIER_STORE_SCAN)
		return do_scan(L, op);
	rc = enc_name(op->oid, c.enc, sizeof(c.enc));
	if (rc < 0)
		return rc;
	c.direct = L->direct_io && aligned(op) &&
		   (op->opcode == TIER_STORE_READ || op->opcode == TIER_STORE_WRITE);
	stripe = &L->stripes[tier__hash_str(op->oid) % LOCAL_STRIPES];
	pthread_mutex_lock(stripe);
	rc = obj_open(&c);
	/* before a guard or anything else reads or orders by the stored record */
	if (rc == 0 && rec_flush_for(op))
		rc = rec_flush(&c);
	if (rc < 0 || (rc = guard(&c)) < 0)
		goto out;
	if (L->guard_hold_us && (op->flags & (TIER_STORE_F_GUARD | TIER_STORE_F_EXCL)))
		usleep(L->guard_hold_us);
	switch (op->opcode) {
	case TIER_STORE_READ:    rc = do_read(&c); break;
	case TIER_STORE_WRITE:
	case TIER_STORE_ZERO:    rc = do_write(&c); break;
	case TIER_STORE_SETMETA: rc = do_setmeta(&c); break;
	case TIER_STORE_REMOVE:  rc = do_remove(&c); break;
	case TIER_STORE_STAT:    rc = do_stat(&c); break;
	default:                 rc = -ENOTSUP; break;
	}
out:
	obj_release(&c);
	pthread_mutex_unlock(stripe);
	return rc;
}
