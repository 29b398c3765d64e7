"""report: run the analysis (analyze.py) and build the document every output is rendered from
(document.py, with tables.py and timeline.py); diff*.py compare two documents."""
