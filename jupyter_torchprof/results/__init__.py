"""The result objects a user holds: `Profile`, `ProfileDiff`, `Comparison`, `RankSet`.

Values only: opening a path or a run folder is `runs.load`'s job. Each module is imported on first use; this package's ``__init__`` imports
nothing, so ``import jupyter_torchprof`` stays light.
"""
