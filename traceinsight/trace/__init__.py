"""trace: the bottom layer. Load a Kineto trace (load.py), build the columnar model (model.py,
steps.py), the facts several layers read (facts.py: blocking calls, launch latency, collectives;
host.py: what each CPU thread was doing), and record a trace from a script (record*.py)."""
