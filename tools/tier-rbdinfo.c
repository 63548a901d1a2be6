/* SPDX-License-Identifier: MIT */
/*
 * tools/tier-rbdinfo.c - resolve an RBD image the way tierd does and print
 * what tierd would serve (id, object prefix, size, order, features), or the
 * exact refusal tierd would give.  It takes and releases tierd's exclusive
 * lock on the image header, so it also answers "could tierd start on this
 * image now?"; --hold keeps the lock for a while (tests of the second-daemon
 * refusal).  It never writes image data.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tier/rados.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: tier-rbdinfo [--conf FILE] [--id NAME] [--keyring FILE]\n"
		"                    [--timeout SECONDS] [--hold SECONDS] POOL IMAGE\n"
		"Resolves an RBD format-2 image as tierd would and takes tierd's lock.\n"
		"Exit: 0 ok, 1 refused or failed (reason on stderr), 2 usage.\n");
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "conf", required_argument, NULL, 'c' },
		{ "id", required_argument, NULL, 'i' },
		{ "keyring", required_argument, NULL, 'k' },
		{ "timeout", required_argument, NULL, 't' },
		{ "hold", required_argument, NULL, 'H' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct tier_rados_opts o = { .client_name = "client.admin", .op_timeout_ms = 30000 };
	struct tier_rados *r = NULL;
	struct tier_rbd_image img;
	unsigned hold = 0;
	char err[1024];
	int c, rc;

	while ((c = getopt_long(argc, argv, "c:i:k:t:H:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'c': o.conf = optarg; break;
		case 'i': o.client_name = optarg; break;
		case 'k': o.keyring = optarg; break;
		case 't': o.op_timeout_ms = strtoull(optarg, NULL, 10) * 1000; break;
		case 'H': hold = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (argc - optind != 2) {
		usage(stderr);
		return 2;
	}
	rc = tier_rados_connect(&o, &r, err, sizeof(err));
	if (rc < 0) {
		fprintf(stderr, "tier-rbdinfo: %s\n", err);
		return 1;
	}
	rc = tier_rbd_open(r, argv[optind], argv[optind + 1], &img, err, sizeof(err));
	if (rc < 0) {
		fprintf(stderr, "tier-rbdinfo: %s (%s)\n", err, strerror(-rc));
		tier_rados_disconnect(r);
		return 1;
	}
	printf("name=%s\nid=%s\nobject_prefix=%s\nsize=%" PRIu64 "\norder=%u\n"
	       "object_size=%llu\nfeatures=0x%" PRIx64 "\nclient=client.%" PRIu64
	       "\ncookie=%s\nlocked=yes\n",
	       img.name, img.id, img.object_prefix, img.size, img.order,
	       1ull << img.order, img.features, img.client_id, img.cookie);
	fflush(stdout);
	if (hold)
		sleep(hold);
	tier_rbd_close(r, argv[optind], &img);
	tier_rados_disconnect(r);
	return 0;
}
