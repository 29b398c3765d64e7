"""estimate: the timeline graph (graph.py), its what-if replay with typed fixes applied
(replay.py), and the ranking of findings by replayed saving (rank.py)."""
