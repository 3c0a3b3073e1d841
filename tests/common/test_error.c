/* test_error.c - error table, messages and strict parsers. */
#include "config.h"

#include "hexi_common.h"
#include "tap.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static void test_table(void)
{
	is_str(hexi_strerror(HEXI_OK), "success", "HEXI_OK text");
	is_str(hexi_errname(HEXI_ERR_PARSE), "HEXI_ERR_PARSE", "name of PARSE");
	is_str(hexi_strerror((hexi_rc)250), "unknown error", "unknown code");
	ok(HEXI_ERR_INTERNAL > 0 && HEXI_ERR_INTERNAL < 256,
	   "codes fit an exit status");
}

static void test_messages(void)
{
	hexi_error_clear();
	is_str(hexi_errmsg(HEXI_ERR_IO), "input/output error",
	       "no message falls back to the code text");
	is_int(hexi_error(HEXI_ERR_RANGE, "field '%s' is %d", "tp", -1),
	       HEXI_ERR_RANGE, "hexi_error returns its code");
	is_str(hexi_errmsg(HEXI_ERR_RANGE), "field 'tp' is -1", "message kept");
	hexi_error_prefix(HEXI_ERR_RANGE, "plan.json");
	is_str(hexi_errmsg(HEXI_ERR_RANGE), "plan.json: field 'tp' is -1",
	       "prefix added");
}

static void test_parse_long(void)
{
	static const struct {
		const char *in;
		hexi_rc rc;
	} bad[] = {
	    {"", HEXI_ERR_PARSE},
	    {" 1", HEXI_ERR_PARSE},
	    {"1 ", HEXI_ERR_PARSE},
	    {"+1", HEXI_ERR_PARSE},
	    {"0x10", HEXI_ERR_PARSE},
	    {"12a", HEXI_ERR_PARSE},
	    {"101", HEXI_ERR_RANGE},
	    {"-1", HEXI_ERR_RANGE},
	    {"99999999999999999999999", HEXI_ERR_RANGE},
	};
	long v = 0;

	is_int(hexi_parse_long("42", 0, 100, &v), HEXI_OK, "parse 42");
	is_int(v, 42, "value 42");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		is_int(hexi_parse_long(bad[i].in, 0, 100, &v), bad[i].rc,
		       "reject '%s'", bad[i].in);
}

static void test_parse_double(void)
{
	double d = 0;

	is_int(hexi_parse_double("0.7", 0, 1e6, &d), HEXI_OK, "parse 0.7");
	is_near(d, 0.7, 1e-15, "value 0.7");
	is_int(hexi_parse_double("nan", 0, 1, &d), HEXI_ERR_RANGE,
	       "reject nan");
	is_int(hexi_parse_double("inf", 0, 1e300, &d), HEXI_ERR_RANGE,
	       "reject inf");
	is_int(hexi_parse_double("1e", 0, 1, &d), HEXI_ERR_PARSE, "reject 1e");
	is_int(hexi_parse_double("-0.5", 0, 1, &d), HEXI_ERR_RANGE,
	       "reject negative");
}

static void test_strings(void)
{
	char buf[4];

	is_int(hexi_strlcpy(buf, "abc", sizeof(buf)), HEXI_OK, "fits");
	is_str(buf, "abc", "copied");
	is_int(hexi_strlcpy(buf, "abcd", sizeof(buf)), HEXI_ERR_RANGE,
	       "too long is refused");
	ok(hexi_is_printable("a=b c"), "printable");
	ok(!hexi_is_printable("a\nb"), "newline is not printable");
	ok(!hexi_is_printable("a\x1b[0m"), "escape is not printable");
}

static void test_files(void)
{
	char dir[] = "/tmp/hexi-test-XXXXXX";
	char path[256];
	char *data = NULL;
	size_t len = 0;

	if (mkdtemp(dir) == NULL)
		tap_bail("mkdtemp failed");
	snprintf(path, sizeof(path), "%s/f.json", dir);
	is_int(hexi_write_file_atomic(path, "{}\n", 3, 0644), HEXI_OK,
	       "atomic write");
	is_int(hexi_read_file(path, 100, &data, &len), HEXI_OK, "read back");
	is_int(len, 3, "length");
	is_str(data, "{}\n", "content");
	free(data);
	is_int(hexi_read_file(path, 2, &data, &len), HEXI_ERR_RANGE,
	       "size cap enforced");
	snprintf(path, sizeof(path), "%s/missing", dir);
	is_int(hexi_read_file(path, 100, &data, &len), HEXI_ERR_NOTFOUND,
	       "missing file");
	snprintf(path, sizeof(path), "%s/f.json", dir);
	unlink(path);
	rmdir(dir);
}

int main(void)
{
	test_table();
	test_messages();
	test_parse_long();
	test_parse_double();
	test_strings();
	test_files();
	return tap_done();
}
