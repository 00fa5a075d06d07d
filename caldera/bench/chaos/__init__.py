"""``caldera bench chaos``: the whole system under faults, one at a time, measured as the API server shows it.

``system`` builds what the faults are done to (the real processes, supervised, on the in-repo
Kubernetes API server with a steady mixed load); ``faults`` is the catalogue; ``rounds``
measures one round and makes the rows; ``command`` is the command line. Not part of the
suite that ``caldera bench`` runs: it takes minutes and wants the machine to itself.
"""
