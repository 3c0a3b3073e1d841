/*
 * test_manifest.c - the manifest reader accepts what the writer produces
 * and rejects a table of bad inputs, each with its code.
 */
#include "config.h"

#include "tap.h"
#include "ckpt_fixture.h"

static char *valid;
static size_t valid_len;

/* The valid manifest with the first FROM replaced by TO. */
static char *edit(const char *from, const char *to)
{
	char *p = strstr(valid, from), *out;
	size_t a, fl = strlen(from), tl = strlen(to);

	if (p == NULL)
		return NULL;
	a = (size_t)(p - valid);
	out = malloc(valid_len - fl + tl + 1);
	if (out == NULL)
		return NULL;
	memcpy(out, valid, a);
	memcpy(out + a, to, tl);
	memcpy(out + a + tl, p + fl, valid_len - a - fl + 1);
	return out;
}

static const struct {
	const char *from, *to;
	hexi_rc want;
	const char *why;
} bad[] = {
    {"\"format\": \"hexiscale-ckpt\"", "\"format\": \"hexiscale-plan\"",
     HEXI_ERR_PARSE, "other format"},
    {"\"version\": 1", "\"version\": 4", HEXI_ERR_VERSION, "version 4"},
    {"\"version\": 1", "\"version\": 3", HEXI_ERR_PARSE,
     "version 3 without offsets"},
    {"\"version\": 1", "\"version\": 0", HEXI_ERR_VERSION, "version 0"},
    {"\"version\": 1", "\"version\": 2", HEXI_ERR_PARSE,
     "version 2 without whole-file checksums"},
    {"\"bytes\": 7992", "\"bytes\": 7992, \"xxh64\": \"0123456789abcdef\"",
     HEXI_ERR_PARSE, "version 1 with a version-2 key"},
    {"\"version\": 1", "\"version\": \"1\"", HEXI_ERR_PARSE,
     "version as a string"},
    {"\"model\": \"fixture\"", "\"model\": \"\"", HEXI_ERR_INVAL,
     "empty model"},
    {"\"model\": \"fixture\"", "\"model\": \"a\\u0001\"", HEXI_ERR_INVAL,
     "unprintable model"},
    {"\"plan_hash\": \"00112233aabbccdd\"", "\"plan_hash\": \"XYZ\"",
     HEXI_ERR_INVAL, "plan hash not hex"},
    {"\"plan_hash\": \"00112233aabbccdd\"",
     "\"plan_hash\": \"00112233aabbccdd00\"", HEXI_ERR_RANGE,
     "plan hash too long"},
    {"\"step\": 3", "\"step\": -1", HEXI_ERR_RANGE, "negative step"},
    {"\"step\": 3", "\"step\": 100000000", HEXI_ERR_RANGE, "step too big"},
    {"\"step\": 3", "\"step\": 3.5", HEXI_ERR_PARSE, "fractional step"},
    {"\"world_size\": 3", "\"world_size\": 0", HEXI_ERR_RANGE, "world size 0"},
    {"\"world_size\": 3", "\"world_size\": 2", HEXI_ERR_PARSE,
     "world size differs from the file list"},
    {"\"tokens_seen\": 12288", "\"tokens_seen\": 12288, \"extra\": 1",
     HEXI_ERR_PARSE, "unknown top-level key"},
    {"\"name\": \"rank-00001.h5\"", "\"name\": \"../x.h5\"", HEXI_ERR_PARSE,
     "file name not rank-NNNNN.h5"},
    {"\"bytes\": 7992", "\"bytes\": -1", HEXI_ERR_RANGE, "negative size"},
    {"\"name\": \"embed.weight\"", "\"name\": \"../embed\"", HEXI_ERR_INVAL,
     "tensor name with a slash"},
    {"\"dtype\": \"float32\"", "\"dtype\": \"bfloat16\"", HEXI_ERR_UNSUPPORTED,
     "dtype"},
    {"\"xxh64\": \"d2955ed9ca387947\"", "\"xxh64\": \"d2955ed9ca38794\"",
     HEXI_ERR_PARSE, "short checksum"},
    {"\"xxh64\": \"d2955ed9ca387947\"", "\"xxh64\": \"D2955ED9CA387947\"",
     HEXI_ERR_PARSE, "upper-case checksum"},
    {"\"rank\": 1,\n     \"rows\": [\n      3,",
     "\"rank\": 1,\n     \"rows\": [\n      2,", HEXI_ERR_MISMATCH,
     "overlapping slices"},
    {"\"rank\": 1,\n     \"rows\": [\n      3,",
     "\"rank\": 1,\n     \"rows\": [\n      4,", HEXI_ERR_MISMATCH,
     "gap between slices"},
    {"\"rank\": 1,\n     \"rows\": [\n      3,",
     "\"rank\": 7,\n     \"rows\": [\n      3,", HEXI_ERR_RANGE,
     "slice of a rank outside the world"},
    {"      6\n     ],", "      7\n     ],", HEXI_ERR_RANGE,
     "rows past the shape"},
    {"    8,\n    4\n   ]", "    8,\n    4,\n    2\n   ]", HEXI_ERR_PARSE,
     "3-D shape"},
    {"    8,\n    4\n   ]", "    0,\n    4\n   ]", HEXI_ERR_RANGE, "zero rows"},
    {"\"slices\": [", "\"slices\": 5, \"x\": [", HEXI_ERR_PARSE,
     "slices not an array"},
    {"\"name\": \"rng\"", "\"name\": \"embed.weight\", \"name\": \"rng\"",
     HEXI_ERR_PARSE, "duplicate key"},
    {"\"bytes\": 32", "\"bytes\": 1099511627776", HEXI_ERR_RANGE,
     "blob too large"},
    {"\"plan\": {", "\"plan\": [{", HEXI_ERR_PARSE, "plan not an object"},
    {"\"fixture\": true\n }\n}", "\"fixture\": true\n }\n", HEXI_ERR_PARSE,
     "truncated JSON"},
};

/* Edits of one valid manifest of another version. */
typedef struct {
	const char *from, *to;
	hexi_rc want;
	const char *why;
} edit_case;

static const edit_case bad2[] = {
    {"\"xxh64\": \"9f1c2b3a4d5e6f70\"", "\"xxh64x\": \"9f1c2b3a4d5e6f70\"",
     HEXI_ERR_PARSE, "v2: file checksum missing"},
    {"\"xxh64\": \"9f1c2b3a4d5e6f70\"", "\"xxh64\": \"9f1c2b3a4d5e6f7\"",
     HEXI_ERR_PARSE, "v2: short file checksum"},
    {"\"xxh64\": \"9f1c2b3a4d5e6f70\"", "\"xxh64\": 17", HEXI_ERR_PARSE,
     "v2: file checksum a number"},
};

static const edit_case bad3[] = {
    {"\"offset\": 2048", "\"offsetx\": 2048", HEXI_ERR_PARSE,
     "v3: slice offset missing"},
    {"\"offset\": 2048", "\"offset\": -1", HEXI_ERR_RANGE,
     "v3: negative offset"},
    {"\"offset\": 2048", "\"offset\": \"2048\"", HEXI_ERR_PARSE,
     "v3: offset a string"},
    {"\"offset\": 2048", "\"offset\": 7900", HEXI_ERR_RANGE,
     "v3: slice runs past the end of its rank file"},
    {"\"offset\": 2048", "\"offset\": 9223372036854775807", HEXI_ERR_RANGE,
     "v3: offset past the file (no overflow)"},
    {"\"offset\": 2240", "\"offset\": 7980", HEXI_ERR_RANGE,
     "v3: blob runs past the end of its rank file"},
    {"\"offset\": 2240", "\"size\": 2240", HEXI_ERR_PARSE,
     "v3: blob offset missing"},
    {"\"version\": 3", "\"version\": 2", HEXI_ERR_PARSE,
     "v2 with a version-3 key"},
};

/* corpus/manifest/FILE is accepted (a WHAT manifest), and each of the N
 * edits of it gets its code; the table's valid manifest is kept. */
static void edit_table(const char *file, const char *what,
		       const edit_case *c, size_t n)
{
	char path[1024], *t, *keep = valid;
	size_t keep_len = valid_len, i;
	hexi_rc rc;

	snprintf(path, sizeof(path), "%s/tests/checkpoint/corpus/manifest/%s",
		 getenv("top_srcdir") ? getenv("top_srcdir") : "../..", file);
	if (hexi_read_file(path, 1 << 20, &valid, &valid_len) != HEXI_OK)
		tap_bail(hexi_errmsg(HEXI_ERR_IO));
	is_rc(hexi_ckpt_manifest_check(valid, valid_len), HEXI_OK,
	      "a %s manifest is accepted", what);
	for (i = 0; i < n; i++) {
		t = edit(c[i].from, c[i].to);
		rc = t ? hexi_ckpt_manifest_check(t, strlen(t)) : HEXI_OK;
		is_int(rc, c[i].want, "%s: %s", c[i].why,
		       t == NULL ? "pattern not found"
		       : rc	 ? hexi_errmsg(rc)
				 : "accepted");
		free(t);
	}
	free(valid);
	valid = keep;
	valid_len = keep_len;
}

int main(void)
{
	char path[1024], *t;
	size_t i;
	hexi_rc rc;

	snprintf(path, sizeof(path),
		 "%s/tests/checkpoint/corpus/manifest/"
		 "valid.json",
		 getenv("top_srcdir") ? getenv("top_srcdir") : "../..");
	if (hexi_read_file(path, 1 << 20, &valid, &valid_len) != HEXI_OK)
		tap_bail(hexi_errmsg(HEXI_ERR_IO));
	is_rc(hexi_ckpt_manifest_check(valid, valid_len), HEXI_OK,
	      "writer's manifest is accepted");
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		t = edit(bad[i].from, bad[i].to);
		if (t == NULL) {
			ok(0, "table entry %zu (%s): pattern not found", i,
			   bad[i].why);
			continue;
		}
		rc = hexi_ckpt_manifest_check(t, strlen(t));
		is_int(rc, bad[i].want, "%s: %s", bad[i].why,
		       rc ? hexi_errmsg(rc) : "accepted");
		free(t);
	}
	/* Format 2: the files carry whole-file xxh64. */
	edit_table("valid-v2.json", "version-2", bad2,
		   sizeof(bad2) / sizeof(bad2[0]));
	/* Format 3 (today's): slices and blobs say where their bytes lie in
	 * the rank file, inside it. */
	edit_table("valid-v3.json", "version-3", bad3,
		   sizeof(bad3) / sizeof(bad3[0]));
	is_int(hexi_ckpt_manifest_check("", 0), HEXI_ERR_PARSE, "empty input");
	is_int(hexi_ckpt_manifest_check("[]", 2), HEXI_ERR_PARSE, "an array");
	is_int(hexi_ckpt_manifest_check("{\"format\":\"hexiscale-ckpt\"}", 27),
	       HEXI_ERR_PARSE, "format only");
	free(valid);
	return tap_done();
}
