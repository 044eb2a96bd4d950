"""The gateway's start: what its entry point loads before it serves."""

import json
import subprocess
import sys


def test_entry_point_loads_no_duckdb_or_pyarrow() -> None:
    # About 0.2 s of start-up CPU that only SQL queries need: they load with the first one.
    probe = "import json, sys, stash_gateway.main; print(json.dumps(sorted(sys.modules)))"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)

    assert result.returncode == 0, result.stderr
    loaded = set(json.loads(result.stdout))
    assert "stash_gateway.query.engine" in loaded
    assert {"duckdb", "pyarrow", "numpy"} & loaded == set()
