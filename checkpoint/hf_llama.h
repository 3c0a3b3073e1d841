/*
 * hf_llama.h - internal to hexickpt: Hugging Face Llama export/import
 * (hf_llama.c; hexickpt(1) export --format hf, import).
 */
#ifndef HEXI_HF_LLAMA_H
#define HEXI_HF_LLAMA_H

#include "hexi_ckpt.h"
#include "hexi_sched.h"

/* Write DIR/config.json and DIR/model.safetensors (weights only, HF
 * names and layouts) from the checkpoint R of model M; DTYPE is "fp32",
 * "bf16" or "fp16". */
hexi_rc hexi_hf_export(hexi_ckpt_reader *r, const hexi_model *m,
		       const char *dir, const char *dtype);
/* Read HF_DIR (config.json and every *.safetensors in it) and write a
 * committed checkpoint at step 0 under CKPT, with the model description
 * CKPT/model.json (model name NAME, or "hf-" and the directory's last
 * component).  *m gets the model. */
hexi_rc hexi_hf_import(const char *hf_dir, const char *ckpt, const char *name,
		       hexi_model *m);
/* The model of a checkpoint for export: MODEL (name or file) if given,
 * else the model of its stored plan, else CKPT's model.json. */
hexi_rc hexi_hf_model_of(hexi_ckpt_reader *r, const char *ckpt,
			 const char *model, hexi_model *m);

#endif /* HEXI_HF_LLAMA_H */
