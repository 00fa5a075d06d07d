"""``caldera bench``: the suite (``suite.py``) and one module per bench; ``runner.py`` is what they share."""
