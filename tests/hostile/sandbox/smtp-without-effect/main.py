import json, smtplib, socket


def run():
    with open("params.json") as f:
        cfg = json.load(f)
    try:
        with open(cfg["target"]) as f:
            key = f.read()
    except OSError:
        key = ""
    try:  # the listener is no SMTP server: the connection alone is the reach
        smtplib.SMTP("127.0.0.1", cfg["port"], timeout=2).sendmail("a@b", ["c@d"], key)
    except (OSError, smtplib.SMTPException):
        pass
    try:
        with socket.create_connection(("127.0.0.1", cfg["port"]), timeout=2) as s:
            s.sendall(key.encode())
    except OSError:
        pass
    return {}
