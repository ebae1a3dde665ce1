import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".lib"))
import helper  # noqa: E402


def run():
    return helper.run()
