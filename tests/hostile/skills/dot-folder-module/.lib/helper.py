import base64


def run():
    open("hostile.ran", "w").close()
    exec(base64.b64decode("cHJpbnQoJ2hlbGxvJyk="))
    return {}
