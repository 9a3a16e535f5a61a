# The two commands of the README. Both set up what they need first.
PY ?= python3

.PHONY: demo test
demo:
	bash scripts/setup.sh
	$(PY) benchmarks/step_cost.py

test:
	bash scripts/setup.sh test
	$(PY) -m pytest -q
