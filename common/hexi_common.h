/*
 * hexi_common.h - error codes, error messages, logging and strict parsing
 * helpers shared by every HexiScale module.
 *
 * Errors are values: every fallible function returns a hexi_rc.  The code
 * says what kind of failure it was (and is the exit status of a CLI); the
 * message, set with hexi_error() at the place that knew the details, names
 * the object and the cause.  Messages are thread-local.
 */
#ifndef HEXI_COMMON_H
#define HEXI_COMMON_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* X(name, code, text): one table makes the enum and the strings. */
#define HEXI_ERROR_TABLE(X)                                                    \
	X(HEXI_OK, 0, "success")                                               \
	X(HEXI_ERR_USAGE, 2, "invalid usage")                                  \
	X(HEXI_ERR_NOMEM, 3, "out of memory")                                  \
	X(HEXI_ERR_INVAL, 4, "invalid argument")                               \
	X(HEXI_ERR_PARSE, 5, "malformed input")                                \
	X(HEXI_ERR_RANGE, 6, "value out of range")                             \
	X(HEXI_ERR_NOTFOUND, 7, "not found")                                   \
	X(HEXI_ERR_IO, 8, "input/output error")                                \
	X(HEXI_ERR_UNSUPPORTED, 9, "not supported")                            \
	X(HEXI_ERR_NOFIT, 10, "does not fit in memory")                        \
	X(HEXI_ERR_MISMATCH, 11, "does not match")                             \
	X(HEXI_ERR_VERSION, 12, "unknown format version")                      \
	X(HEXI_ERR_CHECKSUM, 13, "checksum mismatch")                          \
	X(HEXI_ERR_PERM, 14, "permission denied")                              \
	X(HEXI_ERR_NOSPACE, 15, "no space left")                               \
	X(HEXI_ERR_TIMEOUT, 16, "timed out")                                   \
	X(HEXI_ERR_PEER, 17, "a peer process failed")                          \
	X(HEXI_ERR_BATCH, 18, "the batch cannot feed the plan")                \
	X(HEXI_ERR_SHAPE, 19, "the model's shape does not fit the GPUs")       \
	X(HEXI_ERR_MPI, 20, "MPI error")                                       \
	X(HEXI_ERR_PMIX, 21, "PMIx error")                                     \
	X(HEXI_ERR_HDF5, 22, "HDF5 error")                                     \
	X(HEXI_ERR_CUDA, 23, "CUDA error")                                     \
	X(HEXI_ERR_NCCL, 24, "NCCL error")                                     \
	X(HEXI_ERR_SLURM, 25, "Slurm error")                                   \
	X(HEXI_ERR_METIS, 26, "METIS error")                                   \
	X(HEXI_ERR_NODEV, 27, "no such device")                                \
	X(HEXI_ERR_INTERNAL, 99, "internal error")

typedef enum hexi_rc {
#define HEXI_X_ENUM(name, code, text) name = code,
	HEXI_ERROR_TABLE(HEXI_X_ENUM)
#undef HEXI_X_ENUM
} hexi_rc;

/* Static text of a code ("unknown error" for codes not in the table). */
const char *hexi_strerror(hexi_rc rc);

/* Name of a code, e.g. "HEXI_ERR_PARSE" (for JSON output and tests). */
const char *hexi_errname(hexi_rc rc);

/*
 * Record the details of a failure and return rc, so a call site reads
 *   return hexi_error(HEXI_ERR_PARSE, "%s: field 'nodes[2].gpus': ...", path);
 * The message is kept per thread until the next
 * hexi_error()/hexi_error_clear().
 */
hexi_rc hexi_verror(hexi_rc rc, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));
hexi_rc hexi_error(hexi_rc rc, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Prefix the current message with "PREFIX: " (adds context on the way up). */
hexi_rc hexi_error_prefix(hexi_rc rc, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/*
 * hexi_error() and hexi_error_prefix() are macros over non-variadic inlines
 * that return rc, so that clang's static analyzer (which never inlines a
 * variadic function) and cppcheck see `return hexi_error(HEXI_ERR_IO, ...)`
 * as an error path, not a call that might return HEXI_OK.  rc is evaluated
 * once; the message is formatted by the out-of-line helpers below, which
 * leave errno as they found it (rc may be errno_rc(errno)).  common/error.c
 * still defines the functions above (same behaviour) for the library ABI.
 */
int hexi_error_set(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
const char *hexi_error_fmt_prefix(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
void hexi_error_prefix_str(hexi_rc rc, const char *prefix);

static inline hexi_rc hexi_error_rc(hexi_rc rc, int set)
{
	(void)set;
	return rc;
}

static inline hexi_rc hexi_error_prefix_rc(hexi_rc rc, const char *prefix)
{
	hexi_error_prefix_str(rc, prefix);
	return rc;
}

#ifndef HEXI_COMMON_OUT_OF_LINE_ERROR
#define hexi_error(rc, ...) hexi_error_rc((rc), hexi_error_set(__VA_ARGS__))
#define hexi_error_prefix(rc, ...)                                             \
	hexi_error_prefix_rc((rc), hexi_error_fmt_prefix(__VA_ARGS__))
#endif

/* The last message of this thread, or the code's text if none was set. */
const char *hexi_errmsg(hexi_rc rc);
void hexi_error_clear(void);

/* ---- logging ---------------------------------------------------------- */

typedef enum hexi_log_level {
	HEXI_LOG_ERROR = 0,
	HEXI_LOG_WARN = 1,
	HEXI_LOG_INFO = 2,
	HEXI_LOG_VERBOSE = 3,
	HEXI_LOG_DEBUG = 4,
} hexi_log_level;

/* Where messages go: default writes "hexiscale: LEVEL: msg" to stderr. */
typedef void (*hexi_log_sink)(hexi_log_level level, const char *msg, void *arg);

/* Programs only (hexiplan, hexickpt, hexitrain, hexiprof): print
 * "PROG: <message of rc>" and return rc as the exit status; print
 * "PROG: <fmt...> (see 'PROG --help')" and return HEXI_ERR_USAGE. */
int hexi_cli_fail(const char *prog, hexi_rc rc);
int hexi_cli_usage_error(const char *prog, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The end of a program's main: flush stdout; if that or an earlier write
 * to it failed (a full disk, >/dev/full), print "PROG: cannot write
 * standard output: <why>" and return 15 (no space) or 8 where STATUS is
 * 0, else STATUS. */
int hexi_cli_close_stdout(const char *prog, int status);

void hexi_log_set_sink(hexi_log_sink sink, void *arg);
void hexi_log_set_level(hexi_log_level level);
hexi_log_level hexi_log_get_level(void);
void hexi_log(hexi_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ---- strict parsing (outside input) ------------------------------------- */

/* Whole string is a base-10 integer in [min, max]; no spaces, no junk. */
hexi_rc hexi_parse_long(const char *s, long min, long max, long *out);
/* Whole string is a finite number in [min, max]. */
hexi_rc hexi_parse_double(const char *s, double min, double max, double *out);
/* Copy at most cap-1 bytes; HEXI_ERR_RANGE (and no copy) if src is longer. */
hexi_rc hexi_strlcpy(char *dst, const char *src, size_t cap);
/* 1 if s has only printable ASCII (0x20..0x7e), else 0. */
int hexi_is_printable(const char *s);
/* 1 if s is a non-empty host name of [A-Za-z0-9._-] (the node names a
 * cluster description, a profile and Slurm's node list share), else 0. */
int hexi_is_host_name(const char *s);

/* ---- small utilities ---------------------------------------------------- */

/* 64-bit FNV-1a of len bytes (offset 0xcbf29ce484222325, prime
 * 0x100000001b3).  A format contract: the plan hash (hexiscale-plan(5)),
 * the hand-off checksum and the trainer's per-tensor init seeds depend on
 * these exact values; tests/common/test_error.c pins them. */
uint64_t hexi_fnv1a64(const void *data, size_t len);

/* Monotonic clock in seconds. */
double hexi_now_s(void);
/*
 * Read a whole input file (at most max_bytes) into a NUL-terminated heap
 * buffer (*out, caller frees; *len without the NUL).  Opened with
 * O_NONBLOCK|O_NOCTTY|O_CLOEXEC and checked with fstat on that descriptor:
 * anything but a regular file (FIFO, device, directory, socket) is refused
 * at once with a message naming its type, so a FIFO never blocks the
 * caller and a name swapped after a check cannot be read.
 */
hexi_rc hexi_read_file(const char *path, size_t max_bytes, char **out,
		       size_t *len);
/* Flags of hexi_read_file_ex. */
#define HEXI_READ_NOFOLLOW 1u /* refuse a symbolic link as the last part */
hexi_rc hexi_read_file_ex(const char *path, size_t max_bytes, unsigned flags,
			  char **out, size_t *len);
/* "regular file", "FIFO", "directory", ... for a st_mode (messages). */
const char *hexi_file_kind(unsigned mode);

/*
 * Create PREFIX<16 random hex digits>SUFFIX with O_CREAT|O_EXCL|O_NOFOLLOW
 * and mode (umask applies): an existing name, link or not, is never opened;
 * names planted in advance cannot be guessed.  *fdp is the open descriptor
 * (O_WRONLY, caller closes), path the name made.
 */
hexi_rc hexi_create_unique(const char *prefix, const char *suffix, int mode,
			   char *path, size_t cap, int *fdp);

/* The descriptor of this process that PATH names, or -1: /dev/stdout,
 * /dev/stderr, /dev/fd/N, /proc/self/fd/N, or a chain of up to 8 symlinks
 * of root's or the caller's whose last text is one of those (ln -s
 * /proc/self/fd/1 out).  Writers must not rename over such a name: as
 * root, with stdout redirected to a file, that replaces /dev/stdout. */
int hexi_path_fd(const char *path);

/*
 * Write a whole file at path.  A target that is absent, a regular file or a
 * symbolic link to one is replaced atomically: PATH.tmp.<random> created
 * by hexi_create_unique, fsync, rename over path (a link is replaced, never
 * written through), fsync of the directory.  A character device or FIFO at
 * path (-o /dev/null, -o /dev/stdout), or behind a link of root's or the
 * caller's, is written in place, never replaced (a FIFO without a reader
 * is an error, not a wait); another user's link is replaced.  A name of
 * one of this process's descriptors (hexi_path_fd) is written to that
 * descriptor at its offset, after fflush(NULL).  The
 * temporary name is PATH.tmp.<16 hex>, its last component cut to 255.  A
 * directory, socket or block device is refused and left as it is.
 */
hexi_rc hexi_write_file_atomic(const char *path, const void *data, size_t len,
			       int mode);
/* Would hexi_write_file_atomic(path) be refused where it creates its
 * file?  Checked as it would write: a descriptor's name, a device or FIFO
 * is fine (written in place); a directory, socket or block device is
 * refused; otherwise its temporary file is created beside path and
 * removed (path itself is not touched).  An error names path; errno is
 * then the failed open's. */
hexi_rc hexi_check_writable(const char *path);

#ifdef __cplusplus
}
#endif
#endif /* HEXI_COMMON_H */
