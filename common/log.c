/* log.c - leveled logging through a replaceable sink. */
#include "config.h"

#include "hexi_common.h"

#include <stdio.h>

static void default_sink(hexi_log_level level, const char *msg, void *arg);

static hexi_log_sink log_sink = default_sink;
static void *log_arg;
static hexi_log_level log_level = HEXI_LOG_INFO;

static const char *const level_names[] = {"error", "warning", "info", "verbose",
					  "debug"};

static void default_sink(hexi_log_level level, const char *msg, void *arg)
{
	(void)arg;
	fprintf(stderr, "hexiscale: %s: %s\n", level_names[level], msg);
}

void hexi_log_set_sink(hexi_log_sink sink, void *arg)
{
	log_sink = sink != NULL ? sink : default_sink;
	log_arg = arg;
}

void hexi_log_set_level(hexi_log_level level)
{
	log_level = level;
}

hexi_log_level hexi_log_get_level(void)
{
	return log_level;
}

void hexi_log(hexi_log_level level, const char *fmt, ...)
{
	char msg[2048];
	va_list ap;

	if (level > log_level)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_sink(level, msg, log_arg);
}
