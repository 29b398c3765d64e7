"""render: each reporter reads an Analysis and writes one format; none computes findings."""
