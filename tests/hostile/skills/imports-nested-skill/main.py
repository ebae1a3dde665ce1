from tools.evil import run  # noqa: F401
