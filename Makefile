# The two commands of the README. Both set up what they need first, with one interpreter:
#   make demo PYTHON=python3.11
PYTHON ?= python3
export PYTHON

.PHONY: demo test
demo:
	bash scripts/setup.sh demo
	$(PYTHON) examples/airspace_demo.py --out demo-output

test:
	bash scripts/setup.sh test
	$(PYTHON) -m pytest -q --slow
