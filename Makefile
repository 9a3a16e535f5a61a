# The two commands of the README. Both set up what they need first.
PY ?= python3

.PHONY: demo test
demo:
	bash scripts/setup.sh demo
	$(PY) examples/airspace_demo.py --out demo-output

test:
	bash scripts/setup.sh test
	$(PY) -m pytest -q
