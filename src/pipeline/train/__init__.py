"""The proxy model side: train a small GPT on a run's shards and score data recipes by it.

config (the `pretrain:` recipe block, torch-free), model (pre-norm GPT, SDPA, doc mask),
data (shards, tokenizer, eval texts, the prefetched train stream), checkpoint, evaluate (loss,
perplexity, bits per byte), trainer (`pipeline pretrain`, DDP under torchrun), ablate
(`pipeline ablate`), report. Everything but config, report and cli imports torch: import the
submodules directly (docs/pretrain.md).
"""
