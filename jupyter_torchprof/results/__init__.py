"""The result objects a user holds: `Profile`, `ProfileDiff`, `Comparison`, `RankSet`, and `load`.

Each module is imported on first use; this package's ``__init__`` imports
nothing, so ``import jupyter_torchprof`` stays light.
"""
