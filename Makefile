# Every target uses a local virtual environment (.venv); nothing touches the system Python.
VENV   ?= .venv
PY     := $(VENV)/bin/python
PYTHON ?= python3
# Test-only readers of our trainer exports (tests/exporters), installed without their pins:
# mosaicml-streaming pins numpy<2.2 and litdata pulls a CUDA torchvision (pyproject.toml, `readers`).
READERS := litdata==0.2.76 mosaicml-streaming==0.13.0 lightning-utilities obstore tifffile \
           brotli python-snappy cramjam zstd catalogue pillow

.PHONY: install dev demo test test-all bench lint format docs clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

$(VENV)/.installed: pyproject.toml | $(PY)
	$(PY) -m pip install -q -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(PY)
	$(PY) -m pip install -q -e '.[dev,torch,ray,hf,remote,web,langid,fasttext]'
	$(PY) -m pip install -q --no-deps $(READERS)
	touch $@ $(VENV)/.installed

install: $(VENV)/.installed
dev: $(VENV)/.installed-dev

demo: install        ## run recipes/data_demo.yaml end to end, offline
	$(PY) -m pipeline data --config recipes/data_demo.yaml
	$(PY) -m pipeline report data/demo
	@$(PY) -c "from pipeline.loader import ShardedTokenDataset as D; d = D('data/demo/shard/train'); print(f'shards: data/demo/shard/train ({len(d)} x {d.seq_len} tokens) and data/demo/shard/eval; load them with pipeline.loader.ShardedTokenDataset(\"data/demo/shard/train\") (docs/loader.md)')"

test: dev            ## the whole default test suite
	$(PY) -m pytest -q

test-all: dev        ## including tests marked slow
	$(PY) -m pytest -q -m ''

bench: dev           ## benchmarks write JSON to outputs/benchmarks/
	@for b in benchmarks/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

lint: dev
	$(PY) -m ruff check src tests benchmarks examples
	$(PY) -m ruff format --check src tests benchmarks examples

format: dev
	$(PY) -m ruff format src tests benchmarks examples
	$(PY) -m ruff check --fix src tests benchmarks examples

docs: install        ## regenerate docs/recipes.md from the config dataclasses
	$(PY) -m pipeline.docgen > docs/recipes.md

clean:
	rm -rf data/demo data/toy outputs
