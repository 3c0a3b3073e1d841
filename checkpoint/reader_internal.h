/* reader_internal.h - the reader object, shared by reader.c and tools.c. */
#ifndef HEXI_CKPT_READER_INTERNAL_H
#define HEXI_CKPT_READER_INTERNAL_H

#include "ckpt_internal.h"

struct hexi_ckpt_reader {
	char stepdir[CK_PATH_MAX];
	ck_manifest man;
	int have_man;
	int verify;
	int stepfd;  /* the step directory, everything opened below it */
	hid_t *fids; /* [world_size], opened lazily */
	int nopen;
	int *fds; /* [world_size]: for reads by offset (version 3), or -1 */
	int nfds;
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
