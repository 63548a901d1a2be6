/* SPDX-License-Identifier: MIT */
/* libtier/store/rados_internal.h - shared by rados.c and rbd.c only (both include librados). */
#ifndef TIER_RADOS_INTERNAL_H
#define TIER_RADOS_INTERNAL_H

#include <rados/librados.h>

#include "tier/rados.h"

/* The cluster handle behind a connection; valid until tier_rados_disconnect. */
rados_t tier__rados_cluster(const struct tier_rados *r);
/* The cephx id the connection uses ("client.admin"). */
const char *tier__rados_client_name(const struct tier_rados *r);

#endif
