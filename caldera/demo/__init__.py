"""``caldera demo``: the run (``run.py``), its load (``workload.py``, or a trace: ``replay.py``), what it
saw (``tracker.py``), the live view (``view.py``) and the report (``report.py``)."""
