/* SPDX-License-Identifier: MIT */
/*
 * libtier/log.c - failure lines an operator can act on: which op failed, on
 * which image, object and pool, with the errno's name, as one line and as a
 * record with the fields apart (tier_engine_opts.log_rec, for journald).  It
 * decides how many such lines reach the log: at most TIER_LOG_BURST per op
 * in each TIER_LOG_WINDOW_MS, then one line with the number suppressed, so
 * a failing pool under load cannot flood the journal.  It never changes
 * engine state besides its own counters and never blocks.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "libtier/engine_int.h"

static const char *const op_names[TIER__EL_N] = {
	[TIER__EL_READ] = "read", [TIER__EL_WRITE] = "write", [TIER__EL_TRIM] = "trim",
	[TIER__EL_ZEROES] = "write_zeroes", [TIER__EL_FLUSH] = "flush",
	[TIER__EL_CACHE] = "cache", [TIER__EL_PROMOTE] = "promote",
	[TIER__EL_EVICT] = "evict", [TIER__EL_FILL] = "fill",
	[TIER__EL_BLOCK_STATUS] = "block_status",
};

const char *tier_errno_name(int err)
{
	const char *n = strerrorname_np(err < 0 ? -err : err);

	return n ? n : "E?";
}

int tier__el_of_req(int type)
{
	switch (type) {
	case TIER_REQ_READ: return TIER__EL_READ;
	case TIER_REQ_WRITE: return TIER__EL_WRITE;
	case TIER_REQ_TRIM: return TIER__EL_TRIM;
	case TIER_REQ_WRITE_ZEROES: return TIER__EL_ZEROES;
	case TIER_REQ_FLUSH: return TIER__EL_FLUSH;
	case TIER_REQ_CACHE: return TIER__EL_CACHE;
	default: return TIER__EL_FILL;   /* TIER__REQ_FILL */
	}
}

static void emit(const struct tier_engine *e, const struct tier_log_rec *r)
{
	if (e->o.log_rec)
		e->o.log_rec(e->o.log_arg, r);
	else if (e->o.log)
		e->o.log(e->o.log_arg, r->lvl, r->msg);
}

/* May one more line of op go out now?  Opens a new window when due. */
static bool take(struct tier_engine *e, int op)
{
	struct tier__elog *w = &e->elog[op];
	uint64_t now = tier__eng_now_ms(e);

	if (!w->lines || now - w->start_ms >= TIER_LOG_WINDOW_MS) {
		tier__log_flush_suppressed(e);
		w->start_ms = now;
		w->lines = 0;
	}
	if (w->lines >= TIER_LOG_BURST) {
		w->suppressed++;
		return false;
	}
	w->lines++;
	return true;
}

void tier__log_fail(struct tier_engine *e, enum tier_log_level lvl, int op,
		    const struct tier_image *img, const char *oid,
		    const struct tier_store *pool, int err, const char *fmt, ...)
{
	char tail[256] = "", msg[640];
	const char *pn = pool ? tier_store_pool_name(pool) : NULL;
	struct tier_log_rec r = {
		.lvl = lvl, .msg = msg, .op = op_names[op],
		.image = img ? img->name : NULL, .object = oid && oid[0] ? oid : NULL,
		.pool = pn, .err = err < 0 ? -err : err,
	};
	va_list ap;

	if ((!e->o.log && !e->o.log_rec) || !take(e, op))
		return;
	if (fmt) {
		va_start(ap, fmt);
		vsnprintf(tail, sizeof(tail), fmt, ap);
		va_end(ap);
	}
	snprintf(msg, sizeof(msg), "%s of %s failed: %s (%s) [image %s, pool %s]%s",
		 r.op, r.object ? r.object : "(no object)", tier_errno_name(r.err),
		 strerror(r.err), r.image ? r.image : "-", pn ? pn : "-", tail);
	emit(e, &r);
}

void tier__log_flush_suppressed(struct tier_engine *e)
{
	uint64_t now = tier__eng_now_ms(e);

	for (int op = 0; op < TIER__EL_N; op++) {
		struct tier__elog *w = &e->elog[op];
		char msg[160];
		struct tier_log_rec r = { .lvl = TIER_LOG_WARN, .msg = msg, .op = op_names[op] };

		if (!w->suppressed || now - w->start_ms < TIER_LOG_WINDOW_MS)
			continue;
		snprintf(msg, sizeof(msg), "%llu more %s failure line(s) suppressed in the last %u s",
			 (unsigned long long)w->suppressed, op_names[op],
			 TIER_LOG_WINDOW_MS / 1000);
		w->suppressed = 0;
		w->lines = 0;
		emit(e, &r);
	}
}
