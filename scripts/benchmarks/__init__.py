"""The benchmark sections of ``scripts/bench``, one module each (see ``scripts/bench.py``)."""
