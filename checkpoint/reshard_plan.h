/* reshard_plan.h - hexickpt reshard: target plan file to layout (interim:
 * needs the scheduler library's plan reader, not on main yet). */
static hexi_rc reshard_with_plan(hexi_ckpt_reader *r, const char *plan_path,
				 const char *out, hexi_ckpt_progress_fn bar_fn)
{
	(void)r;
	(void)out;
	(void)bar_fn;
	return hexi_error(
	    HEXI_ERR_UNSUPPORTED,
	    "%s: reading plans needs libhexisched (not built yet)", plan_path);
}
