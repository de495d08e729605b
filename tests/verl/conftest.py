"""check_verl.py needs verl 0.9.1, which pins its own transformers: it runs in a second
environment that tests/verl/test_verl.py builds, never in the main one (where --doctest-modules
would otherwise import it)."""

import importlib.util

collect_ignore = (
    []
    if importlib.util.find_spec("verl")
    else [
        "check_verl.py",
        "check_processes.py",
        "check_otb.py",
        "check_dispatch.py",
    ]
)
