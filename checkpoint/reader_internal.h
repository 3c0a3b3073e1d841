/* reader_internal.h - the reader object, shared by reader.c and tools.c. */
#ifndef HEXI_CKPT_READER_INTERNAL_H
#define HEXI_CKPT_READER_INTERNAL_H

#include <sys/stat.h>

#include "ckpt_internal.h"

struct hexi_ckpt_reader {
	char stepdir[CK_PATH_MAX];
	ck_manifest man;
	int have_man;
	int verify;
	int stepfd;  /* the step directory, everything opened below it */
	hid_t *fids; /* [world_size], opened lazily */
	int nopen;
	int last_fid; /* rank whose file was opened last, or -1 */
	int *fds;     /* [world_size]: for reads by offset (version 3), or -1 */
	int nfds;
	int last_fd; /* rank whose descriptor was opened last, or -1 */
	/* [world_size]: the rank file whose whole-file xxh64 matched, as it
	 * was then (a reopen after the CK_MAX_OPEN_FILES cap does not hash
	 * it again while it is the same, unchanged inode) */
	struct ck_hashed {
		dev_t dev;
		ino_t ino;
		off_t size;
		struct timespec ctim, mtim;
		int ok;
	} * hashed;
	float *buf; /* verification buffer */
	size_t bufcap;
	const ck_slice *cached;	    /* slice whose data r->buf holds, or NULL */
	const ck_slice *dset_slice; /* slice whose dataset is open */
	hid_t dset, dspace;
};

hexi_rc ck_reader_file(hexi_ckpt_reader *r, int rank, hid_t *out);
hexi_rc ck_verify_slice(hexi_ckpt_reader *r, const ck_tensor *t, ck_slice *s);
hexi_rc ck_blob_read(hexi_ckpt_reader *r, const ck_blob *b, void **data);

#endif
