/* SPDX-License-Identifier: MIT */
/*
 * daemon/check.h - `tierd --check`: after the file parses, probe what a start
 * would need from the machine (directories, sockets, addresses, TLS and Ceph
 * files) without changing anything.
 */
#ifndef TIERD_CHECK_H
#define TIERD_CHECK_H

#include <stdio.h>

#include "daemon/config.h"

/*
 * Probe c for the current user.  Each finding is one line: "ok", "note" and
 * the summary on out; "error" lines on err.  Returns the number of errors
 * (0: a start would get past every probed step).  Never creates, binds for
 * longer than the probe, replaces or unlinks anything; a socket another
 * process answers on is only connected to.
 */
int tierd_check_probe(const struct tierd_config *c, FILE *out, FILE *err);

#endif
