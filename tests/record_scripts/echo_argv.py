"""Writes what it sees (sys.argv, __name__, cwd, sys.path[0], ...) to $RECORD_TEST_REPORT."""
import json
import os
import sys

if __name__ == "__main__":
    with open(os.environ["RECORD_TEST_REPORT"], "w") as f:
        json.dump({"argv": sys.argv, "name": __name__, "cwd": os.getcwd(),
                   "path0": sys.path[0], "file": __file__,
                   "main_module_is_me": sys.modules["__main__"].__dict__ is globals(),
                   "torch_imported": "torch" in sys.modules,
                   "traceinsight_imported": any(m == "traceinsight" or m.startswith("traceinsight.")
                                                for m in sys.modules)}, f)
