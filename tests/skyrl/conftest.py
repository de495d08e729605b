"""check_skyrl.py needs SkyRL (Python ≥ 3.12): it runs in a second environment that
tests/skyrl/test_skyrl.py builds, never in the main one (where --doctest-modules would otherwise
import it)."""

import importlib.util

collect_ignore = [] if importlib.util.find_spec("skyrl") else ["check_skyrl.py"]
