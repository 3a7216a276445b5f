"""The compiled-loop policy (dsms/compiled.py) acts: the machine code is cached and a later process loads it
instead of compiling, and a loop releases the GIL."""

import subprocess
import sys
import textwrap
from pathlib import Path

MODULE = textwrap.dedent('''
    import numpy as np
    from dsms.compiled import kernel

    @kernel
    def total(a):
        s = 0
        for x in a:
            s += x
        return s

    if __name__ == "__main__":
        assert total(np.arange(10, dtype=np.int64)) == 45
        sig = total.signatures[0]
        print(total.stats.cache_hits.get(sig, 0), total.stats.cache_misses.get(sig, 0),
              total.targetoptions.get("nogil"))
''')


def _run(path: Path) -> list[str]:
    repo = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, cwd=repo,
                         env={"PYTHONPATH": str(repo), "PATH": "/usr/bin:/bin"}, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def test_a_kernel_is_compiled_once_and_loaded_from_the_cache_after(tmp_path):
    mod = tmp_path / "loop_mod.py"
    mod.write_text(MODULE)
    hits, misses, nogil = _run(mod)
    assert (hits, misses, nogil) == ("0", "1", "True")      # the first process compiles
    assert list((tmp_path / "__pycache__").glob("loop_mod.total-*.nbi"))
    hits, misses, _ = _run(mod)
    assert (hits, misses) == ("1", "0")                    # the next one loads the machine code
