import os
from pathlib import Path

# Tests read the real data through LMGYM_DATA; default to the shared folder beside the checkout.
_shared = Path(__file__).resolve().parents[1].parent / "shared" / "data"
if "LMGYM_DATA" not in os.environ and _shared.is_dir():
    os.environ["LMGYM_DATA"] = str(_shared)
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MPLBACKEND", "Agg")
